import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { HostOptions, LogRecord } from "../../src/host-options.js";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { type ToolHost, sandboxOf } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor, within } from "../helpers/data-dir.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * What the tests of a compromised sandbox process behind the host's doors share
 * (compromised-doors-daemon.test.ts, compromised-doors-mcp.test.ts): a data dir with alice, who has a
 * secret and a tool that reads it, and eve, whose only tool waits forever; a host whose every sandbox
 * process runs the compromised stand-in (`HostOptions.sandboxEntryScript`), which behaves as the real
 * entry except in the process that gets eve's calls; and one attack run through a door, with every
 * assertion made the same way whatever the door.
 */

/** escaped-process.mjs with a relay of anything the host hands it for another Anima (see its header). */
export const COMPROMISED_ENTRY = join(PROJECT_ROOT, "test", "fixtures", "compromised", "leaking-process.mjs");
export const SECRET = "alice-secret-5f0c9d";
const RELEASED = "alice's own release";

const VAULT = `
import { fs, sleep } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "vault_hold", description: "waits until release.txt exists, then returns it", input_schema: { type: "object", properties: {} } },
    { name: "vault_peek", description: "reads the secret", input_schema: { type: "object", properties: {} } },
  ];
}
export async function dispatch(name) {
  if (name === "vault_peek") return { secret: await fs.readFile("secret.txt") };
  while (!(await fs.exists("release.txt"))) await sleep(50);
  return { released: await fs.readFile("release.txt") };
}
`;

const WAITING = `
export function get_tool_schemas() {
  const properties = { attack: { type: "string" }, target: { type: "integer" }, type: { type: "string" } };
  return [
    { name: "waiting_forever", description: "never returns", input_schema: { type: "object", properties } },
    { name: "waiting_quick", description: "returns at once", input_schema: { type: "object", properties: {} } },
  ];
}
export function dispatch(name) {
  return name === "waiting_quick" ? "done" : new Promise(() => {});
}
`;

/** The data dir: the two Animas' tools, alice's secret, an empty core tools folder, and a call timeout both a daemon and its CLI clients read. */
export function doorsDataDir(): TempDataDir {
  const data = makeDataDir({
    "config.json": JSON.stringify({ animaworks_tool: { timeout_ms: 120_000 } }),
    "animas/alice/tools/vault.mjs": VAULT,
    "animas/alice/secret.txt": SECRET,
    "animas/eve/tools/waiting.mjs": WAITING,
  });
  mkdirSync(join(data.dir, "core-tools"));
  return data;
}

/** A host of the data dir with the compromised stand-in as every sandbox process's entry, its log in `logs`. */
export function doorsHostOptions(data: TempDataDir, logs: LogRecord[]): HostOptions {
  return { dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), onLog: (record) => logs.push(record), sandboxEntryScript: COMPROMISED_ENTRY };
}

export interface Attack {
  name: string;
  /** Further arguments of eve's call. */
  args?: Record<string, unknown>;
  /** Whether the attack names alice's call in flight (its id goes as `target`). */
  target?: boolean;
  /** The violation the host reports, given alice's call id. */
  reported: (aliceId: number) => RegExp;
}

const foreign = (name: string): Attack => ({
  name,
  target: true,
  reported: (aliceId) => new RegExp(`named request ${aliceId}, which the host never sent to it`),
});

