import { ByteLru } from "../byte-lru.js";
import type { BundlePosition } from "../isolation/wire/messages.js";
import type { BundleCache } from "./bundle-cache.js";
import { originalPositions } from "./mappings.js";

/**
 * The source maps of the host's bundles, by bundle hash: how a position in a bundle (a frame of a tool's
 * stack) becomes a line of the tool's own files, e.g. `lib/parse.ts:7:3`.
 *
 * Invariants:
 *  - A map is the bundler's (bundler.ts `toolSourceMap`): its `sources` are paths relative to the tool's
 *    folder, or "" for what is not a file of the tool (the `@animaworks/tool` module); it has no
 *    `sourcesContent`. It is written beside the bundle's cache record when the bundle is built (a cached
 *    bundle finds it there) and kept in memory for a while (a cache folder that cannot be written).
 *  - Only a position that falls on a mapped segment of its own line, in a source that is a relative path
 *    inside the folder, is named: a position of the esbuild runtime, of the appended registration, or
 *    beyond the bundle names nothing. The positions are untrusted; the map and its paths are the host's.
 *  - Nothing is read until a call fails: a warm call never touches this. A lookup scans the map's text
 *    once (mappings.ts) and builds nothing per segment. Memory is bounded by `KEPT_MAP_CHARS` (maps kept
 *    as their `sources` and `mappings` strings, least recently used dropped first); a map longer than
 *    `MAX_SOURCE_MAP_CHARS` is not kept, and its tool's errors name no lines.
 */

/** Longest source map kept, in characters (a 1 MB tool's map is ≈ 0.8 MB; the tools of tools/ ≈ 2 to 5 KB). */
export const MAX_SOURCE_MAP_CHARS = 4 * 2 ** 20;
/** Characters of maps kept in memory (built here, or read from the cache for a failing call). */
const KEPT_MAP_CHARS = 4 * 2 ** 20;
/** Frames named in a tool's error at most, innermost first. */
export const MAX_NAMED_FRAMES = 3;
/** Longest file path named in a frame; a longer one keeps its end. */
const MAX_SOURCE_NAME_CHARS = 160;

/** What a lookup needs of a map. */
interface KeptMap {
  sources: string[];
  mappings: string;
}

export class SourceMaps {
  private readonly kept = new ByteLru<KeptMap>(KEPT_MAP_CHARS);

  constructor(private readonly cache: Pick<BundleCache, "getSourceMap" | "putSourceMap">) {}

  /** Keeps the map of bundle `hash` (bundler.ts, when it builds the bundle). */
  async remember(hash: string, text: string): Promise<void> {
    const map = text.length <= MAX_SOURCE_MAP_CHARS ? keptMap(text) : undefined;
    if (!map) return;
    this.kept.set(hash, map, text.length);
    await this.cache.putSourceMap(hash, text);
  }

  /**
   * The tool's own lines at `positions` of bundle `hash`, as `path:line:column` (from 1), innermost first,
   * consecutive repeats once, at most `MAX_NAMED_FRAMES`. Empty when the map is gone or names none of them.
   */
  async locate(hash: string, positions: readonly BundlePosition[]): Promise<string[]> {
    const map = await this.mapOf(hash);
    if (!map) return [];
    const found = originalPositions(
      map.mappings,
      positions.map((position) => ({ line: position.line - 1, column: position.column - 1 })),
    );
    const named: string[] = [];
    for (const original of found) {
      const source = original ? map.sources[original.source] : undefined;
      if (!original || source === undefined || !isToolPath(source)) continue;
      const shown = source.length > MAX_SOURCE_NAME_CHARS ? `…${source.slice(-MAX_SOURCE_NAME_CHARS)}` : source;
      const label = `${shown}:${original.line + 1}:${original.column + 1}`;
      if (named.at(-1) === label) continue;
      named.push(label);
      if (named.length === MAX_NAMED_FRAMES) break;
    }
    return named;
  }

  private async mapOf(hash: string): Promise<KeptMap | undefined> {
    const kept = this.kept.get(hash);
    if (kept) return kept;
    const text = await this.cache.getSourceMap(hash);
    const map = text !== undefined && text.length <= MAX_SOURCE_MAP_CHARS ? keptMap(text) : undefined;
    if (map) this.kept.set(hash, map, (text as string).length);
    return map;
  }
}

/** The parts of a map's JSON a lookup uses, or undefined for a damaged map (no lines, as without a map). */
function keptMap(text: string): KeptMap | undefined {
  try {
    const map = JSON.parse(text) as { sources?: unknown; mappings?: unknown };
    if (!Array.isArray(map.sources) || typeof map.mappings !== "string") return undefined;
    return { sources: map.sources.map((source) => (typeof source === "string" ? source : "")), mappings: map.mappings };
  } catch {
    return undefined;
  }
}

/** A relative path inside the folder, as the bundler wrote it: no root, no `..` step, no control characters. */
function isToolPath(source: string): boolean {
  if (source === "" || source.startsWith("/") || /[\u0000-\u001f\u007f]/.test(source)) return false;
  return !source.split("/").some((step) => step === ".." || step === "");
}
