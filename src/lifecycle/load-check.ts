import { mkdir, mkdtemp, realpath, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { resolveConfig } from "../config.js";
import type { HostOptions } from "../host-options.js";
import { ToolHostError } from "../errors.js";
import { MAX_SOURCE_FILE_BYTES, SourceFileRefused, readSourceFile } from "../source-file.js";
import type { HostFactory, ToolHost } from "../host-api.js";
import { TOOL_EXTENSIONS } from "../registry/discovery.js";
import { sharedSourceChecker } from "./source-checker.js";
import { isRelativeSpecifier } from "./source-scan.js";
import { type LoadCheck, MAX_TOOL_SOURCE_BYTES, type ToolLoader } from "./validate.js";

/**
 * Real loads for the validator: the tool is bundled and described in a sandbox exactly as the host
 * would when serving it (import policy, schema checks, handlers, collisions with the tools beside it,
 * shadowing by a core tool). Two ways:
 *  - hostLoader(host): for files in a tools folder of the host's data dir (`animas/<a>/tools/`,
 *    `common_tools/`; see toolsFolderOf), checked as installed, beside the other tools;
 *  - scratchLoader(): for any other file (a draft, anywhere): a throwaway host (made by the factory its
 *    caller hands it: only the composition root makes hosts) on a throwaway data dir whose Anima's
 *    `tools` folder receives a copy of the file (named as the tool it is checked as) and of the
 *    relative files it imports (its import closure, kept at the same relative places), so helpers
 *    resolve as they will for real. A copy, not a link to the folder: esbuild reads the nearest
 *    package.json, and a tool's folder in a project with `"type": "module"` would be bundled
 *    differently than in an Anima's directory. How the draft's name meets the tools already installed
 *    is installed-tools.ts's to say.
 */

/**
 * Loads files that live in `host`'s data dir. Refreshes the host first, so the file is checked as it is
 * now. A file is loaded under its own name: a `tool` name that differs is a problem (a draft to be
 * installed under another name is scratchLoader's).
 */
export function hostLoader(host: ToolHost): ToolLoader {
  return async (path, tool) => {
    const located = locate(host.config.dataDir, path);
    if (typeof located === "string") return { ok: false, problems: [located] };
    if (tool !== undefined && tool !== located.tool) {
      return { ok: false, problems: [`the host loads this file as tool "${located.tool}", not "${tool}"; check it as a draft outside the tools folder`] };
    }
    // The view the file is checked in only (its Anima's, or the view of no Anima for core and shared
    // tools): any Anima may validate, and a full refresh made every other Anima reload all it sees.
    host.refresh(located.anima ?? "");
    return describeFile(host, located.anima, located.tool, resolve(path));
  };
}

export interface ScratchLoaderOptions {
  /** Makes the throwaway host (`hostFromConfig`, as the program's entry hands it down). */
  hostFactory: HostFactory;
  /**
   * Core tools a tool must not shadow. Default: the product's `tools/`. `null`: none, so that a draft
   * named like a core tool is still loaded and checked itself (the caller then reports the clash, as
   * the CLI does with installed-tools.ts).
   */
  coreToolsDir?: string | null;
  /** Default: "in-process" (one short-lived load; no sandbox processes to start). */
  isolation?: HostOptions["isolation"];
  /** Load timeout, ms. Default: the host's (5,000). */
  loadTimeoutMs?: number;
  /** Parent of the throwaway data dirs. Default: the system temp dir. */
  tempDir?: string;
  /** The Anima asking, if any: reading the draft's imports is shared between Animas in turn (source-checker.ts). */
  anima?: string;
}

const SCRATCH_ANIMA = "validator";

/**
 * Loads any tool file in a throwaway host, as tool `tool` (default: the file's name without its
 * extension); nothing is written next to the file.
 */
export function scratchLoader(options: ScratchLoaderOptions): ToolLoader {
  return async (path, name) => {
    const file = basename(path);
    const extension = toolExtension(file);
    if (extension === undefined) return { ok: false, problems: [`"${file}" is not a tool file (${TOOL_EXTENSIONS.join(", ")})`] };
    const tool = name ?? file.slice(0, -extension.length);
    const entry = await realpath(resolve(path));
    const dataDir = await mkdtemp(join(options.tempDir ?? tmpdir(), "awt-validate-"));
    try {
      const animaDir = join(dataDir, "animas", SCRATCH_ANIMA);
      const refused = await copyImportClosure(entry, join(animaDir, "tools"), `${tool}${extension}`, options.anima);
      if (refused.length > 0) return { ok: false, problems: refused };
      const coreToolsDir = options.coreToolsDir === null ? join(dataDir, "no-core-tools") : options.coreToolsDir;
      const host = options.hostFactory(
        resolveConfig({
          dataDir,
          cacheDir: join(dataDir, "cache"),
          isolation: options.isolation ?? "in-process",
          ...(coreToolsDir !== undefined ? { coreToolsDir } : {}),
          ...(options.loadTimeoutMs !== undefined ? { loadTimeoutMs: options.loadTimeoutMs } : {}),
          // Warnings about the other files in the folder are not this file's findings.
          onLog: () => {},
        }),
      );
      try {
        return await describeFile(host, SCRATCH_ANIMA, tool, join(animaDir, "tools", `${tool}${extension}`));
      } finally {
        await host.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  };
}

/** Extensions tried for an import without one, in the bundler's order. */
const IMPORT_CANDIDATES = ["", ".ts", ".mts", ".js", ".mjs", "/index.ts", "/index.js"];
/** Bounds on what a scratch load copies: hand-written tools import a handful of helpers. */
const MAX_CLOSURE_FILES = 200;

/**
 * Copies `entry` (as `entryName`) and every file it imports by a literal relative path (transitively)
 * into `destination`, keeping their places relative to the entry's folder. Imports that leave the folder
 * or do not exist are not copied: the real load then reports them.
 *
 * Each file is read once by `readSourceFile` (source-file.ts), and its copy written from those bytes and
 * its imports scanned in them: the file actually opened must be a regular file with one link inside the
 * folder. A copy by path would follow a link (`c.json -> ../../../config.json`, or a folder swapped for
 * a link after the check) into the scratch folder, where the bundler sees an ordinary file. What is
 * refused is returned, one problem each, and nothing is loaded.
 */
async function copyImportClosure(entry: string, destination: string, entryName: string, anima: string | undefined): Promise<string[]> {
  const folder = dirname(entry);
  const entryTarget = join(destination, entryName);
  const pending = [entry];
  const copied = new Set<string>();
  const refused: string[] = [];
  while (pending.length > 0 && copied.size < MAX_CLOSURE_FILES) {
    const file = pending.pop() as string;
    if (copied.has(file)) continue;
    copied.add(file);
    const target = file === entry ? entryTarget : join(destination, relative(folder, file));
    // A helper whose name is the one the draft is checked as: the draft takes that place.
    if (file !== entry && target === entryTarget) continue;
    let bytes: Buffer;
    try {
      // Through its real path, as the bundler resolves an import (a helper that is a link to another file
      // of the folder loads there too); what is opened is judged (inside the folder, regular, one link).
      const real = await realpath(file).catch(() => file);
      ({ bytes } = await readSourceFile(real, folder, MAX_SOURCE_FILE_BYTES, relative(folder, file)));
    } catch (error) {
      if (!(error instanceof SourceFileRefused)) throw error;
      refused.push(error.line);
      continue;
    }
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, bytes);
    if (!/\.(?:[cm]?[jt]s)$/.test(file) || bytes.length > MAX_TOOL_SOURCE_BYTES) continue;
    for (const use of await sharedSourceChecker().importsOf(bytes.toString("utf8"), anima)) {
      if (use.specifier === undefined || !isRelativeSpecifier(use.specifier)) continue;
      const base = resolve(dirname(file), use.specifier);
      for (const candidate of IMPORT_CANDIDATES) {
        const found = base + candidate;
        const rel = relative(folder, found);
        if (rel === ".." || rel.startsWith(`..${sep}`)) break;
        // A first look only (it follows links): readSourceFile judges what is opened.
        if ((await stat(found).catch(() => undefined))?.isFile()) {
          pending.push(found);
          break;
        }
      }
    }
  }
  return refused;
}

function toolExtension(file: string): string | undefined {
  if (file.endsWith(".d.ts") || file.endsWith(".d.mts")) return undefined;
  return TOOL_EXTENSIONS.find((e) => file.endsWith(e));
}

function toolName(file: string): string | undefined {
  const ext = toolExtension(file);
  return ext ? file.slice(0, -ext.length) : undefined;
}

/**
 * Whether `path` is directly in a tools folder of the data dir: `{ anima }` for `animas/<anima>/tools/`,
 * `{ anima: undefined }` for `common_tools/`; undefined for any other place (a draft).
 */
export function toolsFolderOf(dataDir: string, path: string): { anima: string | undefined } | undefined {
  const segments = relative(resolve(dataDir), resolve(path)).split(sep);
  if (segments.length === 2 && segments[0] === "common_tools") return { anima: undefined };
  if (segments.length === 4 && segments[0] === "animas" && segments[2] === "tools") return { anima: segments[1] };
  return undefined;
}

/**
 * `path` as the host names it (under its `dataDir`) when the file is directly in one of its tools
 * folders, also when given through a link to the data dir or one of its folders; undefined otherwise.
 */
export async function installedPathOf(dataDir: string, path: string): Promise<string | undefined> {
  if (toolsFolderOf(dataDir, path)) return resolve(path);
  const [realDataDir, realFolder] = await Promise.all([realpath(dataDir).catch(() => undefined), realpath(dirname(resolve(path))).catch(() => undefined)]);
  if (realDataDir === undefined || realFolder === undefined) return undefined;
  const real = join(realFolder, basename(path));
  return toolsFolderOf(realDataDir, real) ? join(resolve(dataDir), relative(realDataDir, real)) : undefined;
}

/** Which Anima (undefined: shared) and tool a path in the data dir belongs to, or why it is none. */
function locate(dataDir: string, path: string): { anima: string | undefined; tool: string } | string {
  const file = basename(path);
  const tool = toolName(file);
  if (tool === undefined) return `"${file}" is not a tool file (${TOOL_EXTENSIONS.join(", ")})`;
  const folder = toolsFolderOf(dataDir, path);
  if (folder) return { anima: folder.anima, tool };
  return "the file is not in a tools folder of the host's data dir (animas/<name>/tools/ or common_tools/), so it cannot be loaded there";
}

async function describeFile(host: ToolHost, anima: string | undefined, tool: string, absolutePath: string): Promise<LoadCheck> {
  const expectedOrigin = anima === undefined ? "shared" : "personal";
  try {
    const info = await host.describe(anima, tool);
    if (info.origin !== expectedOrigin) {
      return { ok: false, problems: [`a ${info.origin} tool named "${tool}" takes precedence, so this file would never be used; rename it`] };
    }
    if (info.status === "error" && info.error) {
      return { ok: false, problems: [info.error.hint ? `${info.error.message} (${info.error.hint})` : info.error.message] };
    }
    return { ok: true, problems: [], schemas: info.schemas.map((schema) => schema.name) };
  } catch (error) {
    if (!(error instanceof ToolHostError) || error.type !== "ToolNotFound") throw error;
    // Not discovered: discovery says why (bad name, two files for one name, shadowing a core tool…).
    const listing = await host.list(anima);
    const reasons = listing.problems.filter((problem) => problem.file === absolutePath || problem.name === tool).map((problem) => problem.message);
    return { ok: false, problems: reasons.length > 0 ? reasons : [`the host does not discover "${basename(absolutePath)}" as a tool`] };
  }
}