export const ATTACKS: Attack[] = [
  { name: "malformed_frame", reported: () => /sent a frame of 9 bytes that is not JSON/ },
  { name: "message_flood", args: { type: "warmPool" }, reported: () => /flooding the host/ },
  foreign("foreign_capability"),
  foreign("foreign_write"),
  foreign("foreign_result"),
  foreign("foreign_log"),
  { name: "memory_bomb", reported: () => /went over a limit the host keeps outside its isolates \(memory: / },
];

/** What a caller got through a door: the error envelope or the tool's output, and everything it was shown. */
export interface DoorAnswer {
  /** `{ status: "error", error_type, … }` as the door gives it. */
  error?: Record<string, unknown>;
  output?: unknown;
  /** All the caller saw, verbatim (stdout and stderr, or the whole MCP result). */
  transcript: string;
}

export interface Door {
  /** The host behind the door. */
  host: ToolHost;
  call(anima: "alice" | "eve", schema: string, args?: Record<string, unknown>): Promise<DoorAnswer>;
}

/**
 * alice's call is in flight in her process while eve's call carries out `attack` in eve's. Asserts what
 * eve's caller got, that nothing of alice's reached eve or was served under alice's name, that alice's
 * calls (the one in flight included) are answered by her untouched process, that eve's process was
 * replaced, and the audit log.
 */
export async function attackThroughDoor(door: Door, data: TempDataDir, attack: Attack): Promise<void> {
  const { host } = door;
  const sandbox = sandboxOf(host);
  if (!sandbox) throw new Error("not a host made by createHost");
  const held = door.call("alice", "vault_hold");
  const { id: aliceId, pid: alicePid } = await sentCall(host, "alice");
  const eveCall = door.call("eve", "waiting_forever", { attack: attack.name, ...attack.args, ...(attack.target ? { target: aliceId } : {}) });
  let eveAnswered = false;
  void eveCall.finally(() => (eveAnswered = true));
  await sentCall(host, "eve", () => eveAnswered);
  // alice is answered while eve's process attacks (a flood lasts seconds before it is retired).
  const during = await within(60_000, "alice's call during the attack", door.call("alice", "vault_peek"));
  expect(during.output).toEqual({ secret: SECRET });

  // eve's caller: her process crashed, as far as she can tell; nothing of alice's.
  const eve = await within(90_000, `eve's ${attack.name} call`, eveCall);
  expect(eve.error).toMatchObject({ status: "error", error_type: "SandboxCrashed", fault: "host" });
  for (const leak of ["LEAKED", SECRET, RELEASED, "alice", "forged"]) expect(eve.transcript).not.toContain(leak);

  // The violation, reported as eve's cordon's; her process is gone, and a fresh one serves her.
  const violation = await auditedViolation(host);
  expect(violation).toMatch(attack.reported(aliceId));
  expect(violation).toMatch(/^sandbox process \d+ .*; it was stopped and replaced \(cordon anima:eve\)$/);
  const evePid = Number(/^sandbox process (\d+) /.exec(violation)?.[1]);
  expect(evePid).not.toBe(alicePid);
  await waitFor(() => !sandbox.pids().includes(evePid), 20_000);
  expect(await within(60_000, "eve's next call", door.call("eve", "waiting_quick"))).toMatchObject({ output: "done" });
  expect(sandbox.pidFor("eve")).not.toBe(evePid);

  // alice: answered by the process she had; her call in flight ends with her own result, not a forged one.
  expect(await within(60_000, "alice's call after the attack", door.call("alice", "vault_peek"))).toMatchObject({ output: { secret: SECRET } });
  expect(sandbox.pidFor("alice")).toBe(alicePid);
  data.write("animas/alice/release.txt", RELEASED);
  const released = await within(60_000, "alice's call in flight", held);
  expect(released.output).toEqual({ released: RELEASED });
  expect(released.transcript).not.toMatch(/forged|from alice|LEAKED/);
  expect(existsSync(join(data.dir, "animas", "alice", "from-eve.txt"))).toBe(false);

  // The audit log: the crash under eve; alice's calls all ok, nothing of hers denied or crashed.
  const records = await host.audit.read();
  expect(records).toContainEqual(expect.objectContaining({ kind: "sandbox_crash", anima: "eve", tool: "waiting" }));
  const alices = records.filter((record) => "anima" in record && record.anima === "alice");
  expect(alices.filter((record) => record.kind === "call").map((record) => ("outcome" in record ? record.outcome : undefined))).toEqual(["ok", "ok", "ok"]);
  expect(alices.filter((record) => record.kind === "sandbox_crash" || ("outcome" in record && record.outcome !== "ok"))).toEqual([]);
  // Every violation names eve's cordon: none was blamed on alice's process.
  for (const message of records.map(violationIn)) if (message !== undefined) expect(message).toMatch(/\(cordon anima:eve\)$/);
}

/** A `sandbox_crash` record's message when it is a protocol violation the pool reported (child-handle.ts). */
function violationIn(record: AuditRecord): string | undefined {
  return record.kind === "sandbox_crash" && / it was stopped and replaced \(cordon /.test(record.message) ? record.message : undefined;
}

/** The violation the host audited, once there is one. */
async function auditedViolation(host: ToolHost): Promise<string> {
  let message: string | undefined;
  await waitFor(async () => (message = (await host.audit.read()).map(violationIn).find((found) => found !== undefined)) !== undefined, 30_000, 50);
  return message as string;
}

interface PoolInternals {
  pools: Map<
    string,
    { processes: Array<{ pending: Map<number, { child: { pid: number } | undefined; request: { op: string; context?: { anima: string } } }> }> }
  >;
}

/**
 * The id of `anima`'s call once it was sent to its sandbox process, and that process (read from the
 * pool's records, as compromised-process.test.ts does: the id an attacker would have to guess). Stops
 * looking once `gone()` (the call was answered before it could be seen: then `-1`s).
 */
export async function sentCall(host: ToolHost, anima: string, gone: () => boolean = () => false): Promise<{ id: number; pid: number }> {
  // The pool under the executor's wrappers (the per-Anima queues, the tool-frame mapper).
  let layer = sandboxOf(host)?.executor as unknown as { inner?: unknown } | PoolInternals;
  while (!("pools" in layer)) layer = layer.inner as typeof layer;
  const pool = layer;
  let found: { id: number; pid: number } | undefined;
  await waitFor(
    () => {
      for (const process of [...pool.pools.values()].flatMap((cordon) => cordon.processes))
        for (const [id, pending] of process.pending)
          if (pending.request.op === "call" && pending.request.context?.anima === anima && pending.child) found = { id, pid: pending.child.pid };
      return found !== undefined || gone();
    },
    60_000,
    5,
  );
  return found ?? { id: -1, pid: -1 };
}
