import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { WarmPoolReport } from "../isolation/pool/sandbox-pool.js";
import { isProcessAlive } from "../process-alive.js";

/**
 * Long-running hosts (process isolation: `serve`, `mcp`, library hosts) publish what their warm pools
 * hold, so that `audit`, another process, can show it. One owner-only JSON file per host process in
 * `{dataDir}/state/animaworks-tool/hosts/`, rewritten every `PUBLISH_EVERY_MS` and removed on close; a
 * file whose process is gone is ignored (and removed) by readers. Not reachable by tools: it lies outside
 * every Anima's folder. The figures are those each sandbox process reports of itself (no limit relies
 * on them).
 */
export interface HostStatus {
  pid: number;
  startedAt: string;
  updatedAt: string;
  warmPools: WarmPoolReport[];
}

const PUBLISH_EVERY_MS = 2_000;

export function hostStatusDir(dataDir: string): string {
  return join(dataDir, "state", "animaworks-tool", "hosts");
}

export class HostStatusPublisher {
  private readonly file: string;
  private readonly startedAt = new Date().toISOString();
  private readonly timer: NodeJS.Timeout;
  private publishing: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly dataDir: string,
    private readonly report: () => Promise<WarmPoolReport[]>,
  ) {
    this.file = join(hostStatusDir(dataDir), `${process.pid}.json`);
    this.timer = setInterval(() => void this.publish(), PUBLISH_EVERY_MS).unref();
  }

  /** Writes the status now (at most one write at a time). A failure (read-only data dir) is not fatal. */
  publish(): Promise<void> {
    this.publishing ??= this.write().finally(() => {
      this.publishing = undefined;
    });
    return this.publishing;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.publishing;
    rmSync(this.file, { force: true });
  }

  private async write(): Promise<void> {
    const warmPools = await this.report().catch(() => []);
    if (this.closed) return;
    const status: HostStatus = { pid: process.pid, startedAt: this.startedAt, updatedAt: new Date().toISOString(), warmPools };
    try {
      mkdirSync(hostStatusDir(this.dataDir), { recursive: true, mode: 0o700 });
      const temporary = `${this.file}.${process.hrtime.bigint()}.tmp`;
      writeFileSync(temporary, JSON.stringify(status), { mode: 0o600 });
      renameSync(temporary, this.file);
    } catch {
      // the status is for operators; a data dir that cannot take it costs nothing else
    }
  }
}

/** The published status of every host of this data dir whose process is alive. */
export function readHostStatuses(dataDir: string): HostStatus[] {
  const dir = hostStatusDir(dataDir);
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => /^\d+\.json$/.test(name));
  } catch {
    return [];
  }
  const statuses: HostStatus[] = [];
  for (const name of names) {
    const pid = Number(name.slice(0, -".json".length));
    if (!isProcessAlive(pid)) {
      rmSync(join(dir, name), { force: true });
      continue;
    }
    try {
      const status = JSON.parse(readFileSync(join(dir, name), "utf8")) as HostStatus;
      if (status.pid === pid && Array.isArray(status.warmPools)) statuses.push(status);
    } catch {
      // being replaced, or not ours: skipped
    }
  }
  return statuses.sort((a, b) => a.pid - b.pid);
}
