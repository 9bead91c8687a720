import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { allowedCpus } from "../../../src/isolation/os/low-priority.js";
import { processTreeCpu } from "../../../src/isolation/os/process-cpu.js";

/** Starts `node -e code` and resolves once it printed "ready". */
function startNode(code: string) {
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const ready = new Promise<void>((resolve) => child.stdout.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve()));
  return { child, ready };
}

// A fixed amount of work (not a wall-clock spin): under a loaded machine the thread still uses this much
// CPU time, only later. ≈ 0.3 s on this machine.
const SPIN = "let x = 0; for (let i = 0; i < 3e8; i++) x += i;";

describe("processTreeCpu", () => {
  it("counts a worker thread's spinning as off the main thread, and the main thread's as on it", async () => {
    const onWorker = startNode(
      `const { Worker } = require("node:worker_threads");
       new Worker("${SPIN} require('node:worker_threads').parentPort.postMessage(1)", { eval: true })
         .on("message", () => console.log("ready"));
       setInterval(() => {}, 1000);`,
    );
    const onMain = startNode(`${SPIN} console.log("ready"); setInterval(() => {}, 1000);`);
    try {
      await Promise.all([onWorker.ready, onMain.ready]);
      const worker = processTreeCpu(onWorker.child.pid as number);
      const main = processTreeCpu(onMain.child.pid as number);
      expect(worker?.totalMs).toBeGreaterThan(100);
      expect(main?.totalMs).toBeGreaterThan(100);
      // Most of the worker's CPU time is off the main thread, most of the other's on it.
      expect(worker?.offMainMs).toBeGreaterThan((worker?.totalMs ?? 0) / 2);
      expect(main?.offMainMs).toBeLessThan((main?.totalMs ?? 0) / 2);
    } finally {
      onWorker.child.kill("SIGKILL");
      onMain.child.kill("SIGKILL");
    }
  });

  it("is undefined for a process that does not exist", () => {
    expect(processTreeCpu(2 ** 22 + 12_345)).toBeUndefined();
  });

  it("reads the CPUs this process may use", () => {
    expect(allowedCpus().length).toBeGreaterThanOrEqual(1);
  });
});
