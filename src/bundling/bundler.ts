import { isBuiltin } from "node:module";
import { constants } from "node:fs";
import { access, realpath, stat } from "node:fs/promises";
import { dirname, extname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { Plugin } from "esbuild";
import { TOOL_API_EXPORTS, TOOL_API_MODULE } from "../contract/tool-api.js";
import type { ErrorInfo } from "../errors.js";
import type { ToolBundle } from "../isolation/wire/messages.js";
import { BundleCache, type BundleCacheOptions, type BundleInput, sha256, signatureOf } from "./bundle-cache.js";
import { SourceMaps } from "./source-maps.js";
import { buildPythonBundle } from "./python-bundle.js";
import { MAX_SOURCE_FILE_BYTES, type SourceFile, SourceFileRefused, isInside, readSourceFile } from "../source-file.js";
import { isPythonBundle } from "../isolation/wire/tool-bundle.js";

/**
 * The only module that imports esbuild (lazily: a process whose bundles are all cached never loads it).
 *
 * Import policy (the sandbox's first line): a tool may import relative files inside its own folder and
 * the virtual module `@animaworks/tool`, nothing else. Resolution is checked on real paths, so `..`,
 * absolute paths and symlinks cannot leave the folder.
 *
 * Builds are hermetic. Every file of a bundle lives in a private namespace (`TOOL_NAMESPACE`), so esbuild
 * never touches the file system itself: it looks for no tsconfig.json, jsconfig.json or package.json (a
 * tool can write such files into its folder, and one that `extends` another Anima's secret, a FIFO or
 * /dev/zero once leaked, hung or bloated builds). The host gives the compiler options (`tsconfigRaw`).
 * Files are read here (source-file.ts): regular files with one link, judged by the descriptor opened
 * (inside the folder, whatever was swapped in after resolution), without blocking, at
 * most `MAX_SOURCE_FILE_BYTES` each and `MAX_BUILD_INPUT_BYTES` in all, and a build has a deadline
 * (`BUILD_TIMEOUT_MS`). Error messages name files relative to the folder and never quote a file the
 * tool could not have read.
 *
 * A tool's files are named in the namespace by their path relative to its folder, never by their host
 * path: esbuild writes each module's name into the bundle as a comment, and tool code can read the text
 * of the bundle's wrapper function (`caller` of a function its top level calls). The source map of each
 * bundle names the same relative paths and is kept (source-maps.ts) so that a tool's runtime errors can
 * name its lines.
 */
export interface ToolSourceFile {
  /** Absolute path of the tool's entry file. */
  path: string;
  /** Folder the tool may import from (its tools folder). */
  folder: string;
  /**
   * That folder's real path as discovery checked it, when it did (personal tools): reads are confined to
   * it, not to where `folder` leads now (a folder swapped for a link into another Anima's since).
   */
  folderReal?: string;
  /** The install's core tools (source-file.ts `hardLinksAllowed`); Animas' and shared tools are not. */
  core?: boolean;
  /** Shown in messages and stack traces, e.g. `personal/my_tool.ts`. */
  displayName: string;
}

export type BuildResult = { ok: true; bundle: ToolBundle; fromCache: boolean } | { ok: false; error: ErrorInfo };

/** Bump when the bundle format, the cache record or the prelude contract changes, to invalidate old caches. */
const BUILD_FORMAT_VERSION = "3";
const EXTENSIONS = ["", ".ts", ".mts", ".js", ".mjs", "/index.ts", "/index.js"];
/**
 * What a tool may import: code and JSON. esbuild would also accept CSS, which in a script bundle
 * becomes a second output file instead of code; anything else has no loader. Refused by name instead.
 */
const IMPORTABLE = new Set([".ts", ".mts", ".cts", ".js", ".mjs", ".cjs", ".json"]);
/** Namespace of a tool's own files: esbuild reads nothing of it from disk. */
const TOOL_NAMESPACE = "animaworks-tool-file";
export { MAX_SOURCE_FILE_BYTES };
/** Largest sum of a bundle's source files, in bytes. */
export const MAX_BUILD_INPUT_BYTES = 16 * 1024 * 1024;
/** Time one build may take, in ms. */
export const BUILD_TIMEOUT_MS = 10_000;
/** The compiler options of every build: none of a tool's own tsconfig.json applies. */
const TSCONFIG_RAW = { compilerOptions: { strict: true, useDefineForClassFields: true, verbatimModuleSyntax: false } };

/** The output file esbuild is told of (nothing is written): a source map needs an output path. */
const OUTPUT_NAME = ".animaworks-bundle.js";

export class ToolBundler {
  readonly cache: BundleCache;
  /** The maps of the bundles built here or found in the cache, for naming a failing tool's lines. */
  readonly sourceMaps: SourceMaps;

  constructor(cacheDir: string, cacheOptions?: BundleCacheOptions) {
    this.cache = new BundleCache(cacheDir, cacheOptions);
    this.sourceMaps = new SourceMaps(this.cache);
  }

  async build(source: ToolSourceFile): Promise<BuildResult> {
    // One record per entry file; whether it still holds is the cache's question (its inputs' status,
    // else their content).
    const key = sha256(`${BUILD_FORMAT_VERSION}\0${source.path}`);
    const cached = await this.cache.get(key);
    if (cached) return { ok: true, bundle: { ...cached.bundle, displayName: source.displayName }, fromCache: true };

    if (extname(source.path) === ".py") {
      const python = await buildPythonBundle(source, MAX_SOURCE_FILE_BYTES);
      return python.ok ? { ok: true, bundle: python.bundle, fromCache: false } : python;
    }
    try {
      await access(source.path, constants.R_OK);
    } catch {
      return { ok: false, error: { type: "LoadError", fault: "tool", message: `${source.displayName} could not be read` } };
    }
    const built = await bundleWithEsbuild(source);
    if (!built.ok) return built;
    const code = `${built.code}\n;__awRegister(typeof __awToolModule === "undefined" ? {} : __awToolModule);\n`;
    // esbuild's output starts with the host's own text; should it ever not, it must not pass for Python.
    if (isPythonBundle(code)) return { ok: false, error: { type: "LoadError", fault: "tool", message: `${source.displayName} could not be built` } };
    const bundle: ToolBundle = { hash: sha256(code), code, displayName: source.displayName };
    // The map first: a record found in the cache then has its map (unless the folder refused the write).
    if (built.sourceMap !== undefined) await this.sourceMaps.remember(bundle.hash, built.sourceMap);
    await this.cache.put(key, bundle, built.inputs);
    return { ok: true, bundle, fromCache: false };
  }
}

async function bundleWithEsbuild(
  source: ToolSourceFile,
): Promise<{ ok: true; code: string; sourceMap: string | undefined; inputs: BundleInput[] } | { ok: false; error: ErrorInfo }> {
  const esbuild = await import("esbuild");
  let folderReal: string;
  try {
    folderReal = source.folderReal ?? (await realpath(source.folder));
  } catch {
    return { ok: false, error: { type: "LoadError", fault: "tool", message: `the tools folder of ${source.displayName} is missing` } };
  }
  const entryReal = await realpath(source.path).catch(() => source.path);
  if (!isInside(entryReal, folderReal)) {
    return {
      ok: false,
      error: {
        type: "LoadError",
        fault: "tool",
        message: `${source.displayName} is a link to a file outside its tools folder`,
        hint: "replace the link with the file itself",
      },
    };
  }
  const inputs = new Map<string, BundleInput>();
  const budget = { bytes: 0 };
  let context: import("esbuild").BuildContext | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    context = await esbuild.context({
      entryPoints: [entryReal],
      tsconfigRaw: TSCONFIG_RAW,
      absWorkingDir: folderReal,
      bundle: true,
      write: false,
      format: "iife",
      globalName: "__awToolModule",
      platform: "neutral",
      target: "es2022",
      charset: "utf8",
      logLevel: "silent",
      // `import(name)` / `require(name)` with a computed name would be left for run time, where the
      // sandbox has nothing to load: refuse them when building, with esbuild's own message.
      logOverride: { "unsupported-dynamic-import": "error", "unsupported-require-call": "error" },
      legalComments: "none",
      // A separate map (the code gets no sourceMappingURL comment, so bundles are as before), without the
      // sources' text: only positions are looked up in it.
      sourcemap: "external",
      sourcesContent: false,
      outfile: join(folderReal, OUTPUT_NAME),
      plugins: [importPolicy(folderReal, source.displayName), readSources(inputs, budget, folderReal, source.core === true)],
    });
    const building = context.rebuild();
    const deadline = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), BUILD_TIMEOUT_MS);
    });
    const result = await Promise.race([building, deadline]);
    if (result === "timeout") {
      building.catch(() => undefined);
      await context.cancel();
      return {
        ok: false,
        error: {
          type: "LoadError",
          fault: "tool",
          message: `${source.displayName} could not be built within ${BUILD_TIMEOUT_MS / 1000} s`,
          hint: "make the tool and its helpers smaller",
        },
      };
    }
    const output = result.outputFiles?.find((file) => file.path.endsWith(OUTPUT_NAME));
    if (!output) return { ok: false, error: { type: "LoadError", fault: "tool", message: `${source.displayName} produced no output` } };
    const map = result.outputFiles?.find((file) => file.path.endsWith(`${OUTPUT_NAME}.map`));
    return { ok: true, code: output.text, sourceMap: map ? toolSourceMap(map.text) : undefined, inputs: [...inputs.values()] };
  } catch (error) {
    return { ok: false, error: describeBuildFailure(error, folderReal, source.displayName) };
  } finally {
    if (timer) clearTimeout(timer);
    await context?.dispose().catch(() => undefined);
  }
}

