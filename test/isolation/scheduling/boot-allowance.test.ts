import { describe, expect, it } from "vitest";
import { BootAllowances } from "../../../src/isolation/scheduling/boot-allowance.js";
import { THRESHOLDS } from "../../../src/isolation/scheduling/judge.js";

const ALLOWANCE_MS = THRESHOLDS.pythonBootAllowanceMs;
const RENEWED_AFTER_MS = THRESHOLDS.pythonBootAllowanceRenewedAfterMs;

/**
 * The boot allowance (boot-allowance.ts): what the host grants a request that must boot a Python
 * interpreter, per process slot and Anima. Pure bookkeeping: each test plays the requests' times.
 */
describe("boot allowance", () => {
  it("many_python_tools: requests that need a boot share one window, and get none after it", () => {
    const allowances = new BootAllowances();
    expect(allowances.grant(0, "eve", 1_000)).toBe(ALLOWANCE_MS);
    // Seven more tools, or calls at once: each gets what is left of the first window, not a window of its own.
    for (let i = 1; i < 8; i++) expect(allowances.grant(0, "eve", 1_000 + i * 100)).toBe(ALLOWANCE_MS - i * 100);
    expect(allowances.grant(0, "eve", 1_000 + ALLOWANCE_MS)).toBe(0);
    expect(allowances.grant(0, "eve", 1_000 + RENEWED_AFTER_MS - 1)).toBe(0);
  });

  it("restart_renewal: a slot's restarts renew nothing; the allowance comes back only after its period", () => {
    const allowances = new BootAllowances();
    expect(allowances.grant(3, "eve", 0)).toBe(ALLOWANCE_MS);
    // The slot's process was demoted in place or crashed: the slot is the same, so is its record.
    expect(allowances.grant(3, "eve", ALLOWANCE_MS + 1)).toBe(0);
    expect(allowances.grant(3, "eve", RENEWED_AFTER_MS)).toBe(ALLOWANCE_MS);
  });

  it("is each Anima's own, per slot: another Anima's boot, or another slot, leaves it whole", () => {
    const allowances = new BootAllowances();
    expect(allowances.grant(0, "eve", 0)).toBe(ALLOWANCE_MS);
    expect(allowances.grant(0, "alice", ALLOWANCE_MS + 1)).toBe(ALLOWANCE_MS);
    expect(allowances.grant(1, "eve", ALLOWANCE_MS + 1)).toBe(ALLOWANCE_MS);
  });

  it("is small: about a boot from the process's snapshot, far below a call's timeout", () => {
    expect(ALLOWANCE_MS).toBeLessThanOrEqual(3_000);
    expect(RENEWED_AFTER_MS).toBeGreaterThanOrEqual(10 * ALLOWANCE_MS);
  });
});
