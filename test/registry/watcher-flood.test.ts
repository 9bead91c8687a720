import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ToolChangeSource, ToolHost, ToolsChange } from "../../src/host-api.js";
import { createHost } from "../../src/host.js";
import type { ToolWatch } from "../../src/registry/tool-watch.js";
import { makeDataDir, waitFor, writeUntil } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What the every-Anima watcher may hold: animas/, Anima folders, their tools/ and its entries, common_tools/ and its entries. */
const TOOL_PLACES = /^(|animas(\/[^/]+(\/tools(\/[^/]+)?)?)?|common_tools(\/[^/]+)?)$/;

function files(dir: string, count: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < count; i++) writeFileSync(join(dir, `f${i}.md`), "x");
}

describe("watcher_file_flood: an Anima's files outside tool folders cost the shared host's watcher nothing", () => {
  it("tracks only animas/, Anima folders, their tools/ top level and common_tools/, however many files eve writes elsewhere", async () => {
    const data = makeDataDir({
      "animas/alice/tools/alpha.ts": simpleTool("alpha"),
      "animas/eve/tools/evetool.ts": simpleTool("evetool"),
      "common_tools/shared.ts": simpleTool("shared"),
    });
    cleanups.push(() => data.cleanup());
    const eve = join(data.dir, "animas/eve");
    files(join(eve, "notes"), 2_000); // her notes
    files(eve, 300); // her folder's top level
    files(join(eve, "tools/lib/deeper"), 200); // below her tools' top level (discovery reads only the top level)
    symlinkSync("../notes", join(eve, "tools/notes_link")); // a link from tools/ into her notes
    files(join(data.dir, "animas/.trash/eve/tools"), 100); // not an Anima (hidden)
    files(join(data.dir, "common_tools/sub"), 100);
    mkdirSync(join(data.dir, "core-tools"));
    const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", watch: true, onLog: () => {} });
    cleanups.push(() => host.close());
    await host.ready();
    // The daemon's own watcher (HostOptions.watch), as it runs.
    const watch = (host as unknown as { watches: ToolWatch }).watches;
    const outside = async () => (await watch.tracked()).map((path) => relative(data.dir, path)).filter((path) => !TOOL_PLACES.test(path));

    expect(await outside()).toEqual([]);
    // More of eve's files while watching: still none held.
    files(join(eve, "notes2"), 2_000);
    files(join(eve, "tools/lib"), 200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await outside()).toEqual([]);
    expect((await watch.tracked()).length).toBeLessThan(40);

    // Watching goes on, and the host keeps serving: a tool added in alice's tools/, one in common_tools/,
    // a new Anima's tools, and eve's tools/ replaced by a new folder are all heard and served.
    const heard: ToolsChange[] = [];
    cleanups.push(await (host as ToolHost & ToolChangeSource).onToolsChanged((change) => heard.push(change)));
    await writeUntil(data, "animas/alice/tools/beta.ts", simpleTool("beta"), () => heard.some((change) => change.anima === "alice"));
    expect(await host.call("alice", "beta_run")).toMatchObject({ status: "ok" });
    await writeUntil(data, "common_tools/gamma.ts", simpleTool("gamma"), () => heard.some((change) => change.anima === undefined));
    expect(await host.call("alice", "gamma_run")).toMatchObject({ status: "ok" });
    data.write("staging/carol/tools/carol.ts", simpleTool("carol"));
    renameSync(join(data.dir, "staging/carol"), join(data.dir, "animas/carol"));
    await writeUntil(data, "animas/carol/tools/carol2.ts", simpleTool("carol2"), () => heard.some((change) => change.anima === "carol"));
    expect(await host.call("carol", "carol_run")).toMatchObject({ status: "ok" });
    expect((await host.list("eve")).tools.map((tool) => tool.name)).toContain("evetool");
    rmSync(join(eve, "tools"), { recursive: true });
    data.write("animas/eve/newtools/evetwo.ts", simpleTool("evetwo"));
    renameSync(join(eve, "newtools"), join(eve, "tools"));
    await waitFor(async () => {
      const names = (await host.list("eve")).tools.map((tool) => tool.name);
      return names.includes("evetwo") && !names.includes("evetool");
    });
    heard.length = 0;
    await writeUntil(data, "animas/eve/tools/evethree.ts", simpleTool("evethree"), () => heard.some((change) => change.anima === "eve"));
    expect(await host.call("eve", "evethree_run")).toMatchObject({ status: "ok" });
    expect(await outside()).toEqual([]);
  });
});
