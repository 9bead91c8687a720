import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../config.js";

let cached: string | undefined;

/** Compiled prelude parts (`sandbox/*.ts` → `dist/sandbox/*.js`), in the order they run. */
const PARTS = ["memory-guards.js", "capabilities.js", "prelude.js"];

/**
 * The prelude script, read once per process. Its parts are joined inside one function scope, so the
 * helpers one part declares for the next never become globals a tool could reach; the first part's
 * "use strict" directive makes the whole scope strict (strict frames give `caller` and call sites
 * nothing to hand out). The script's completion value is the prelude's entry object (`installPrelude`'s
 * result), which the host reads as a reference: it is never reachable from the global.
 */
export function readPrelude(): string {
  cached ??= `(function () {\n${PARTS.map((part) => readFileSync(join(PROJECT_ROOT, "dist", "sandbox", part), "utf8")).join("\n")}\nreturn installPrelude(globalThis);\n})();\n`;
  return cached;
}
