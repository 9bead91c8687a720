import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ToolChangeSource, ToolHost, ToolsChange } from "../../src/host-api.js";
import type { LogRecord } from "../../src/host-options.js";
import { createHost } from "../../src/host.js";
import { startMcpServer } from "../../src/mcp/server.js";
import { toolsChanges, watchProblem } from "../../src/registry/tool-watch.js";
import { type TempDataDir, makeDataDir, waitFor, writeUntil } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

// Counts the host's reload recordings (one per burst of edits, however many listen).
const recordings = vi.hoisted(() => ({ calls: 0 }));
vi.mock("../../src/audit/reloads.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/audit/reloads.js")>();
  return {
    ...original,
    recordWatchedReloads: (...args: Parameters<typeof original.recordWatchedReloads>) => {
      recordings.calls++;
      return original.recordWatchedReloads(...args);
    },
  };
});

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function hostOn(data: TempDataDir, watch: boolean, onLog: (record: LogRecord) => void = () => {}): ToolHost & ToolChangeSource {
  mkdirSync(join(data.dir, "core-tools"), { recursive: true });
  const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", watch, onLog });
  cleanups.push(() => host.close());
  return host as ToolHost & ToolChangeSource;
}

function tempData(files: Record<string, string>): TempDataDir {
  const data = makeDataDir(files);
  cleanups.push(() => data.cleanup());
  return data;
}

describe("the host's tool change event", () => {
  it("on a host that does not watch, watches one Anima's folders for its subscriber, until it unsubscribes", async () => {
    const data = tempData({ "animas/alice/tools/alpha.ts": simpleTool("alpha"), "animas/bob/tools/beta.ts": simpleTool("beta"), "common_tools/.keep": "" });
    const host = hostOn(data, false);
    const heard: ToolsChange[] = [];
    const unsubscribe = await host.onToolsChanged((change) => heard.push(change), { anima: "alice" });

    await writeUntil(data, "animas/alice/tools/alpha.ts", simpleTool("alpha", ["run", "stop"]), () => heard.length > 0);
    expect(heard[0]).toEqual({ anima: "alice", paths: [join(data.dir, "animas", "alice", "tools", "alpha.ts")] });
    // The host reloaded before telling: the new version is served.
    expect((await host.describe("alice", "alpha")).schemas.map((s) => s.action)).toEqual(["run", "stop"]);

    await writeUntil(data, "common_tools/gamma.ts", simpleTool("gamma"), () => heard.some((change) => change.anima === undefined));
    // bob's folder is not watched for alice's subscriber.
    data.write("animas/bob/tools/beta.ts", simpleTool("beta", ["x"]));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(heard.every((change) => change.anima !== "bob")).toBe(true);

    await unsubscribe();
    const count = heard.length;
    data.write("animas/alice/tools/alpha.ts", simpleTool("alpha", ["again"]));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(heard).toHaveLength(count);
  });

  it("an MCP server on a watching host adds no watcher: each change is recorded once and announced", async () => {
    const data = tempData({ "animas/alice/tools/alpha.ts": simpleTool("alpha") });
    const host = hostOn(data, true);
    await host.ready();
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = await startMcpServer(host, "alice", serverSide, { startWorkers: false });
    cleanups.push(() => server.close());
    const client = new Client({ name: "test", version: "1.0.0" });
    let announced = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      announced++;
    });
    await client.connect(clientSide);
    cleanups.push(() => client.close());

    // Each burst the host's watcher saw (a write chokidar missed is written again: a burst of its own).
    const bursts: ToolsChange[] = [];
    const unsubscribe = await host.onToolsChanged((change) => bursts.push(change));
    cleanups.push(unsubscribe);

    const before = recordings.calls;
    await writeUntil(data, "animas/alice/tools/alpha.ts", simpleTool("alpha", ["run", "stop"]), () => announced > 0);
    await waitFor(() => recordings.calls - before >= bursts.length);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // One recording per burst: the host's (the MCP server only tells its client).
    expect(recordings.calls - before).toBe(bursts.length);
    await host.audit.flush();
    const reloads = (await host.audit.read({ anima: "alice" })).filter((record) => record.kind === "reload");
    // Recorded once (new to the audit log: nothing was recorded of it before).
    expect(reloads).toMatchObject([{ tool: "alpha", change: "loaded", trigger: "watcher" }]);
  });
});

