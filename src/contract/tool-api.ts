/**
 * The `@animaworks/tool` module: the one module a tool may import besides its own files, and the names
 * it exports. Part of the host ↔ isolate contract (isolate.ts), read by the host's bundler and by the
 * prelude that builds the module inside every isolate, and type-checked under both tsconfigs as isolate.ts
 * is. Unlike isolate.ts it is not inlined into the prelude, which needs only its type (`ToolApiExport`,
 * through sandbox/isolate-contract.d.ts). Types and plain constants only, no imports, as isolate.ts.
 */

/** The one module a tool may import besides its own files (src/bundling/bundler.ts resolves it). */
export const TOOL_API_MODULE = "@animaworks/tool";

/**
 * The names `@animaworks/tool` exports, read by both sides: the prelude provides exactly these (its
 * `toolApi` object is typed by this list), and the bundler lets a tool import exactly these. Types for
 * authors: sandbox/animaworks-tool.d.ts (test/bundling/tool-api.test.ts holds all three together).
 */
export const TOOL_API_EXPORTS = [
  "logger",
  "setTimeout",
  "clearTimeout",
  "sleep",
  "ToolError",
  "ToolConfigError",
  "InvalidInput",
  "fs",
  "fetch",
  "getCredential",
  "get_credential",
  "progress",
  "isCancelled",
  "CapabilityError",
] as const;

export type ToolApiExport = (typeof TOOL_API_EXPORTS)[number];
