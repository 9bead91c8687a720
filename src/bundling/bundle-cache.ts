import type { BigIntStats } from "node:fs";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ToolBundle } from "../isolation/wire/messages.js";
import { sha256 } from "./sha256.js";
import { readRegularFile } from "../regular-file.js";
import { MAX_SOURCE_FILE_BYTES } from "../source-file.js";

export { sha256 };

/**
 * A temp-file suffix unique among the writers of one cache folder (process id, then a random part for
 * writers of one process). Not node:crypto: loading it costs a one-shot call ≈ 15 ms, and nothing here
 * needs unpredictability; the folder is the host's own.
 */
function tempSuffix(): string {
  return `${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

/** What identifies a file's version without reading it: device, inode, size, and both change times in ns. */
export type FileSignature = [dev: string, ino: string, size: string, mtimeNs: string, ctimeNs: string];

export function signatureOf(info: BigIntStats): FileSignature {
  return [String(info.dev), String(info.ino), String(info.size), String(info.mtimeNs), String(info.ctimeNs)];
}

/** One file a bundle was built from, as it was read for that build. */
export interface BundleInput {
  path: string;
  sha256: string;
  signature: FileSignature;
}

interface CacheRecord {
  bundle: Omit<ToolBundle, "displayName">;
  /** Characters of `bundle.code`, a check against a damaged record. */
  codeLength: number;
  inputs: BundleInput[];
  /** When the record was written (ms since the epoch): see `isRacy`. */
  recordedAtMs: number;
}

export interface BundleCacheOptions {
  /**
   * A file whose change or modification time is this close to (or after) the moment its record was
   * written may have changed again within the same timestamp tick without its status showing it (file
   * systems keep times at a granularity of milliseconds to seconds): such an input is checked by
   * content. Default: 3,000 ms.
   */
  racyWindowMs?: number;
}

const DEFAULT_RACY_WINDOW_MS = 3_000;

/**
 * Bundles on disk, one record per tool entry file, with every file the bundle was built from.
 *
 * A record is used only while every input is unchanged. An input whose status (device, inode, size,
 * change times) is the one recorded is unchanged without being read, unless the record is "racy" for
 * it (see `racyWindowMs`); any other input is read and compared by SHA-256 with the content the bundle
 * was built from. So a cached call reads only the records, and hashes nothing, once its files have
 * settled; a record that needed reading is written again with the files' new status.
 *
 * The record is the host's own file (in the data dir's cache folder, which tools cannot reach), written
 * atomically (temp file + rename): a concurrent reader sees the old record or the new one. Its code is
 * trusted as written; a record that does not parse or whose code is not the recorded length is ignored.
 */
export class BundleCache {
  private readonly racyWindowMs: number;

  constructor(
    private readonly dir: string,
    options: BundleCacheOptions = {},
  ) {
    this.racyWindowMs = options.racyWindowMs ?? DEFAULT_RACY_WINDOW_MS;
  }

  async get(key: string): Promise<CacheRecord | undefined> {
    let record: CacheRecord;
    try {
      record = JSON.parse(await readFile(this.file(key), "utf8")) as CacheRecord;
    } catch {
      return undefined;
    }
    if (!isWellFormed(record)) return undefined;
    let reread = false;
    const current: BundleInput[] = [];
    for (const input of record.inputs) {
      let info: BigIntStats;
      try {
        info = await stat(input.path, { bigint: true });
      } catch {
        return undefined;
      }
      const signature = signatureOf(info);
      if (sameSignature(signature, input.signature) && !isRacy(info, record.recordedAtMs, this.racyWindowMs)) {
        current.push(input);
        continue;
      }
      // Without blocking (a FIFO swapped in) and bounded; a match proves only that the content is the one
      // bundled, so nothing new is read into a bundle here.
      const content = await readRegularFile(input.path, MAX_SOURCE_FILE_BYTES).catch(() => undefined);
      if (!content || sha256(content) !== input.sha256) return undefined;
      // Status taken before the read: if the file changed in between, the next check reads it again.
      current.push({ path: input.path, sha256: input.sha256, signature });
      reread = true;
    }
    if (reread) await this.write(key, { ...record, inputs: current, recordedAtMs: Date.now() });
    return record;
  }

  /** `inputs`: every file the bundle was built from, as the build read it (see the bundler's loader). */
  async put(key: string, bundle: ToolBundle, inputs: BundleInput[]): Promise<void> {
    await this.write(key, { bundle: { hash: bundle.hash, code: bundle.code }, codeLength: bundle.code.length, inputs, recordedAtMs: Date.now() });
  }

  /** Small JSON side records keyed by bundle hash (e.g. a tool's validated description). */
  async getMeta<T>(name: string): Promise<T | undefined> {
    try {
      return JSON.parse(await readFile(join(this.dir, `${name}.meta.json`), "utf8")) as T;
    } catch {
      return undefined;
    }
  }

  async putMeta(name: string, value: unknown): Promise<void> {
    await this.writeAtomically(join(this.dir, `${name}.meta.json`), JSON.stringify(value));
  }

  /**
   * The source map of bundle `hash` (source-maps.ts), written before its record so that a record found
   * has its map. Read only when a call of the bundle fails.
   */
  async getSourceMap(hash: string): Promise<string | undefined> {
    if (!/^[0-9a-f]{64}$/.test(hash)) return undefined;
    return readFile(join(this.dir, `${hash}.map.json`), "utf8").catch(() => undefined);
  }

  async putSourceMap(hash: string, text: string): Promise<void> {
    if (/^[0-9a-f]{64}$/.test(hash)) await this.writeAtomically(join(this.dir, `${hash}.map.json`), text);
  }

  private async write(key: string, record: CacheRecord): Promise<void> {
    await this.writeAtomically(this.file(key), JSON.stringify(record));
  }

  private async writeAtomically(target: string, text: string): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true });
      const temp = `${target}.${tempSuffix()}.tmp`;
      await writeFile(temp, text);
      await rename(temp, target);
    } catch {
      // The cache is an optimisation: a read-only data dir still works, just slower.
    }
  }

  private file(key: string): string {
    return join(this.dir, `${key}.bundle.json`);
  }
}

function isWellFormed(record: CacheRecord): boolean {
  return (
    typeof record?.bundle?.code === "string" &&
    typeof record.bundle.hash === "string" &&
    record.bundle.code.length === record.codeLength &&
    typeof record.recordedAtMs === "number" &&
    Array.isArray(record.inputs) &&
    record.inputs.every((input) => typeof input?.path === "string" && typeof input.sha256 === "string" && Array.isArray(input.signature))
  );
}

function sameSignature(a: FileSignature, b: FileSignature): boolean {
  return a.length === b.length && a.every((part, index) => part === b[index]);
}

/**
 * True when the file's times are within `windowMs` of the record's own time, or after it: a later
 * write in the same timestamp tick would leave size and times as recorded (git's "racily clean").
 */
function isRacy(info: BigIntStats, recordedAtMs: number, windowMs: number): boolean {
  const threshold = BigInt(Math.floor(recordedAtMs - windowMs)) * 1_000_000n;
  return info.ctimeNs >= threshold || info.mtimeNs >= threshold;
}