const TOOL_API_MODULE_NAMESPACE = "animaworks";

function importPolicy(folderReal: string, displayName: string): Plugin {
  return {
    name: "animaworks-import-policy",
    setup(build) {
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.kind === "entry-point") return { path: toolPath(args.path, folderReal), namespace: TOOL_NAMESPACE };
        if (args.path === TOOL_API_MODULE) return { path: TOOL_API_MODULE, namespace: TOOL_API_MODULE_NAMESPACE };
        if (!isRelativeSpecifier(args.path)) {
          return { errors: [{ text: forbiddenImportMessage(args.path) }] };
        }
        const target = resolve(args.resolveDir, args.path);
        // resolveDir is already a real path, so a `..` that climbs out is refused whether or not the
        // target exists (the message should not depend on what lies outside).
        const resolved = target !== folderReal && !isInside(target, folderReal) ? "outside" : await resolveInside(target, folderReal);
        if (resolved === "outside") {
          return { errors: [{ text: `import "${args.path}" leaves the tool's folder; tools may import only files in their own folder` }] };
        }
        if (resolved === undefined) return { errors: [{ text: `import "${args.path}" was not found next to ${displayName}` }] };
        if (!IMPORTABLE.has(extname(resolved))) {
          return { errors: [{ text: `import "${args.path}" is not allowed: tools may import only .ts, .mts, .cts, .js, .mjs, .cjs and .json files` }] };
        }
        return { path: toolPath(resolved, folderReal), namespace: TOOL_NAMESPACE };
      });
      build.onLoad({ filter: /.*/, namespace: TOOL_API_MODULE_NAMESPACE }, () => ({
        contents: toolApiModuleSource(),
        loader: "js",
      }));
    },
  };
}

