import { type ChildProcess, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { type CallOptions, type CallResult, type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

/**
 * Shared set-up for the security suite: a host over a throwaway data dir, the hostile fixtures
 * (test/fixtures/hostile/<attack>.ts, installed as personal tools named after the attack), a benign
 * `counter` control tool, and the assertions every attack test makes.
 */

export const HOSTILE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "hostile");
export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export type IsolationMode = "process" | "in-process";
export const MODES: IsolationMode[] = ["process", "in-process"];

/**
 * The control tool. Its module-level counter shows whether an isolate was reused (it increments) or is
 * fresh (it restarts at 1). `counter_hang` lets a test time out this very isolate (spinning: its Anima is
 * then over its share and runs in the low-priority process for a while); `counter_wait` times out
 * without using the CPU.
 */
export const COUNTER_TOOL = `
import { sleep } from "@animaworks/tool";
let calls = 0;
export function get_tool_schemas() {
  return [
    { name: "counter_count", description: "count calls in this isolate", input_schema: { type: "object", properties: {} } },
    { name: "counter_hang", description: "spin forever", input_schema: { type: "object", properties: {} } },
    { name: "counter_bloat", description: "allocate until stopped", input_schema: { type: "object", properties: {} } },
    { name: "counter_slow", description: "count after 300 ms", input_schema: { type: "object", properties: {} } },
    { name: "counter_wait", description: "wait forever without using the CPU", input_schema: { type: "object", properties: {} } },
  ];
}
export async function dispatch(name: string) {
  calls++;
  if (name === "counter_count") return { calls };
  if (name === "counter_slow") {
    await sleep(300);
    return { calls };
  }
  if (name === "counter_hang") for (;;) {}
  if (name === "counter_wait") return new Promise(() => {});
  const hoard: unknown[] = [];
  for (;;) hoard.push(new Array(100_000).fill(calls));
}
`;

export interface Harness {
  /** The host itself with process isolation; with in-process isolation it runs in a child process (see in-process-host.mjs). */
  host: ToolHost | undefined;
  data: TempDataDir;
  logs: LogRecord[];
  /**
   * Lines the in-process host's process wrote to its stderr other than V8's heap-limit reports (which are
   * expected there: see `isHeapLimitReport`). They are also passed on to the test's stderr. Always empty
   * with process isolation, where the host is the test's own process and sandbox processes' stderr
   * reaches `logs` (src/isolation/pool/child-stderr.ts).
   */
  strayStderr: string[];
  /** Installs hostile fixture `attack` as a personal tool of `anima`. */
  install(anima: string, attack: string): void;
  call(anima: string, schema: string, args?: Record<string, unknown>, options?: CallOptions): Promise<CallResult>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  mode: IsolationMode;
  timeoutMs?: number;
  memoryLimitMb?: number;
  loadTimeoutMs?: number;
  sandboxProcesses?: number;
  /** Default: the host's ("anima": each Anima in processes of its own). */
  cordons?: "anima" | "all";
  maxLogLinesPerCall?: number;
  maxLogLineChars?: number;
  maxConcurrentCallsPerAnima?: number;
  maxQueuedCallsPerAnima?: number;
  /** Animas to create, each with the counter tool; hostile fixtures are added with `install`. */
  animas?: string[];
  onLog?: (record: LogRecord) => void;
  /** The host's log sink throws (an EPIPE naming a host path) for messages starting with this, after recording them. */
  throwFromLogSink?: string;
}

export function startHost(options: HarnessOptions): Harness {
  const data = makeDataDir();
  for (const anima of options.animas ?? ["mallory", "bob"]) {
    data.anima(anima);
    data.write(`animas/${anima}/tools/counter.ts`, COUNTER_TOOL);
  }
  const logs: LogRecord[] = [];
  const hostOptions = {
    dataDir: data.dir,
    coreToolsDir: join(data.dir, "no-core-tools"),
    timeoutMs: options.timeoutMs ?? 500,
    memoryLimitMb: options.memoryLimitMb ?? 32,
    loadTimeoutMs: options.loadTimeoutMs ?? 1_000,
    ...(options.sandboxProcesses ? { sandboxProcesses: options.sandboxProcesses } : {}),
    ...(options.cordons ? { cordons: options.cordons } : {}),
    maxLogLinesPerCall: options.maxLogLinesPerCall ?? 50,
    maxLogLineChars: options.maxLogLineChars ?? 200,
    ...(options.maxConcurrentCallsPerAnima ? { maxConcurrentCallsPerAnima: options.maxConcurrentCallsPerAnima } : {}),
    ...(options.maxQueuedCallsPerAnima ? { maxQueuedCallsPerAnima: options.maxQueuedCallsPerAnima } : {}),
  };
  const onLog = (record: LogRecord) => {
    logs.push(record);
    options.onLog?.(record);
  };
  const throwingPrefix = options.throwFromLogSink;
  const install = (anima: string, attack: string) => {
    data.write(`animas/${anima}/tools/${attack}.ts`, readFileSync(join(HOSTILE_DIR, `${attack}.ts`), "utf8"));
  };
  if (options.mode === "in-process") {
    const child = new InProcessHostChild({ ...hostOptions, ...(throwingPrefix ? { throwFromLogSink: throwingPrefix } : {}) }, onLog);
    return {
      host: undefined,
      data,
      logs,
      strayStderr: child.strayStderr,
      install,
      call: (anima, schema, args = {}, callOptions = {}) => child.request<CallResult>({ type: "call", anima, schema, args, options: callOptions }),
      async close() {
        await child.close();
        data.cleanup();
      },
    };
  }
  const host = createHost({
    ...hostOptions,
    isolation: "process",
    onLog: (record) => {
      onLog(record);
      if (throwingPrefix && record.message.startsWith(throwingPrefix)) throw logSinkFailure();
    },
  });
  return {
    host,
    data,
    logs,
    strayStderr: [],
    install,
    call: (anima, schema, args = {}, callOptions = {}) => host.call(anima, schema, args, callOptions),
    async close() {
      await host.close();
      data.cleanup();
    },
  };
}

/** What a broken log sink throws: an error that carries a host path, which must never reach a tool. */
export function logSinkFailure(): Error {
  return new Error(`EPIPE: write failed at ${process.cwd()}/log.txt`);
}

/**
 * A line of the report V8 writes to the process's stderr when an isolate meets its heap limit, before
 * isolated-vm ends that isolate (the process lives on and the call fails as MemoryLimit):
 *
 *     <--- Last few GCs --->
 *     [4711:0x42f67900]      236 ms: Mark-Compact (reduce) 25.7 (28.4) -> 25.7 (27.4) MB, …
 *     <--- JS stacktrace --->
 *
 * with blank lines between. V8 writes it itself, so with in-process isolation it lands on the host's
 * own stderr; anything else there (a FATAL ERROR of the host's own heap, a crash) is not one of these.
 */
export function isHeapLimitReport(line: string): boolean {
  return /^(?:\s*|<--- (?:Last few GCs|JS stacktrace) --->|\[\d+:0x[0-9a-f]+\]\s+\d+ ms: .*)$/.test(line);
}

/** The in-process host's child: requests over IPC, its log records forwarded in order with the results. */
class InProcessHostChild {
  /** See Harness.strayStderr. */
  readonly strayStderr: string[] = [];
  private readonly child: ChildProcess;
  private readonly waiting = new Map<number, (result: unknown) => void>();
  private nextId = 1;

  constructor(hostOptions: Record<string, unknown>, onLog: (record: LogRecord) => void) {
    this.child = fork(join(dirname(fileURLToPath(import.meta.url)), "in-process-host.mjs"), [JSON.stringify(hostOptions)], {
      execArgv: ["--no-node-snapshot"],
      // stderr is read here, not inherited: the memory tests' isolates make V8 print heap-limit reports,
      // which are expected and kept out of the test run's output; every other line is passed on.
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    });
    if (this.child.stderr) {
      createInterface({ input: this.child.stderr, crlfDelay: Infinity }).on("line", (line) => {
        if (isHeapLimitReport(line)) return;
        this.strayStderr.push(line);
        process.stderr.write(`[in-process host] ${line}\n`);
      });
    }
    // A crash of the host's process fails what was asked of it (a regression, not a hang).
    this.child.on("exit", (code, signal) => {
      for (const wake of this.waiting.values())
        wake({ status: "error", error_type: "SandboxCrashed", message: `the in-process host's process ended (${signal ?? code})`, durationMs: 0 });
      this.waiting.clear();
    });
    this.child.on("message", (message: { type: string; id?: number; result?: unknown; record?: LogRecord }) => {
      if (message.type === "log") onLog(message.record as LogRecord);
      else if (message.type === "result") {
        this.waiting.get(message.id as number)?.(message.result);
        this.waiting.delete(message.id as number);
      }
    });
  }

  request<T>(message: Record<string, unknown>): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      if (!this.child.connected) return reject(new Error("the in-process host's process has ended"));
      this.waiting.set(id, resolve as (result: unknown) => void);
      this.child.send({ ...message, id });
    });
  }

  /** Closes the host (bounded), then ends its process with SIGKILL: a process with a lost thread cannot exit by itself. */
  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) =>
      this.child.exitCode !== null || this.child.signalCode !== null ? resolve() : this.child.once("exit", () => resolve()),
    );
    await Promise.race([this.request({ type: "close" }).catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 5_000))]);
    this.child.kill("SIGKILL");
    await exited;
  }
}

