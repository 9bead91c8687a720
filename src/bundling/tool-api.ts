/**
 * The names `@animaworks/tool` exports. The prelude (`sandbox/prelude.ts`) defines the values and
 * `sandbox/animaworks-tool.d.ts` their types; this list is what the bundler lets a tool import.
 */
export const TOOL_API_MODULE = "@animaworks/tool";

export const TOOL_API_EXPORTS = [
  "logger",
  "setTimeout",
  "clearTimeout",
  "sleep",
  "ToolError",
  "ToolConfigError",
  "fs",
  "fetch",
  "getCredential",
  "get_credential",
  "progress",
  "isCancelled",
  "CapabilityError",
] as const;
