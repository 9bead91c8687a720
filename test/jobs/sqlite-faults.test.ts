import { closeSync, mkdirSync, openSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { ToolHostError } from "../../src/errors.js";
import { jobPaths } from "../../src/jobs/service.js";
import { SqliteJobStore } from "../../src/jobs/sqlite-store.js";
import { jobInput, tempDir, withBundle } from "./helpers.js";

/**
 * The embedded job store under faults: a damaged file is refused at open (SQLite quick_check), and every
 * SQLite error reaches the operator as the file, what happened and what to do (fault: host), never as
 * SQLite's bare "file is not a database" or "database or disk is full".
 */
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function dbPath(): string {
  const dir = tempDir();
  cleanups.push(dir.cleanup);
  return join(dir.dir, "jobs.db");
}

/** A store file holding enough jobs that its middle is in use (rows and index pages), closed. */
async function filledStore(path: string): Promise<void> {
  const store = await withBundle(new SqliteJobStore({ path }));
  for (let i = 0; i < 300; i++) await store.submit(jobInput(`anima${i % 7}`, { argsJson: JSON.stringify({ note: `${i}:${"x".repeat(900)}` }) }));
  await store.close();
}

/** Writes `bytes` over the file at `offset`, as a failing disk or a stray write would. */
function overwrite(path: string, offset: number, bytes: Buffer): void {
  const fd = openSync(path, "r+");
  try {
    writeSync(fd, bytes, 0, bytes.length, offset);
  } finally {
    closeSync(fd);
  }
}

/** 2,000 bytes of a fixed pseudo-random pattern (the same in every run). */
function garbage(length = 2_000): Buffer {
  const bytes = Buffer.alloc(length);
  let x = 0x2545f491;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

function thrown(fn: () => unknown): ToolHostError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ToolHostError);
    return error as ToolHostError;
  }
  throw new Error("expected an error");
}

describe("SqliteJobStore under faults", () => {
  it("refuses a database with garbage in its middle at open, naming the file and the remedy", async () => {
    const path = dbPath();
    await filledStore(path);
    overwrite(path, Math.floor(statSync(path).size / 2), garbage());
    const error = thrown(() => new SqliteJobStore({ path }));
    expect(error.type).toBe("ExecutionError");
    expect(error.fault).toBe("host");
    expect(error.message).toContain(`the job database ${path} is damaged (SQLite quick_check:`);
    expect(error.hint).toContain(`mv ${path} ${path}.damaged`);
  });

  it("says which file a smashed header is, and what to do, instead of 'file is not a database'", async () => {
    const path = dbPath();
    await filledStore(path);
    overwrite(path, 0, garbage(100));
    const error = thrown(() => new SqliteJobStore({ path }));
    expect(error.message).toBe(`the job database ${path} is damaged: file is not a database (SQLITE_NOTADB)`);
    expect(error).toMatchObject({ type: "ExecutionError", fault: "host" });
    expect(error.hint).toMatch(/run the command again: a new, empty job database is made/);
  });

  it("translates a full disk on submit into the file and what to free", async () => {
    const path = dbPath();
    const store = await withBundle(new SqliteJobStore({ path }));
    cleanups.push(() => void store.close());
    // SQLite reports a database that may not grow by a page exactly as a full disk (SQLITE_FULL).
    const db = (store as unknown as { db: Database.Database }).db;
    db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true }) as number}`);
    const error = await store.submit(jobInput("alice", { argsJson: JSON.stringify({ big: "y".repeat(64 * 1024) }) })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolHostError);
    expect(error).toMatchObject({
      type: "ExecutionError",
      fault: "host",
      message: `cannot write the job database ${path}: its file system is full (SQLITE_FULL)`,
      hint: expect.stringMatching(/^free space on the data dir's file system/),
    });
  });

  it("lets the CLI answer a damaged job database with the file and the hint (exit 1, one line)", async () => {
    const dir = tempDir("awt-jobs-cli-");
    cleanups.push(dir.cleanup);
    mkdirSync(join(dir.dir, "animas", "alice", "tools"), { recursive: true });
    const path = jobPaths(dir.dir).store;
    mkdirSync(join(path, ".."), { recursive: true });
    await filledStore(path);
    overwrite(path, 0, garbage(100));
    const out = { stdout: [] as string[], stderr: [] as string[] };
    const code = await main(
      ["--data-dir", dir.dir, "--anima", "alice", "jobs", "list"],
      { stdout: (t) => void out.stdout.push(t), stderr: (t) => void out.stderr.push(t) },
      { env: {} },
    );
    expect(code).toBe(1);
    expect(out.stderr.join("\n")).toMatch(
      new RegExp(`^Error \\(ExecutionError\\): the job database ${path} is damaged: file is not a database \\(SQLITE_NOTADB\\) — move it`),
    );
  });
});
