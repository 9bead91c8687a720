import { createHash } from "node:crypto";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JobStore, SubmitJobInput } from "../../src/jobs/store.js";

export const BUNDLE_CODE = "export function dispatch() { return 'ok'; }";
export const BUNDLE_HASH = sha256(BUNDLE_CODE);

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * Where test databases go: /dev/shm (tmpfs) when there is one. These tests check logic and crash (SIGKILL)
 * safety, which rests on commits reaching the OS, not on fsync; on tmpfs an fsync is free, so the suite's
 * time does not depend on the disk. benchmarks/jobs.mjs measures durable latency on a real disk.
 */
const TEST_ROOT = (() => {
  try {
    accessSync("/dev/shm", constants.W_OK);
    return "/dev/shm";
  } catch {
    return tmpdir();
  }
})();

/** A throwaway directory, removed by `cleanup`. */
export function tempDir(prefix = "awt-jobs-"): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(TEST_ROOT, prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A submit for `anima` with everything else defaulted; the bundle must be stored first. */
export function jobInput(anima: string, overrides: Partial<SubmitJobInput> = {}): SubmitJobInput {
  return {
    anima,
    tool: "web",
    action: "fetch",
    schemaName: "web_fetch",
    argsJson: JSON.stringify({ url: "https://example.com" }),
    bundleHash: BUNDLE_HASH,
    ...overrides,
  };
}

export async function withBundle(store: JobStore): Promise<JobStore> {
  await store.putBundle(BUNDLE_HASH, BUNDLE_CODE);
  return store;
}

/** A clock the test moves by hand, so leases and backoffs expire without sleeping. */
export function fakeClock(start = 1_700_000_000_000): { now: () => number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

/** Polls `check` until it holds; fails after `timeoutMs` with `what` in the message. Never an open-ended wait. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5_000, intervalMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A promise the test resolves by hand: holds a job "running" exactly as long as the test wants. */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

/** Resolves when `signal` aborts (never otherwise): a runner that honours cancellation. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
