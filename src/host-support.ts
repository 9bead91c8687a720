import { type ErrorInfo, ToolHostError, errorInfoOf, wireError } from "./errors.js";
import type { CallResult, ToolInfo } from "./host-api.js";
import type { ToolEntry } from "./registry/registry.js";
import { profileFor } from "./registry/profile.js";

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
  const closest = closestName(name, known);
  return new ToolHostError(
    "ToolNotFound",
    `unknown tool "${name}"${closest !== undefined ? `; did you mean "${closest}"?` : ""}`,
    known.length > 0 ? `available tools: ${[...known].sort().join(", ")}` : "no tools are installed",
  );
}

/** The known name a mistyped one most likely meant: within a third of its length in edits (at least 2), else none. */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const limit = Math.max(2, Math.floor(name.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name;
}

/** Levenshtein distance (insertions, deletions, substitutions), one row at a time. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/** A failed call's result: the one conversion of a call's `ErrorInfo` to the public `CallResult`. */
export function callFailure(info: ErrorInfo, durationMs: number): CallResult {
  return { status: "error", ...wireError(info), durationMs };
}

export function errorResult(error: unknown, durationMs: number): CallResult {
  return callFailure(errorInfoOf(error), durationMs);
}