/**
 * Reads every file of the bundle itself (esbuild reads none: they are in `TOOL_NAMESPACE`), recording
 * each one's status and SHA-256 from the same open descriptor as its content: the cache record then
 * describes exactly what was bundled, even if a file changes during the build (it would no longer
 * match, and be rebuilt). Read by `readSourceFile` (source-file.ts): the file actually opened must be a
 * regular file with one link inside the folder, whatever was swapped in since the import was resolved.
 */
function readSources(inputs: Map<string, BundleInput>, budget: { bytes: number }, folderReal: string, hardLinksAllowed: boolean): Plugin {
  return {
    name: "animaworks-read-sources",
    setup(build) {
      build.onLoad({ filter: /.*/, namespace: TOOL_NAMESPACE }, async (args) => {
        const name = args.path;
        const path = resolve(folderReal, args.path);
        if (!isInside(path, folderReal)) return { errors: [{ text: `${name} is outside the tool's folder` }] };
        let file: SourceFile;
        try {
          file = await readSourceFile(path, folderReal, MAX_SOURCE_FILE_BYTES, name, { hardLinksAllowed });
        } catch (error) {
          if (error instanceof SourceFileRefused) return { errors: [{ text: error.line }] };
          throw error;
        }
        budget.bytes += file.bytes.length;
        if (budget.bytes > MAX_BUILD_INPUT_BYTES) return { errors: [{ text: `the tool's sources are larger than ${MAX_BUILD_INPUT_BYTES} bytes in all` }] };
        inputs.set(path, { path, sha256: sha256(file.bytes), signature: signatureOf(file.stats) });
        return { contents: file.bytes, loader: LOADERS[extname(path)] ?? "js", resolveDir: dirname(path) };
      });
    },
  };
}

const LOADERS: Record<string, "ts" | "js" | "json"> = { ".ts": "ts", ".mts": "ts", ".cts": "ts", ".js": "js", ".mjs": "js", ".cjs": "js", ".json": "json" };

function isRelativeSpecifier(specifier: string): boolean {
  return specifier === "." || specifier === ".." || specifier.startsWith("./") || specifier.startsWith("../");
}