describe("symlink_loop_in_tools_folder: a link the watcher cannot follow", () => {
  // chokidar stats each file it sees; `ln -s loop.ts loop.ts` fails with ELOOP, emitted as an "error"
  // event, which (unhandled) ended the daemon and the MCP server with every Anima's calls in flight.
  it("neither ends the host nor stops its watching: a self-link and a two-file loop, present at start and added later", async () => {
    const data = tempData({ "animas/alice/tools/alpha.ts": simpleTool("alpha"), "animas/bob/tools/beta.ts": simpleTool("beta") });
    const tools = join(data.dir, "animas", "alice", "tools");
    symlinkSync("loop.ts", join(tools, "loop.ts"));
    const warnings: string[] = [];
    const host = hostOn(data, true, (record) => record.level === "warn" && warnings.push(record.message));
    await host.ready();
    const heard: ToolsChange[] = [];
    cleanups.push(await host.onToolsChanged((change) => heard.push(change)));

    // A two-file loop added while watching.
    symlinkSync("ping.ts", join(tools, "pong.ts"));
    symlinkSync("pong.ts", join(tools, "ping.ts"));
    await waitFor(() => ["loop.ts", "ping.ts", "pong.ts"].every((file) => warnings.some((w) => w.includes(`animas/alice/tools/${file}`))), 10_000);
    expect(warnings.find((w) => w.includes("loop.ts"))).toMatch(/ELOOP.*symbolic link.*other tools are still watched and served/);

    // The other tools still load and are served, for alice and for bob.
    expect((await host.call("alice", "alpha_run", { n: 1 })).status).toBe("ok");
    expect((await host.call("bob", "beta_run")).status).toBe("ok");
    // Watching goes on: an edit after the loops is noticed and served.
    await writeUntil(data, "animas/alice/tools/alpha.ts", simpleTool("alpha", ["run", "stop"]), () => heard.some((change) => change.anima === "alice"));
    await waitFor(async () => (await host.describe("alice", "alpha")).schemas.length === 2);
    // Once per path, however often chokidar retries it.
    for (const file of ["loop.ts", "ping.ts", "pong.ts"]) expect(warnings.filter((w) => w.includes(`animas/alice/tools/${file}"`))).toHaveLength(1);
  });

  it("says which file, the system's code and who acts, for any error; a file name cannot break the line", () => {
    const error = (code: string | undefined) => Object.assign(new Error("x"), code ? { code } : {});
    expect(watchProblem("/d", "/d/common_tools/x.ts", error("EACCES"))).toMatch(/"common_tools\/x.ts" \(EACCES\).*operator should fix its permissions/);
    expect(watchProblem("/d", "/d/animas/a/tools/x.ts", error("EMFILE"))).toMatch(/\(EMFILE\).*operator should check the file/);
    expect(watchProblem("/d", "/d/animas/a/tools/x.ts", error(undefined))).toMatch(/\(unknown error\)/);
    expect(watchProblem("/d", "/d/animas/a/tools/new\nline.ts", error("ELOOP"))).not.toContain("\n");
  });
});

describe("toolsChanges", () => {
  it("groups a burst's paths by the folder they are in, leaving out hidden files and other places", () => {
    const dir = "/data";
    expect(
      toolsChanges(dir, [
        "/data/animas/alice/tools/a.ts",
        "/data/common_tools/b.ts",
        "/data/animas/alice/tools/_h.ts",
        "/data/animas/alice/tools/.a.ts.tmp",
        "/data/animas/alice/notes.md",
        "/elsewhere/x.ts",
      ]),
    ).toEqual([
      { anima: "alice", paths: ["/data/animas/alice/tools/a.ts", "/data/animas/alice/tools/_h.ts"] },
      { anima: undefined, paths: ["/data/common_tools/b.ts"] },
    ]);
  });
});
