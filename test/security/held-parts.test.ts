import { waitingRequest } from "../helpers/waiting-requests.js";
import { afterEach, describe, expect, it } from "vitest";
import { join } from "node:path";
import type { CallOutcome, CallRequest } from "../../src/isolation/wire/messages.js";
import { SandboxPool } from "../../src/isolation/pool/sandbox-pool.js";
import { HeldChars } from "../../src/isolation/wire/parts.js";
import { PART_CHARS } from "../../src/isolation/wire/frames.js";
import { waitFor, within } from "../helpers/data-dir.js";
import { PROJECT_ROOT } from "./harness.js";

/**
 * The parts of strings too large for one frame (src/isolation/wire/parts.ts), held by the host for a
 * compromised sandbox process (test/fixtures/compromised/large-strings-process.mjs, under the real
 * launch) that never sends the message that would take them. One cordon's processes, however many it
 * has (a process demoted in place keeps its calls, and its parts, while a fresh one serves the
 * cordon), hold no more than the cordon's budget together, so that another cordon's large result still
 * crosses; and one process holds the parts of one message at a time. The budgets are set small here
 * (`heldPartLimits`) so that little fills them: the cordon's 1 Mi characters, the host's 1.5 Mi.
 */

const LARGE_STRINGS_PROCESS = join(PROJECT_ROOT, "test", "fixtures", "compromised", "large-strings-process.mjs");
const MI = 2 ** 20;
/** What one of eve's calls has the host hold: six parts. */
const HELD_CHARS = 6 * PART_CHARS;
/** alice's honest result, long enough to cross in parts (three). */
const ALICE_RESULT = "b".repeat(300_000);

interface CordonInternals {
  pools: Map<string, { processes: Array<{ demoteRunning(): boolean; pending: Map<number, { child: { pid: number } | undefined }> }> }>;
}

/** A call of alice's whose tool returns `ALICE_RESULT` (sent in parts, within her call's 1 MiB limit). */
function aliceBig(): CallRequest {
  const request = waitingRequest("alice", "big");
  return {
    ...request,
    bundle: { hash: "alice-big", displayName: "personal/big.js", code: `__awRegister({ dispatch: () => "b".repeat(300000) });` },
    maxResultBytes: MI,
  };
}

