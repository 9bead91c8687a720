import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../config.js";

let cached: string | undefined;

/** The compiled prelude (`sandbox/prelude.ts` → `dist/sandbox/prelude.js`), read once per process. */
export function readPrelude(): string {
  cached ??= readFileSync(join(PROJECT_ROOT, "dist", "sandbox", "prelude.js"), "utf8");
  return cached;
}
