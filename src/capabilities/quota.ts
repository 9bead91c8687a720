import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { ToolHostError } from "../errors.js";

/**
 * Disk quota per Anima directory: bytes and entries. Usage is measured by walking the directory (links
 * are counted, never followed) and then kept up to date by the writes that go through the capability;
 * it is re-measured when older than `maxAgeMs`, because the Anima also writes files by other means.
 * One tracker per directory per process, shared by every call of that Anima.
 */
export class QuotaTracker {
  private static readonly trackers = new Map<string, QuotaTracker>();
  private usage: { bytes: number; entries: number; measuredAt: number } | undefined;
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
    const usage = this.usage as { bytes: number; entries: number };
    if (deltaBytes > 0 && usage.bytes + deltaBytes > this.quotaBytes) {
      throw new ToolHostError("PermissionDenied", `the Anima's disk quota of ${this.quotaBytes} bytes would be exceeded (${usage.bytes} used)`, "remove files the Anima no longer needs");
    }
    if (deltaEntries > 0 && usage.entries + deltaEntries > this.maxEntries) {
      throw new ToolHostError("PermissionDenied", `the Anima's limit of ${this.maxEntries} files and folders would be exceeded`, "remove files the Anima no longer needs");
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
    let bytes = 0;
    let entries = 0;
    const pending = [this.dir];
    // Stop counting well past the limit: the answer ("over") is known, and a huge tree must not stall.
    while (pending.length > 0 && entries <= this.maxEntries * 2) {
      const dir = pending.pop() as string;
      const names = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const entry of names) {
        entries++;
        const path = join(dir, entry.name);
        if (entry.isDirectory()) pending.push(path);
        else if (entry.isFile()) bytes += (await lstat(path).catch(() => ({ size: 0 }))).size;
      }
    }
    this.usage = { bytes, entries, measuredAt: Date.now() };
  }
}
