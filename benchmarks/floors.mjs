// Lower bounds for the execution-core figures of run.mjs, measured in the same run: what one hop to
// another process costs by itself, and what isolated-vm gives when, as in the host, an isolate serves
// one call at a time. They say how far the host is from what its design can reach on this machine,
// which the aims in issue #2 (bare isolated-vm in one process, calls queued on one isolate) do not.
import { fork } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import ivm from "isolated-vm";

/**
 * Round trip of one small message to a child process and back over Node's IPC channel (`process.send`,
 * JSON), one at a time: the least a call through a sandbox process can cost before any isolate runs.
 */
export async function processHopRoundTrip(dir, count, timeEach) {
  const echo = join(dir, "echo-child.cjs");
  writeFileSync(echo, "process.on('message', (m) => process.send(m)); process.on('disconnect', () => process.exit(0));\n");
  const child = fork(echo, [], { stdio: ["ignore", "ignore", "inherit", "ipc"], serialization: "json" });
  await new Promise((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  });
  let answer;
  child.on("message", (message) => answer?.(message));
  const roundTrip = (i) =>
    new Promise((resolve) => {
      answer = resolve;
      child.send({ type: "request", id: i, payload: { n: i } });
    });
  await timeEach(1_000, roundTrip);
  const samples = await timeEach(count, roundTrip);
  child.disconnect();
  await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", resolve)));
  return samples;
}

/**
 * Calls per second of bare isolated-vm calls when each isolate runs one call at a time (the host's
 * model: a call owns its isolate's timers, logs and capability answers until it ends), `isolates`
 * isolates, `depth` callers.
 */
export async function bareOneCallPerIsolate(calls, isolates, depth) {
  const made = [];
  for (let i = 0; i < isolates; i++) {
    const isolate = new ivm.Isolate({ memoryLimit: 128 });
    const context = await isolate.createContext();
    made.push({ isolate, fn: await context.eval("(async function (n) { return n + 1; })", { reference: true }) });
  }
  const idle = made.map((entry) => entry.fn);
  const waiting = [];
  const acquire = async () => idle.pop() ?? new Promise((resolve) => waiting.push(resolve));
  const release = (fn) => {
    const next = waiting.shift();
    if (next) next(fn);
    else idle.push(fn);
  };
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: depth }, async () => {
      while (next < calls) {
        const n = next++;
        const fn = await acquire();
        await fn.apply(undefined, [n], { result: { promise: true, copy: true } });
        release(fn);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  for (const entry of made) entry.isolate.dispose();
  return Math.round(calls / seconds);
}
