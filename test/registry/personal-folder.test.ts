import { linkSync, mkdirSync, realpathSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ToolHost } from "../../src/host-api.js";
import type { LogRecord } from "../../src/host-options.js";
import { createHost } from "../../src/host.js";
import { personalFolderCheck } from "../../src/registry/personal-folder.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** alice (the victim) with her tool `alicetool`, eve with `evetool`; the host over them and its warnings. */
function setup(): { data: TempDataDir; host: ToolHost; warnings: string[] } {
  const data = makeDataDir({ "animas/alice/tools/alicetool.ts": simpleTool("alicetool"), "animas/eve/tools/evetool.ts": simpleTool("evetool") });
  mkdirSync(join(data.dir, "core-tools"));
  cleanups.push(() => data.cleanup());
  const warnings: string[] = [];
  const onLog = (record: LogRecord) => void (record.level === "warn" && warnings.push(record.message));
  const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", onLog });
  cleanups.push(() => host.close());
  return { data, host, warnings };
}

/** eve sees none of alice's tools, cannot call them, is told why; alice is still served. */
async function expectRefused(host: ToolHost, warnings: string[], why: RegExp): Promise<void> {
  const listing = await host.list("eve");
  expect(listing.tools.map((tool) => tool.name)).not.toContain("alicetool");
  expect(listing.problems.map((problem) => problem.message)).toEqual([expect.stringMatching(why)]);
  expect(warnings).toEqual([expect.stringMatching(why)]);
  await expect(host.describe("eve", "alicetool")).rejects.toMatchObject({ type: "ToolNotFound" });
  expect(await host.call("eve", "alicetool_run")).toMatchObject({ status: "error", error_type: "ToolNotFound" });
  expect(await host.call("alice", "alicetool_run")).toMatchObject({ status: "ok" });
}