function forbiddenImportMessage(specifier: string): string {
  const builtin = isBuiltin(specifier);
  const what =
    /^[a-z]+:/i.test(specifier) && !specifier.startsWith("node:")
      ? "URL imports are not allowed"
      : builtin
        ? "Node built-ins are not available in the sandbox"
        : isAbsolute(specifier)
          ? "absolute paths are not allowed"
          : "npm packages are not available in the sandbox";
  return `import "${specifier}" is not allowed: ${what}. Tools may import only relative files in their own folder and "${TOOL_API_MODULE}" (which provides logger, timers, errors and host capabilities)`;
}

/**
 * The first candidate that exists and is a file (so `./helper` finds `helper.ts` even when a folder
 * `helper/` sits beside it). Any existing candidate outside the folder refuses the import, even if a
 * later one would have been inside: a link out of the folder is never silently skipped.
 */
// eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents -- "outside" is a sentinel no resolved (absolute) path can equal
async function resolveInside(base: string, folderReal: string): Promise<string | "outside" | undefined> {
  for (const extension of EXTENSIONS) {
    let real: string;
    try {
      real = await realpath(base + extension);
    } catch {
      continue;
    }
    if (real === folderReal) continue; // `import "."`: only the folder's index file can answer
    if (!isInside(real, folderReal)) return "outside";
    const info = await stat(real).catch(() => undefined);
    if (info?.isFile()) return real;
  }
  return undefined;
}

/** A file of the tool as named in `TOOL_NAMESPACE`: its path relative to the folder, with `/` (never a host path). */
function toolPath(path: string, folderReal: string): string {
  return relative(folderReal, path).split(sep).join("/");
}

/**
 * esbuild's map of a bundle as the host keeps it (source-maps.ts): each source a path relative to the
 * tool's folder (its name in `TOOL_NAMESPACE`), or "" for anything else (the `@animaworks/tool` module),
 * and nothing but what a position lookup needs. Undefined if esbuild's map cannot be read.
 */
function toolSourceMap(text: string): string | undefined {
  try {
    const map = JSON.parse(text) as { sources?: unknown; mappings?: unknown; names?: unknown };
    if (!Array.isArray(map.sources) || typeof map.mappings !== "string") return undefined;
    const prefix = `${TOOL_NAMESPACE}:`;
    const sources = map.sources.map((name) => (typeof name === "string" && name.startsWith(prefix) ? name.slice(prefix.length) : ""));
    return JSON.stringify({ version: 3, sources, names: Array.isArray(map.names) ? map.names : [], mappings: map.mappings });
  } catch {
    return undefined;
  }
}

function toolApiModuleSource(): string {
  const lines = TOOL_API_EXPORTS.map((name) => `export const ${name} = api.${name};`);
  return `const api = globalThis.__animaworksTool;\n${lines.join("\n")}\nexport default api;\n`;
}

const RUNTIME_LOADING = new Set(["unsupported-dynamic-import", "unsupported-require-call"]);

/** esbuild names the virtual module by its internal namespace; say what the module does provide. */
function explainMissingApiExport(text: string): string {
  const missing = new RegExp(`^No matching export in "${TOOL_API_MODULE_NAMESPACE}:${TOOL_API_MODULE}" for import "([^"]+)"$`).exec(text);
  if (!missing) return text;
  return `"${TOOL_API_MODULE}" has no export "${missing[1]}" (it provides: ${TOOL_API_EXPORTS.join(", ")})`;
}

function describeBuildFailure(error: unknown, folderReal: string, displayName: string): ErrorInfo {
  const failure = error as { errors?: Array<{ id?: string; text: string; location?: { file: string; line: number; column: number } | null }> };
  if (!Array.isArray(failure.errors) || failure.errors.length === 0) {
    return { type: "LoadError", fault: "tool", message: `${displayName} could not be built` };
  }
  const lines = failure.errors.slice(0, 5).map((entry) => {
    // esbuild counts columns from 0; editors, V8 and the source-mapped frames of runtime errors from 1.
    const where = entry.location
      ? `${relative(folderReal, resolve(folderReal, entry.location.file.replace(`${TOOL_NAMESPACE}:`, ""))) || displayName}:${entry.location.line}:${entry.location.column + 1}: `
      : "";
    const why =
      entry.id !== undefined && RUNTIME_LOADING.has(entry.id) ? " (the sandbox cannot load code at run time; import relative files by a fixed string)" : "";
    return `${where}${explainMissingApiExport(entry.text)}${why}`;
  });
  const more = failure.errors.length > 5 ? ` (and ${failure.errors.length - 5} more)` : "";
  return { type: "LoadError", fault: "tool", message: `${displayName} could not be built: ${lines.join("; ")}${more}` };
}