describe("parts of large strings a compromised process has the host hold", () => {
  let pool: SandboxPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  function start() {
    const violations: string[] = [];
    const written: number[] = [];
    const host = new HeldChars(1.5 * MI);
    pool = new SandboxPool({
      entryScript: LARGE_STRINGS_PROCESS,
      onStderr: () => {},
      onViolation: (message) => violations.push(message),
      invokeCapability: async (_context, name, argsJson) => {
        written.push(argsJson.length);
        return name === "fs.writeFile" ? { ok: true, value: null } : { ok: false, error: { type: "PermissionDenied", fault: "host", message: "no" } };
      },
      heldPartLimits: { perCordonChars: MI, host },
    });
    return { p: pool, host, violations, written, internals: pool as unknown as CordonInternals };
  }

  /** alice's large result crosses whole, and the host keeps serving her and a third cordon. */
  async function aliceServed(p: SandboxPool): Promise<void> {
    const outcome = await within(20_000, "alice's large result", p.call(aliceBig()));
    if (!outcome.ok || outcome.value.kind === "none") throw new Error(`alice's call failed: ${JSON.stringify(outcome).slice(0, 400)}`);
    expect(outcome.value.text.length).toBe(ALICE_RESULT.length);
    expect(outcome.value.text === ALICE_RESULT).toBe(true); // nothing of eve's parts in it
    expect(await p.call(waitingRequest("alice", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(await p.call(waitingRequest("bob", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
  }

  it("held_parts_across_cordon_processes: a process demoted in place and its fresh successor share their cordon's budget; alice's large result still crosses", async () => {
    const { p, host, violations, internals } = start();
    expect(await p.call(aliceBig())).toMatchObject({ ok: true }); // alice's process is up

    // eve's process holds one call's parts, then is demoted in place (as the judge does to a busy one):
    // it keeps that call, and its parts, while a fresh process takes eve's next call.
    const first = p.call(waitingRequest("eve", "waiting_forever", { attack: "held_parts", chars: HELD_CHARS }));
    await waitFor(() => host.chars === HELD_CHARS, 20_000);
    const slot = internals.pools.get("anima:eve")?.processes[0];
    const demotedPid = slot?.pending.values().next().value?.child?.pid;
    expect(slot?.demoteRunning()).toBe(true);
    let secondOutcome: CallOutcome | undefined;
    const second = p.call(waitingRequest("eve", "waiting_forever", { attack: "held_parts", chars: HELD_CHARS }));
    void second.then((outcome) => (secondOutcome = outcome));
    // The fresh process fills what is left of eve's cordon, and its next part is refused (without a
    // budget per cordon: both calls' 1.5 Mi were held, the host's all). The refused call's parts go with it.
    await waitFor(() => secondOutcome !== undefined || host.chars >= 1.5 * MI, 20_000);
    expect(secondOutcome).toMatchObject({
      ok: false,
      error: { type: "ExecutionError", fault: "host", message: expect.stringMatching(/^the sandbox processes of this Anima's cordon hold as much/) },
    });
    expect(host.chars).toBe(HELD_CHARS);
    const freshPid = p.pidFor("eve");
    expect(freshPid).toBeDefined();
    expect(freshPid).not.toBe(demotedPid); // two processes of eve's cordon held parts

    await aliceServed(p);
    expect(violations).toEqual([]); // a shortage, not a violation: the crossing process may be an honest one
    // eve's first call still runs in the demoted process; her cordon serves her as before.
    let firstEnded = false;
    void first.finally(() => (firstEnded = true));
    expect(await p.call(waitingRequest("eve", "waiting_quick"))).toMatchObject({ ok: true, value: { text: "done" } });
    expect(firstEnded).toBe(false);
  }, 60_000);

  it("held_parts_of_two_calls: a process that sends a second call's parts before the first's message is a violation; its parts are let go", async () => {
    const { p, host, violations } = start();
    expect(await p.call(aliceBig())).toMatchObject({ ok: true });
    const first = p.call(waitingRequest("eve", "waiting_forever", { attack: "held_parts", chars: 2 * PART_CHARS }));
    await waitFor(() => host.chars === 2 * PART_CHARS, 20_000);
    const evePid = p.pidFor("eve") as number;
    const second = p.call(waitingRequest("eve", "waiting_forever", { attack: "held_parts", chars: 2 * PART_CHARS }));
    await waitFor(() => violations.length > 0 && !p.pids().includes(evePid), 20_000);
    expect(violations[0]).toMatch(
      new RegExp(
        `^sandbox process ${evePid} sent a part of request \\d+ while request \\d+'s parts waited for their message; it was stopped and replaced \\(cordon anima:eve\\)$`,
      ),
    );
    for (const call of [first, second]) expect(await within(10_000, "eve's calls", call)).toMatchObject({ ok: false, error: { type: "SandboxCrashed" } });
    expect(host.chars).toBe(0);
    await aliceServed(p);
  }, 60_000);

  it("honest_large_strings: an honest process's concurrent large writes and large results, in calls running at once, are no violation", async () => {
    const { p, host, violations, written } = start();
    // Each call writes two texts of 300,000 characters at once (their arguments cross in parts) and
    // returns 300,000: the process sends each message's parts together, whatever runs beside it.
    const code = `__awRegister({ dispatch: async () => {
      const fs = __animaworksTool.fs;
      await Promise.all([fs.writeFile("a.txt", "w".repeat(300000)), fs.writeFile("b.txt", "w".repeat(300000))]);
      return "b".repeat(300000);
    } });`;
    const writer = { ...aliceBig(), bundle: { hash: "alice-writer", displayName: "personal/writer.js", code } };
    const outcomes = await within(30_000, "alice's writing calls", Promise.all([1, 2, 3].map(() => p.call(writer))));
    for (const outcome of outcomes) expect(outcome.ok && outcome.value.kind !== "none" && outcome.value.text === ALICE_RESULT).toBe(true);
    expect(written).toHaveLength(6);
    for (const chars of written) expect(chars).toBeGreaterThan(300_000);
    expect(violations).toEqual([]);
    expect(host.chars).toBe(0);
  }, 60_000);
});
