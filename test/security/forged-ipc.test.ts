import { afterEach, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import type { CallContext, CallRequest, CapabilityReply } from "../../src/isolation/wire/messages.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import { waitFor } from "../helpers/data-dir.js";

/**
 * A sandbox process holds no authority: after an escape from an isolate, the code in that process can
 * write anything on its IPC channel. These tests put forged messages where the host reads that
 * channel (the child's "message" event) and check that the host serves nothing it did not dispatch:
 * no capability runs for another Anima or another request, the process is reported, killed and
 * replaced, and the pool keeps serving.
 */

/** A tool that waits until it is stopped, so that its request stays in flight. */
const WAITING_BUNDLE = {
  hash: "forged-ipc-waiting",
  displayName: "personal/waiting.js",
  code: `__awRegister({ dispatch: (name) => name === "waiting_quick" ? "done" : new Promise(() => {}) });`,
};

function request(anima: string, schemaName: string): CallRequest {
  return {
    op: "call",
    bundle: WAITING_BUNDLE,
    context: { anima, animaDir: `/nonexistent/animas/${anima}`, tool: "waiting" },
    entry: "call",
    schemaName,
    payloadJson: "{}",
    timeoutMs: 5_000,
    memoryLimitMb: 32,
    maxResultBytes: 10_000,
    maxLogLines: 10,
    maxLogLineChars: 100,
  };
}

describe("forged messages from a sandbox process", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
  });

  function start() {
    const served: Array<{ context: CallContext; name: string }> = [];
    const violations: string[] = [];
    pool = new SandboxPool({
      processes: 2,
      invokeCapability: async (context, name): Promise<CapabilityReply> => {
        served.push({ context, name });
        return { ok: true, value: "served" };
      },
      onViolation: (message) => violations.push(message),
    });
    const children = () => (pool as unknown as { processes: Array<{ child: ChildProcess | undefined }> }).processes.map((p) => p.child);
    return { pool, served, violations, children };
  }

  async function inFlight(p: SandboxPool, anima: string): Promise<{ id: number; pid: number }> {
    void p.call(request(anima, "waiting_forever"));
    const pid = p.pidFor(anima) as number;
    const process = (pool as unknown as { processes: Array<{ pid: number | undefined; pending: Map<number, { child: unknown }> }> }).processes.find((x) => x.pid === pid);
    // Sent to the child (not still queued for its start): only then could the child name it.
    await waitFor(() => [...(process?.pending.values() ?? [])].some((pending) => pending.child !== undefined), 5_000);
    return { id: [...(process?.pending.keys() ?? [])].at(-1) as number, pid };
  }

  it.each([
    ["a request id the host never sent", (_eve: number, _other: number) => ({ type: "capability", capabilityId: 1, id: 999_999, name: "fs.readFile", argsJson: '["secret.txt","utf8"]' })],
    [
      "a context naming another Anima",
      (eve: number) => ({ type: "capability", capabilityId: 1, id: eve, name: "fs.readFile", argsJson: '["x","utf8"]', context: { anima: "alice", animaDir: "/" } }),
    ],
    ["the old log shape with a context", (eve: number) => ({ type: "log", line: { level: "info", message: "x", context: { anima: "alice", animaDir: "/", tool: "t" } }, id: eve })],
    ["a response with an error type outside the protocol", (eve: number) => ({ type: "response", id: eve, outcome: { ok: false, error: { type: "Root", message: "x" } } })],
    // It would restart the wait before its process is judged for its share, again and again.
    ["a second ready", () => ({ type: "ready" })],
  ])("%s: refused, reported, the process replaced", async (_label, forge) => {
    const { pool: p, served, violations, children } = start();
    const eve = await inFlight(p, "eve");
    const child = children().find((c) => c?.pid === eve.pid) as ChildProcess;
    child.emit("message", forge(eve.id, 0));
    await waitFor(() => violations.length > 0 && !p.pids().includes(eve.pid), 5_000);
    expect(served).toEqual([]);
    expect(violations[0]).toMatch(/it was stopped and replaced/);
    // The pool keeps serving, on fresh processes.
    expect(await p.call(request("bob", "waiting_quick"))).toMatchObject({ ok: true, value: { kind: "text", text: "done" } });
  });

  it("a capability request for another process's call is refused", async () => {
    const { pool: p, served, violations, children } = start();
    const eve = await inFlight(p, "eve");
    await p.call(request("alice", "waiting_quick")); // placed on the other (idle) process
    const alicePid = p.pidFor("alice");
    expect(alicePid).not.toBe(eve.pid);
    const aliceChild = children().find((c) => c?.pid === alicePid) as ChildProcess;
    aliceChild.emit("message", { type: "capability", capabilityId: 1, id: eve.id, name: "fs.readFile", argsJson: '["secret.txt","utf8"]' });
    await waitFor(() => violations.length > 0, 5_000);
    expect(served).toEqual([]);
    expect(p.pids()).not.toContain(alicePid);
  });

  it("a bundle request naming a call of the slot's earlier (demoted) process is not answered with that call", async () => {
    const { pool: p, children } = start();
    const eve = await inFlight(p, "eve");
    type Slot = { pid: number | undefined; child: ChildProcess | undefined; available: boolean; demoteRunning(): boolean };
    const slot = (p as unknown as { processes: Slot[] }).processes.find((x) => x.pid === eve.pid) as Slot;
    expect(slot.demoteRunning()).toBe(true); // eve's call stays on the demoted process
    await waitFor(() => slot.available, 5_000);
    const fresh = slot.child as ChildProcess;
    expect(children().includes(fresh)).toBe(true);
    const sent: unknown[] = [];
    const send = fresh.send.bind(fresh);
    fresh.send = ((message: unknown, ...rest: never[]) => (sent.push(message), send(message as never, ...rest))) as typeof fresh.send;
    fresh.emit("message", { type: "needBundle", id: eve.id });
    // Were it answered, eve's request (her arguments, her tool's code) would go to the fresh process.
    await p.call(request("bob", "waiting_quick"));
    expect(JSON.stringify(sent)).not.toContain(`"id":${eve.id}`);
  });

  it("a genuine request runs for the Anima of the host's own record", async () => {
    const { pool: p, served, violations, children } = start();
    const eve = await inFlight(p, "eve");
    const child = children().find((c) => c?.pid === eve.pid) as ChildProcess;
    child.emit("message", { type: "capability", capabilityId: 77, id: eve.id, name: "fs.stat", argsJson: '["."]' });
    await waitFor(() => served.length > 0 || violations.length > 0, 5_000);
    expect(served).toEqual([{ context: request("eve", "").context, name: "fs.stat" }]);
    expect(violations).toEqual([]);
  });
});
