import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

// A data dir the user running the CLI cannot read or write: every case names the path and what to do,
// with PermissionDenied (exit 4), never a raw EACCES reported as a failure of the tool.
const ECHO = `
export function get_tool_schemas() { return [{ name: "echo_say", description: "say", input_schema: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } }]; }
export function dispatch(name, args) { return "said " + args.word; }
`;
const NOBODY = 65534;

let data: TempDataDir | undefined;
afterEach(() => {
  data?.cleanup();
  data = undefined;
});

/** The CLI run as another user (uid 65534) against a data dir owned by root. */
function asNobody(argv: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data!.dir, ...argv], {
    uid: NOBODY,
    gid: NOBODY,
    cwd: "/",
    env: { PATH: process.env["PATH"] ?? "/usr/bin", HOME: "/", ANIMAWORKS_NO_DAEMON: "1" },
    encoding: "utf8",
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** A data dir everyone may read and enter but only root may write (mkdtemp makes it 0700). */
function readOnlyDataDir(): TempDataDir {
  data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO });
  for (const dir of [data.dir, join(data.dir, "animas"), join(data.dir, "animas", "alice"), join(data.dir, "animas", "alice", "tools")]) chmodSync(dir, 0o755);
  return data;
}

describe.runIf(process.getuid?.() === 0)("a data dir this user cannot read or write", () => {
  it("read-only: a call works and says loudly that the audit log is not written", () => {
    readOnlyDataDir();
    const run = asNobody(["--anima", "alice", "echo", "say", "hi"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe("said hi\n");
    // The folder named is the audit folder, or the first of its own it could not make (animas/).
    const auditDir = join(data!.dir, "logs", "animaworks-tool", "audit");
    expect(run.stderr).toContain(`[error] animaworks.host: the audit log is not being written (cannot create the folder ${auditDir}`);
    expect(run.stderr).toMatch(/\(cannot create the folder [^)]*audit(\/animas)?: permission denied \(EACCES\)\)/);
    expect(run.stderr).toContain("run it as the data dir's owner, or fix the permissions");
  });

  it("read-only: a job command is PermissionDenied with the path (exit 4), and creates nothing", () => {
    readOnlyDataDir();
    const run = asNobody(["--anima", "alice", "submit", "echo", "say", "hi"]);
    expect(run.status).toBe(4);
    expect(run.stderr).toMatch(
      /^Error \(PermissionDenied\): cannot create the folder .*\/state\/animaworks-tool: permission denied \(EACCES\) — the data dir must be readable and writable by the user who runs animaworks-tool \(uid 65534\)/,
    );
    expect(run.stderr).not.toMatch(/ExecutionError|the tool/);
    expect(existsSync(join(data!.dir, "state"))).toBe(false);
  });

  it("an unreadable tools folder is named, not passed off as empty", () => {
    readOnlyDataDir();
    chmodSync(join(data!.dir, "animas", "alice", "tools"), 0o700);
    const run = asNobody(["--anima", "alice", "echo", "say", "hi"]);
    expect(run.stderr).toContain(`cannot list the folder ${join(data!.dir, "animas", "alice", "tools")}: permission denied (EACCES): its tools are not loaded`);
  });

  it("an unreadable Anima folder or data dir is PermissionDenied, not an unknown Anima", () => {
    readOnlyDataDir();
    chmodSync(join(data!.dir, "animas"), 0o700);
    const anima = asNobody(["--anima", "alice", "list"]);
    expect(anima.status).toBe(4);
    expect(anima.stderr).toMatch(/^Error \(PermissionDenied\): cannot look at .*\/animas\/alice: permission denied \(EACCES\)/);
    chmodSync(join(data!.dir, "animas"), 0o755);
    writeFileSync(join(data!.dir, "config.json"), "{}");
    chmodSync(data!.dir, 0o700);
    const whole = asNobody(["--anima", "alice", "list"]);
    expect(whole.status).toBe(4);
    expect(whole.stderr).toMatch(/^Error \(PermissionDenied\): cannot open .*\/config\.json: permission denied \(EACCES\)/);
  });
});

describe("the audit log's write failures", () => {
  it("are reported once until a write succeeds again, and never thrown", async () => {
    data = makeDataDir({ "not-a-folder": "x" });
    const failures: string[] = [];
    const log = new JsonlAuditLog(join(data.dir, "not-a-folder", "audit"), { flushIntervalMs: 1, onWriteError: (_error, file) => failures.push(file) });
    log.append({ kind: "call", callId: "c1", anima: "alice", tool: "echo", schema: "echo_say", outcome: "ok", durationMs: 1 });
    log.append({ kind: "call", callId: "c1", anima: "alice", tool: "echo", schema: "echo_say", outcome: "ok", durationMs: 1 });
    await waitFor(() => failures.length > 0);
    log.append({ kind: "call", callId: "c1", anima: "alice", tool: "echo", schema: "echo_say", outcome: "ok", durationMs: 1 });
    await log.flush();
    // Once, naming the first trail that could not be written (the announcement of alice's trail, or her trail).
    expect(failures).toHaveLength(1);
    expect(failures[0]!.startsWith(join(data.dir, "not-a-folder", "audit"))).toBe(true);
    await log.close();
  });
});
