import { type ErrorInfo, ToolHostError, errorInfoOf, wireError } from "./errors.js";
import type { CallResult, ToolInfo } from "./host-api.js";
import type { ToolEntry } from "./registry/registry.js";
import { profileFor } from "./registry/schemas.js";

/** Plain helpers of the host (host.ts): result and listing shapes, argument injection. */

export function toToolInfo(entry: ToolEntry): ToolInfo {
  if (entry.state === "error") return { name: entry.name, origin: entry.origin, status: "error", error: entry.error, schemas: [], hasCliMain: false };
  return {
    name: entry.name,
    origin: entry.origin,
    status: "ok",
    hasCliMain: entry.tool.hasCliMain,
    bundleHash: entry.tool.bundle.hash,
    schemas: entry.tool.schemas.map((schema) => {
      const profile = profileFor(entry.tool.profile, schema.action);
      return {
        name: schema.name,
        action: schema.action,
        description: schema.description,
        parameters: schema.parameters,
        ...(schema.outputSchema ? { outputSchema: schema.outputSchema } : {}),
        ...(profile ? { profile } : {}),
      };
    }),
  };
}

/**
 * Adds `anima_dir` as the last key of a validated arguments object, without parsing and re-serialising
 * it on every call. `argsJson` is always `JSON.stringify` of a plain object without that key
 * (checkArguments removes it), so appending before the closing brace is exact.
 */
export function withAnimaDir(argsJson: string, animaDir: string): string {
  const entry = `"anima_dir":${JSON.stringify(animaDir)}`;
  return argsJson === "{}" ? `{${entry}}` : `${argsJson.slice(0, -1)},${entry}}`;
}

export function unknownTool(name: string, known: string[]): ToolHostError {
  return new ToolHostError(
    "ToolNotFound",
    `unknown tool "${name}"`,
    known.length > 0 ? `available tools: ${[...known].sort().join(", ")}` : "no tools are installed",
  );
}

/** A failed call's result: the one conversion of a call's `ErrorInfo` to the public `CallResult`. */
export function callFailure(info: ErrorInfo, durationMs: number): CallResult {
  return { status: "error", ...wireError(info), durationMs };
}

export function errorResult(error: unknown, durationMs: number): CallResult {
  return callFailure(errorInfoOf(error), durationMs);
}
