import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ToolBundle } from "../isolation/protocol.js";
import { sha256 } from "./sha256.js";

export { sha256 };

/** A random temp-file suffix. node:crypto is loaded here, on a write, not by every cached run. */
function tempSuffix(): string {
  return process.getBuiltinModule("node:crypto").randomBytes(6).toString("hex");
}

interface CacheRecord {
  bundle: Omit<ToolBundle, "displayName">;
  /** Every file the bundle was built from, with the hash it had then. */
  inputs: Array<{ path: string; sha256: string }>;
}

/**
 * Bundles on disk, keyed by the entry file's path and content. A record is used only if every input
 * file still has the content it was built from, so an edit to an imported helper also rebuilds.
 * Writes are atomic (temp file + rename): a concurrent reader sees the old record or the new one.
 */
export class BundleCache {
  constructor(private readonly dir: string) {}

  /** `alreadyRead`: input files the caller has just read (the entry file), so they are not read twice. */
  async get(key: string, alreadyRead?: { path: string; content: Buffer }): Promise<CacheRecord | undefined> {
    let record: CacheRecord;
    try {
      record = JSON.parse(await readFile(this.file(key), "utf8")) as CacheRecord;
    } catch {
      return undefined;
    }
    if (!record?.bundle || typeof record.bundle.code !== "string" || !Array.isArray(record.inputs)) return undefined;
    for (const input of record.inputs) {
      const content = input.path === alreadyRead?.path ? alreadyRead.content : await readFile(input.path).catch(() => undefined);
      if (!content || sha256(content) !== input.sha256) return undefined;
    }
    if (sha256(record.bundle.code) !== record.bundle.hash) return undefined;
    return record;
  }

  async put(key: string, bundle: ToolBundle, inputPaths: string[]): Promise<void> {
    const inputs: CacheRecord["inputs"] = [];
    for (const path of inputPaths) {
      const content = await readFile(path).catch(() => undefined);
      if (!content) return; // an input vanished mid-build: do not cache a bundle we cannot verify later
      inputs.push({ path, sha256: sha256(content) });
    }
    const record: CacheRecord = { bundle: { hash: bundle.hash, code: bundle.code }, inputs };
    try {
      await mkdir(this.dir, { recursive: true });
      const temp = `${this.file(key)}.${tempSuffix()}.tmp`;
      await writeFile(temp, JSON.stringify(record));
      await rename(temp, this.file(key));
    } catch {
      // The cache is an optimisation: a read-only data dir still works, just slower.
    }
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
    try {
      await mkdir(this.dir, { recursive: true });
      const target = join(this.dir, `${name}.meta.json`);
      const temp = `${target}.${tempSuffix()}.tmp`;
      await writeFile(temp, JSON.stringify(value));
      await rename(temp, target);
    } catch {
      // optimisation only
    }
  }

  private file(key: string): string {
    return join(this.dir, `${key}.bundle.json`);
  }
}
