import { lstat, readdir } from "node:fs/promises";
import { ToolHostError } from "../errors.js";
import { entryPath, withHeldFolder } from "./paths.js";

/**
 * Folder levels the measurement descends (and so descriptors it holds at once). Tools cannot nest deeper
 * than their path limit (32 levels; fs.rename keeps every folder within it), so only files put there by
 * other means are deeper; those are not measured, and the directory then counts as over its quota.
 */
const MAX_DEPTH = 256;

interface Tally {
  bytes: number;
  entries: number;
  /** A folder deeper than MAX_DEPTH was found: its contents, of any size, are not in the tally. */
  unmeasured: boolean;
}

/**
 * Disk quota per Anima directory: bytes and entries. Usage is measured by walking the directory (links
 * are counted, never followed) and then kept up to date by the writes that go through the capability;
 * it is re-measured when older than `maxAgeMs`, because the Anima also writes files by other means.
 * One tracker per directory per process, shared by every call of that Anima.
 */
export class QuotaTracker {
  private static readonly trackers = new Map<string, QuotaTracker>();
  private usage: (Tally & { measuredAt: number }) | undefined;
  private measuring: Promise<void> | undefined;

  static for(dir: string, limits: { quotaBytes: number; maxFiles: number }): QuotaTracker {
    const key = `${dir}\0${limits.quotaBytes}\0${limits.maxFiles}`;
    let tracker = QuotaTracker.trackers.get(key);
    if (!tracker) {
      tracker = new QuotaTracker(dir, limits.quotaBytes, limits.maxFiles);
      QuotaTracker.trackers.set(key, tracker);
    }
    return tracker;
  }

  private constructor(
    private readonly dir: string,
    private readonly quotaBytes: number,
    private readonly maxEntries: number,
    private readonly maxAgeMs = 30_000,
  ) {}

  /** Accounts for a write; refuses it with PermissionDenied if it would exceed the quota. */
  async reserve(deltaBytes: number, deltaEntries: number): Promise<void> {
    if (!this.usage || Date.now() - this.usage.measuredAt > this.maxAgeMs) await this.measure();
    const usage = this.usage as Tally;
    // Unmeasured bytes may be any amount: nothing may grow until they are gone (removing them re-measures).
    if ((deltaBytes > 0 || deltaEntries > 0) && usage.unmeasured) {
      throw new ToolHostError(
        "PermissionDenied",
        `the Anima's directory holds folders nested deeper than ${MAX_DEPTH} levels, which its disk quota cannot measure; nothing more is stored until they are gone`,
        "remove the deeply nested folder (fs.rm with recursive removes it, from a folder a tool can name)",
      );
    }
    if (deltaBytes > 0 && usage.bytes + deltaBytes > this.quotaBytes) {
      throw new ToolHostError(
        "PermissionDenied",
        `the Anima's disk quota of ${this.quotaBytes} bytes would be exceeded (${usage.bytes} used)`,
        "remove files the Anima no longer needs",
      );
    }
    if (deltaEntries > 0 && usage.entries + deltaEntries > this.maxEntries) {
      throw new ToolHostError(
        "PermissionDenied",
        `the Anima's limit of ${this.maxEntries} files and folders would be exceeded`,
        "remove files the Anima no longer needs",
      );
    }
    usage.bytes = Math.max(0, usage.bytes + deltaBytes);
    usage.entries = Math.max(0, usage.entries + deltaEntries);
  }

  invalidate(): void {
    this.usage = undefined;
  }

  private measure(): Promise<void> {
    this.measuring ??= this.walk().finally(() => {
      this.measuring = undefined;
    });
    return this.measuring;
  }

  private async walk(): Promise<void> {
    const tally: Tally = { bytes: 0, entries: 0, unmeasured: false };
    const root = await lstat(this.dir).catch(() => undefined);
    if (root?.isDirectory()) await withHeldFolder(this.dir, root, (held) => this.count(held, tally, 0)).catch(() => false);
    this.usage = { ...tally, measuredAt: Date.now() };
  }

  /**
   * Counts the entries below the held folder `held` (`/proc/self/fd/N`). Every folder is entered through
   * a held descriptor (`withHeldFolder`): one swapped for a link while this runs is counted as one entry
   * and never entered, so the walk cannot leave the Anima's directory. Counting stops well past the
   * limit (the answer, "over", is known) and below `MAX_DEPTH` levels, which bounds the descriptors held
   * at once; a folder found there is marked unmeasured, never counted as one small entry (a quota walk
   * that under-counts is a quota bypass).
   */
  private async count(held: string, tally: Tally, depth: number): Promise<void> {
    // Byte names: a name that is not valid UTF-8 is measured as well (as a string it would not open).
    const names = await readdir(held, { encoding: "buffer" }).catch(() => [] as Buffer[]);
    for (const name of names) {
      if (tally.entries > this.maxEntries * 2) return;
      tally.entries++;
      const path = entryPath(held, name);
      const info = await lstat(path).catch(() => undefined);
      if (info?.isFile()) tally.bytes += info.size;
      if (info?.isDirectory() && depth >= MAX_DEPTH) tally.unmeasured = true;
      else if (info?.isDirectory()) await withHeldFolder(path, info, (child) => this.count(child, tally, depth + 1)).catch(() => false);
    }
  }
}
