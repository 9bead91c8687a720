import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { compareVersions, pinnedRuntime } from "../../src/node-runtime.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { NOTES_TOOL } from "./notes-tool.js";

// The launcher's in-process path (vitest.config.ts sets ANIMAWORKS_NO_DAEMON=1 for the processes tests
// start); its daemon path is tested in test/endpoint/.
describe("the bin launcher", () => {
  const bin = join(PROJECT_ROOT, "bin", "animaworks-tool.cjs");
  let data: TempDataDir;
  beforeAll(() => {
    data = makeDataDir({ "animas/alice/tools/notes.ts": NOTES_TOOL });
  });
  afterAll(() => data.cleanup());

  it("ends a one-shot call with the call's own exit status, whatever isolates it made (no abort as Node tears down)", () => {
    // A cold cache and a broken tool beside: the call builds, loads and disposes several isolates.
    const cold = makeDataDir({
      "animas/alice/tools/notes.ts": NOTES_TOOL,
      "animas/alice/tools/broken.ts": "export function get_tool_schemas() { return [{ name: 'wrong_name' }]; }",
    });
    try {
      for (let run = 0; run < 3; run++) {
        rmSync(join(cold.dir, "cache"), { recursive: true, force: true });
        // As `npm run demo` starts it (in this process at once); reading --args-file leaves a FileHandle to
        // Node's last collection, which made the abort all but certain.
        const args = cold.write("args.json", JSON.stringify({ title: "a", body: "b" }));
        const result = spawnSync(
          process.execPath,
          ["--no-node-snapshot", bin, "--data-dir", cold.dir, "--anima", "alice", "notes", "add", "--args-file", args],
          { encoding: "utf8" },
        );
        expect({ status: result.status, signal: result.signal, stderr: result.stderr }).toEqual({ status: 0, signal: null, stderr: "" });
        expect(JSON.parse(result.stdout)).toEqual({ saved: { title: "a", body: "b" }, anima: "alice" });
      }
    } finally {
      cold.cleanup();
    }
  });

  // The machine's own Node (20 on the development machines), when it is older than the pinned one.
  const olderNode = ["/usr/bin/node", "/usr/local/bin/node", "/bin/node"].find((path) => {
    const version = spawnSync(path, ["-p", "process.versions.node"], { encoding: "utf8" }).stdout?.trim();
    return version !== undefined && version !== "" && compareVersions(version, process.versions.node) < 0;
  });
  it.skipIf(olderNode === undefined)("started by an older Node, runs the call on the pinned Node", () => {
    const run = spawnSync(olderNode as string, [bin, "--data-dir", data.dir, "audit", "--json"], { encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    const runtime = (JSON.parse(run.stdout) as { isolation: { runtime: { host: { node: string; path: string }; pinned: string } } }).isolation.runtime;
    expect(runtime.host).toMatchObject({ node: runtime.pinned, path: pinnedRuntime()?.path });
  });

  it("runs the demo without any set-up, even when started without --no-node-snapshot", () => {
    const run = spawnSync(process.execPath, [bin, "--demo", "greet", "hello", "Operator", "--times", "2"], { encoding: "utf8" });
    expect(run.stderr).not.toContain("Error");
    expect(run.status).toBe(0);
    expect(run.stdout).toBe("Hello, Operator!\nHello, Operator!\n");
  });

  it("takes the Anima from ANIMAWORKS_ANIMA_DIR and arguments from stdin", () => {
    const run = spawnSync(process.execPath, ["--no-node-snapshot", bin, "notes", "add", "--args-file", "-"], {
      encoding: "utf8",
      input: JSON.stringify({ title: "s", body: "t" }),
      env: { ...process.env, ANIMAWORKS_ANIMA_DIR: join(data.dir, "animas", "alice"), ANIMAWORKS_DATA_DIR: "" },
    });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout).saved).toEqual({ title: "s", body: "t" });
  });

  it("launcher_sigterm_orphan: a SIGTERM to a launcher that re-executed ends the command it started, with the same signal", async () => {
    // Started without --no-node-snapshot, the launcher runs `serve` (a job worker, until a signal) in a
    // re-executed child and waits: a supervisor's SIGTERM to the launcher's pid had left it serving alone.
    // Several rounds, each signalling as soon as the child is seen: the child is seen while the launcher's
    // spawn still waits for its exec, when a launcher listening only after the spawn died of the signal.
    for (let round = 0; round < 5; round++) await sigtermRound();
  }, 60_000);

  async function sigtermRound(): Promise<void> {
    const launcher = spawn(process.execPath, [bin, "--data-dir", data.dir, "serve"], { stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      launcher.on("exit", (code, signal) => resolve({ code, signal })),
    );
    const childOf = (parent: number): number | undefined => {
      for (const entry of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
        let stat: string;
        try {
          stat = readFileSync(`/proc/${entry}/stat`, "utf8");
        } catch {
          continue; // ended meanwhile
        }
        if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === parent) return Number(entry);
      }
      return undefined;
    };
    let child: number | undefined;
    await waitFor(() => (child = childOf(launcher.pid as number)) !== undefined, 15_000);
    launcher.kill("SIGTERM");
    expect(await exited).toEqual({ code: null, signal: "SIGTERM" });
    await waitFor(() => !existsSync(`/proc/${child}`), 10_000);
  }

  it("runs the README's unit_convert example (a number given positionally)", () => {
    const run = spawnSync(process.execPath, [bin, "--demo", "unit_convert", "length", "5", "--from", "km", "--to", "mi"], { encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ value: 5, result: 3.106856 });
  });

  it("still runs from the former ES module launcher, bin/animaworks-tool.mjs", () => {
    const run = spawnSync(process.execPath, [join(PROJECT_ROOT, "bin", "animaworks-tool.mjs"), "--demo", "greet", "hello", "Old"], { encoding: "utf8" });
    expect(run.status).toBe(0);
    expect(run.stdout).toBe("Hello, Old!\n");
  });

  it("compiles the bundle with a V8 code cache, and replaces a cache V8 rejects", () => {
    const cacheFile = join(PROJECT_ROOT, "dist", "cli", "main.cjs.no-snapshot.v8-cache");
    writeFileSync(cacheFile, "not a V8 code cache");
    const run = spawnSync(process.execPath, ["--no-node-snapshot", bin, "--demo", "greet", "hello", "Cache"], { encoding: "utf8" });
    expect(run.stderr).not.toContain("Error");
    expect(run.stdout).toBe("Hello, Cache!\n");
    const rewritten = readFileSync(cacheFile);
    expect(rewritten.toString("latin1")).not.toBe("not a V8 code cache");
    expect(rewritten.length).toBeGreaterThan(10_000);
  });

  // The cold-start budget (benchmarks/README.md): a cached tool call must not pull in node:fs/promises,
  // the performance global, node:crypto or node:v8 (≈ 10 ms on Node 26), each several ms without the
  // start-up snapshot. (Node 26's node:vm brings the ES module loader's modules along, ≈ 0.5 ms in all.)
  it("makes a cached tool call without loading the modules a cold start cannot afford", () => {
    const listFile = join(data.dir, "modules.txt");
    const preload = join(data.dir, "list-modules.cjs");
    writeFileSync(preload, `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(listFile)}, process.moduleLoadList.join("\\n")));\n`);
    data.write(
      "animas/alice/tools/coldecho.ts",
      `export function get_tool_schemas() { return [{ name: "coldecho_run", description: "echo", input_schema: { type: "object", properties: { n: { type: "integer" } } } }]; }
export function dispatch(name: string, args: { n?: number }) { return (args.n ?? 0) + 1; }`,
    );
    // The flags the launcher re-executes with for an in-process call.
    const args = ["--no-node-snapshot", "--no-concurrent-osr", bin, "--data-dir", data.dir, "--anima", "alice", "coldecho", "run", "--n", "1"];
    const first = spawnSync(process.execPath, args, { encoding: "utf8" }); // fills the caches
    expect(first.stderr).toBe("");
    expect(first.status).toBe(0);
    const run = spawnSync(process.execPath, ["--require", preload, ...args], { encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe("2\n");
    const loaded = readFileSync(listFile, "utf8").split("\n");
    expect(loaded).toContain("NativeModule internal/modules/cjs/loader");
    for (const unwanted of ["internal/fs/promises", "internal/perf/performance", "crypto", "child_process", "stream", "v8"]) {
      expect(loaded, unwanted).not.toContain(`NativeModule ${unwanted}`);
    }
  });
});
