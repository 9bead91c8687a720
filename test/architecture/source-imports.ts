import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { PROJECT_ROOT } from "../../src/project-root.js";

/**
 * The imports of the project's sources, read with simple regular expressions (as the MCP TypeScript
 * SDK's tests read theirs), comments left out: what layering.test.ts judges.
 */

export interface Import {
  /** The importing file, relative to the project root. */
  from: string;
  /** The specifier as written. */
  specifier: string;
  /** The imported file, relative to the project root (relative specifiers only). */
  target?: string;
  /** `import type` / `export type`: gone at run time. */
  typeOnly: boolean;
  /** `import("…")`: loaded on first use. */
  dynamic: boolean;
}

export function sourceFiles(folder: string): string[] {
  return readdirSync(join(PROJECT_ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(folder, file));
}

/** The text without comment lines and trailing `// …` comments (doc comments may quote imports). */
export function code(file: string): string {
  return readFileSync(join(PROJECT_ROOT, file), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, (comment) => comment.replace(/[^\n]/g, " "))
    .replace(/(^|\s)\/\/.*$/gm, "$1");
}

const STATIC = /^(import|export)\s+(type\s+)?(?:[^;"']*?\s+from\s+)?["']([^"']+)["']/gm;
const DYNAMIC = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

export function importsOf(file: string): Import[] {
  const text = code(file);
  const found: Import[] = [];
  const add = (specifier: string, typeOnly: boolean, dynamic: boolean): void => {
    const target = specifier.startsWith(".") ? relative(PROJECT_ROOT, resolve(PROJECT_ROOT, dirname(file), specifier)).replace(/\.js$/, ".ts") : undefined;
    found.push({ from: file, specifier, typeOnly, dynamic, ...(target !== undefined ? { target } : {}) });
  };
  for (const match of text.matchAll(STATIC)) add(match[3] as string, match[2] !== undefined, false);
  for (const match of text.matchAll(DYNAMIC)) add(match[1] as string, false, true);
  return found;
}

export const within = (file: string | undefined, folder: string): boolean => file !== undefined && file.startsWith(`${folder}/`);
export const show = (imports: Import[]): string[] => imports.map((i) => `${i.from} imports ${i.specifier}`);