/** Strings that must never reach a tool's caller: host paths, Node internals, host stack frames. */
export function assertNoLeak(result: CallResult, data?: TempDataDir): void {
  const text = JSON.stringify(result);
  const forbidden: Array<string | RegExp> = [
    PROJECT_ROOT,
    "/work/",
    "node:internal",
    "node_modules",
    "isolated-vm",
    "dist/src",
    /\bat .*\.(?:js|ts|mjs):\d+/,
    /\[object process\]/,
    /process\.(?:env|versions|binding)/,
  ];
  if (data) forbidden.push(data.dir);
  for (const needle of forbidden) {
    if (typeof needle === "string") expect(text, `leaked ${needle}`).not.toContain(needle);
    else expect(text, `leaked ${needle}`).not.toMatch(needle);
  }
}

export function expectError(result: CallResult, type: string, message?: RegExp): void {
  expect({ status: result.status, error_type: result.status === "error" ? result.error_type : undefined }, JSON.stringify(result)).toEqual({
    status: "error",
    error_type: type,
  });
  if (message && result.status === "error") expect(result.message).toMatch(message);
}

export function expectOk(result: CallResult): string {
  expect(result.status, JSON.stringify(result)).toBe("ok");
  return result.status === "ok" ? result.output : "";
}

/**
 * Options for the calls of an Anima just stopped: its long call on a busy process made it over its share,
 * so they go to the low-priority (SCHED_IDLE) process for a while, which a saturated machine (`npm run
 * test:busy`) runs only in its idle moments: seen taking longer than a harness's 400–500 ms. A test of
 * what serves them, or that they work, not of how fast.
 */
