import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AuditEvent, AuditRecord } from "../../src/audit/audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { fuzzParameters, propertyTimeoutMs } from "../property/settings.js";

/**
 * `audit events --call ID` reads only the lines holding the id (AuditQuery.callId); `audit events` reads them
 * all. An auditor who traces a call must see its records in the order the whole log shows them. Within one
 * millisecond, records of several calls spread over an Anima's two trails were ordered by which other
 * calls' records stood beside them (review: call_order_depends_on_neighbours): a call's use in the
 * ordinary trail and its denial in the security trail came in one order unfiltered and the other with
 * `--call`.
 */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awt-call-order-"));
});
afterEach(() => {
  vi.useRealTimers();
  rmSync(dir, { recursive: true, force: true });
});

type Step = { call: number; kind: "call_start" | "capability" | "denied" | "call" };

function eventOf(step: Step): AuditEvent {
  const base = { callId: `c${step.call}`, anima: "eve", tool: "t" };
  if (step.kind === "call_start") return { kind: "call_start", ...base, schema: "t_x", version: "v1", pid: 4_194_000 };
  if (step.kind === "call") return { kind: "call", ...base, schema: "t_x", durationMs: 1, outcome: "ok" };
  return { kind: "capability", ...base, operation: "fs.readFile", target: `n/${step.call}`, outcome: step.kind === "denied" ? "denied" : "ok" };
}

/** Appends `steps` in one millisecond (an Anima's ordinary and security trails), then reads them back. */
async function writtenInOneMillisecond(steps: readonly Step[]): Promise<JsonlAuditLog> {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(Date.parse("2026-12-07T00:00:00.000Z"));
  const log = new JsonlAuditLog(join(dir, `audit-${Math.random().toString(36).slice(2)}`));
  for (const step of steps) log.append(eventOf(step));
  await log.flush();
  vi.useRealTimers();
  return log;
}

const callIdOf = (record: AuditRecord): string | undefined => ("callId" in record ? record.callId : undefined);

async function expectCallReadsAgree(log: JsonlAuditLog, calls: number): Promise<void> {
  const all = await log.read({});
  const key = (record: AuditRecord) => `${record.kind}:${"outcome" in record ? record.outcome : ""}:${record.seq}`;
  for (let call = 0; call < calls; call++) {
    const callId = `c${call}`;
    const traced = await log.read({ callId });
    expect(traced.map(key), callId).toEqual(all.filter((record) => callIdOf(record) === callId).map(key));
  }
}

describe("one call's records, traced or in the whole log (call_order_depends_on_neighbours)", () => {
  it("come in the same order with --call as in the whole log when calls share a millisecond across trails", async () => {
    // Ordinary trail: A's start, B's start, B's end, A's use, A's end; security trail: A's denial, B's
    // denial. Unfiltered, B's end waited for B's denial behind A's denial, so A's denial went before A's
    // use; traced, A's use went first.
    const A = 0;
    const B = 1;
    const steps: Step[] = [
      { call: A, kind: "call_start" },
      { call: B, kind: "call_start" },
      { call: B, kind: "call" },
      { call: A, kind: "capability" },
      { call: A, kind: "denied" },
      { call: B, kind: "denied" },
      { call: A, kind: "call" },
    ];
    const log = await writtenInOneMillisecond(steps);
    await expectCallReadsAgree(log, 2);
    // And each call still goes start, uses, end.
    const all = await log.read({});
    for (const callId of ["c0", "c1"]) {
      const kinds = all.filter((record) => callIdOf(record) === callId).map((record) => record.kind);
      expect(kinds[0], callId).toBe("call_start");
      expect(kinds.at(-1), callId).toBe("call");
    }
    await log.close();
  });

  it("agree for any interleaving of several calls' records in one millisecond", { timeout: propertyTimeoutMs(30_000, 40) }, async () => {
    const calls = 4;
    // Each call's own records in the order a host appends them (start, uses and denials, end), the calls
    // interleaved at random.
    const callSteps = fc.array(fc.constantFrom<Step["kind"]>("capability", "denied"), { maxLength: 3 });
    const interleaving = fc
      .tuple(fc.array(callSteps, { minLength: calls, maxLength: calls }), fc.array(fc.nat(calls - 1), { minLength: 40, maxLength: 40 }))
      .map(([uses, picks]) => {
        const queues = uses.map((kinds, call) => [
          { call, kind: "call_start" as const },
          ...kinds.map((kind) => ({ call, kind })),
          { call, kind: "call" as const },
        ]);
        const steps: Step[] = [];
        for (const pick of picks) {
          const queue = queues.find((q, i) => i >= pick && q.length > 0) ?? queues.find((q) => q.length > 0);
          if (queue) steps.push(queue.shift() as Step);
        }
        for (const queue of queues) steps.push(...queue);
        return steps;
      });
    await fc.assert(
      fc.asyncProperty(interleaving, async (steps) => {
        const log = await writtenInOneMillisecond(steps);
        try {
          await expectCallReadsAgree(log, calls);
        } finally {
          await log.close();
        }
      }),
      fuzzParameters(40),
    );
  });
});