describe("tools_folder_symlink_to_other_anima: an Anima's tools are its own folder's", () => {
  it("refuses eve's tools/ replaced by a link to alice's: alice's tools are not listed, described or run as eve's", async () => {
    const { data, host, warnings } = setup();
    rmSync(join(data.dir, "animas/eve/tools"), { recursive: true });
    symlinkSync("../alice/tools", join(data.dir, "animas/eve/tools"));
    await expectRefused(host, warnings, /"animas\/eve\/tools" is a symbolic link.*replace the link with a folder/);
  });

  it("refuses a link to any other place too (an absolute link to alice's folder, and one to /)", async () => {
    const { data, host, warnings } = setup();
    rmSync(join(data.dir, "animas/eve/tools"), { recursive: true });
    symlinkSync(join(data.dir, "animas/alice/tools"), join(data.dir, "animas/eve/tools"));
    await expectRefused(host, warnings, /is a symbolic link/);
    rmSync(join(data.dir, "animas/eve/tools"));
    symlinkSync("/", join(data.dir, "animas/eve/tools"));
    host.refresh("eve");
    expect((await host.list("eve")).problems[0]?.message).toMatch(/is a symbolic link/);
  });

  it("refuses an Anima's folder that is a link to another Anima's folder (animas/eve -> alice)", async () => {
    const { data, host, warnings } = setup();
    rmSync(join(data.dir, "animas/eve"), { recursive: true });
    symlinkSync("alice", join(data.dir, "animas/eve"));
    await expectRefused(host, warnings, /"animas\/eve" is a link to another Anima's folder.*operator should replace the link/);
  });

  it("refuses two Animas' folders that are links to one folder elsewhere: neither could be told apart", async () => {
    const { data, host } = setup();
    renameSync(join(data.dir, "animas/alice"), join(data.dir, "elsewhere"));
    symlinkSync(join(data.dir, "elsewhere"), join(data.dir, "animas/alice"));
    rmSync(join(data.dir, "animas/eve"), { recursive: true });
    symlinkSync(join(data.dir, "elsewhere"), join(data.dir, "animas/eve"));
    expect((await host.list("eve")).tools.map((tool) => tool.name)).not.toContain("alicetool");
    expect(await host.call("eve", "alicetool_run")).toMatchObject({ status: "error", error_type: "ToolNotFound" });
  });

  it("keeps an operator's links working: the whole animas/ folder on another disk, one Anima's folder elsewhere", async () => {
    const { data, host, warnings } = setup();
    renameSync(join(data.dir, "animas"), join(data.dir, "disk2"));
    symlinkSync(join(data.dir, "disk2"), join(data.dir, "animas"));
    renameSync(join(data.dir, "disk2/eve"), join(data.dir, "eve-on-disk3"));
    symlinkSync("../eve-on-disk3", join(data.dir, "disk2/eve"));
    expect((await host.list("eve")).tools.map((tool) => tool.name)).toEqual(["evetool"]);
    expect((await host.list("alice")).tools.map((tool) => tool.name)).toEqual(["alicetool"]);
    expect(await host.call("eve", "evetool_run")).toMatchObject({ status: "ok" });
    expect(await host.call("alice", "alicetool_run")).toMatchObject({ status: "ok" });
    expect(warnings).toEqual([]);
  });

  it("tools_folder_swapped_after_discovery: eve's tools/ swapped for a link to alice's after discovery loads nothing of alice's", async () => {
    // Both have a tool "shared_name": discovery sees eve's own folder, then (before the load) eve swaps
    // tools/ for a link to alice's. The bundler reads only inside the real path discovery checked.
    const { data, host } = setup();
    data.write("animas/alice/tools/samename.ts", simpleTool("samename").replace('tool: "samename"', 'tool: "alice\'s code"'));
    data.write("animas/eve/tools/samename.ts", simpleTool("samename"));
    expect(await host.discoveryProblems("eve")).toEqual([]); // discovered, nothing loaded yet
    renameSync(join(data.dir, "animas/eve/tools"), join(data.dir, "animas/eve/tools-own"));
    symlinkSync("../alice/tools", join(data.dir, "animas/eve/tools"));
    const result = await host.call("eve", "samename_run");
    expect(result).toMatchObject({ status: "error", error_type: "LoadError" });
    expect(JSON.stringify(result)).not.toContain("alice's code");
    expect(await host.call("alice", "samename_run")).toMatchObject({ status: "ok", output: expect.stringContaining("alice's code") });
  });

  it("tools_folder_flipped_during_discovery: tools/ flipped between a folder and a link to alice's never records or lists hers as eve's", async () => {
    const data = makeDataDir({ "animas/alice/tools/alicetool.ts": simpleTool("alicetool"), "animas/eve/tools/evetool.ts": simpleTool("evetool") });
    cleanups.push(() => data.cleanup());
    const animas = realpathSync(join(data.dir, "animas"));
    const eveTools = join(animas, "eve", "tools");
    mkdirSync(join(animas, "eve", "own-tools"));
    symlinkSync(join(animas, "alice", "tools"), join(animas, "eve", "link-tools"));
    let stop = false;
    // eve flips her tools/ between her own folder and a link to alice's, between the check's steps.
    const flipper = (async () => {
      for (let asLink = false; !stop; asLink = !asLink) {
        renameSync(eveTools, join(animas, "eve", asLink ? "link-tools" : "own-tools"));
        renameSync(join(animas, "eve", asLink ? "own-tools" : "link-tools"), eveTools);
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const outcomes = { refused: 0, own: 0, wrong: 0 };
    try {
      for (let i = 0; i < 1_000; i++) {
        const checked = await personalFolderCheck(eveTools);
        if (checked.problem !== undefined) outcomes.refused++;
        else if (checked.real === undefined) continue;
        else if (checked.real !== eveTools || checked.entries.some((entry) => entry.name === "alicetool.ts")) outcomes.wrong++;
        else outcomes.own++;
      }
    } finally {
      stop = true;
      await flipper;
    }
    expect(outcomes.wrong).toBe(0);
    expect(outcomes.refused).toBeGreaterThan(0); // the flips were seen
  });

  it("core_tools_hard_linked: the install's core tools load when a package manager hard-linked them; an Anima's hard link is refused", async () => {
    const { data, host } = setup();
    // pnpm and bun install every file as a hard link into their store: the core tool has two links.
    data.write("core-tools/coretool.ts", simpleTool("coretool"));
    mkdirSync(join(data.dir, "store"));
    linkSync(join(data.dir, "core-tools/coretool.ts"), join(data.dir, "store/coretool.ts"));
    expect(await host.call("alice", "coretool_run")).toMatchObject({ status: "ok" });
    linkSync(join(data.dir, "animas/alice/tools/alicetool.ts"), join(data.dir, "store/alicetool.ts"));
    host.refresh();
    const refused = await host.call("alice", "alicetool_run");
    expect(refused).toMatchObject({ status: "error", error_type: "LoadError" });
    expect(JSON.stringify(refused)).toContain("has other hard links");
  });
});