export const AFTER_ITS_STOP = { timeoutMs: 10_000 };

/** The host still serves `anima`: a normal call right now succeeds. Returns the counter value. */
export async function expectHealthy(h: Harness, anima: string, options: CallOptions = {}): Promise<number> {
  const output = expectOk(await h.call(anima, "counter_count", {}, options));
  return (JSON.parse(output) as { calls: number }).calls;
}

/**
 * Runs `attack` (by Anima `victim.attacker`) and, once it is under way (its tool logged `waitForLog`, or
 * right after it was sent when it does not log), makes `victim.calls` calls as Anima `victim.anima`. Each must finish under `boundMs`, and the attack
 * must still be running when the last one finishes, so the test proves they overlapped.
 */
export async function expectTenantUnaffected(
  h: Harness,
  attack: () => Promise<CallResult>,
  victim: { anima: string; attacker: string; boundMs?: number; calls?: number; waitForLog?: string },
): Promise<CallResult> {
  const boundMs = victim.boundMs ?? 200;
  // Warm the victim: bundle, describe and a pooled isolate exist before the attack starts.
  await expectHealthy(h, victim.anima);
  let settled = false;
  const logsBefore = h.logs.length;
  const attackRun = attack().finally(() => {
    settled = true;
  });
  if (victim.waitForLog) {
    const marker = victim.waitForLog;
    await waitFor(() => h.logs.slice(logsBefore).some((r) => r.anima === victim.attacker && r.message.includes(marker)), 5_000, 2);
  }
  const durations: number[] = [];
  for (let i = 0; i < (victim.calls ?? 3); i++) {
    const started = performance.now();
    const result = await h.call(victim.anima, "counter_count");
    durations.push(performance.now() - started);
    expectOk(result);
  }
  expect(settled, "the attack ended before the victim's calls were measured; the test proved nothing").toBe(false);
  for (const ms of durations) expect(ms, `victim call took ${durations.map((d) => d.toFixed(0)).join(", ")} ms`).toBeLessThan(boundMs);
  return attackRun;
}
