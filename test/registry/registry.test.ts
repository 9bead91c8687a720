import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ToolBundler } from "../../src/bundling/bundler.js";
import type { DescribeOutcome, Executor } from "../../src/isolation/wire/messages.js";
import { LOAD_FAILURE_RETRY_MS, ToolRegistry, ownersOf } from "../../src/registry/registry.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { type TestHost, okOutput, simpleTool, useTestHost } from "../helpers/tools.js";

describe("merging core, shared and personal tools", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  it("skips a shared or personal tool named like a core tool, with a warning (ref 8, 9)", async () => {
    t = useTestHost();
    t.core("clock.ts", simpleTool("clock", ["now"]));
    t.shared("clock.ts", simpleTool("clock", ["shared_version"]));
    t.personal("clock.ts", simpleTool("clock", ["personal_version"]));
    const listing = await t.host.list("alice");
    const clock = listing.tools.find((tool) => tool.name === "clock");
    expect(clock?.origin).toBe("core");
    expect(clock?.schemas.map((s) => s.name)).toEqual(["clock_now"]);
    const shadowed = listing.problems.filter((p) => p.name === "clock");
    expect(shadowed.map((p) => p.origin).sort()).toEqual(["personal", "shared"]);
    for (const problem of shadowed) expect(problem.message).toMatch(/has the name of a core tool and is skipped/);
    // Each warning reaches the log once, however often the Anima's tools are listed.
    await t.host.list("alice");
    const warnings = t.logs.filter((r) => r.level === "warn" && /name of a core tool/.test(r.message));
    expect(warnings).toHaveLength(2);
    expect(okOutput(await t.host.call("alice", "clock_now"))).toContain('"tool": "clock"');
    expect((await t.host.call("alice", "clock_personal_version")).status).toBe("error");
  });

  it("lets a personal tool win over a shared tool of the same name, for its own Anima only (ref 13)", async () => {
    t = useTestHost();
    t.data.anima("bob");
    t.shared("notes.ts", simpleTool("notes", ["shared_action"]));
    t.personal("notes.ts", simpleTool("notes", ["personal_action"]));
    const alice = await t.host.describe("alice", "notes");
    expect(alice.origin).toBe("personal");
    expect(alice.schemas.map((s) => s.name)).toEqual(["notes_personal_action"]);
    const bob = await t.host.describe("bob", "notes");
    expect(bob.origin).toBe("shared");
    expect(bob.schemas.map((s) => s.name)).toEqual(["notes_shared_action"]);
    expect(okOutput(await t.host.call("alice", "notes_personal_action"))).toContain("notes_personal_action");
    expect(okOutput(await t.host.call("bob", "notes_shared_action"))).toContain("notes_shared_action");
  });

  it("without an Anima sees core and shared tools only", async () => {
    t = useTestHost();
    t.core("core_one.ts", simpleTool("core_one"));
    t.shared("shared_one.ts", simpleTool("shared_one"));
    t.personal("mine.ts", simpleTool("mine"));
    const listing = await t.host.list();
    expect(listing.tools.map((tool) => [tool.name, tool.origin])).toEqual([
      ["core_one", "core"],
      ["shared_one", "shared"],
    ]);
  });

  it("reports reserved and invalid names and does not load them", async () => {
    t = useTestHost();
    t.personal("serve.ts", simpleTool("serve"));
    t.personal("bad-name.ts", simpleTool("bad-name"));
    t.personal("fine.ts", simpleTool("fine"));
    const listing = await t.host.list("alice");
    expect(listing.tools.map((tool) => tool.name)).toEqual(["fine"]);
    expect(listing.problems.map((p) => p.name).sort()).toEqual(["bad-name", "serve"]);
    const call = await t.host.call("alice", "serve_run");
    expect(call.status === "error" && call.error_type).toBe("ToolNotFound");
  });

  it("treats an empty data dir (no common_tools, no tools/) as no tools", async () => {
    t = useTestHost();
    const listing = await t.host.list("alice");
    expect(listing.tools).toEqual([]);
    expect(listing.problems).toEqual([]);
  });
});

describe("schema names across the tools one Anima sees", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  it("routes a schema name to the longest tool name that prefixes it (ref 17)", async () => {
    expect(ownersOf("image_gen_3d", ["image", "image_gen"])).toEqual(["image_gen", "image"]); // the longest first
    expect(ownersOf("image_crop", ["image", "image_gen"])).toEqual(["image"]);
    expect(ownersOf("image_gen", ["image_gen"])).toEqual([]); // a tool name alone has no action
    expect(ownersOf("imagegen_x", ["image"])).toEqual([]);

    t = useTestHost();
    t.personal("image.ts", simpleTool("image", ["crop"]));
    t.personal("image_gen.ts", simpleTool("image_gen", ["3d"]));
    expect(okOutput(await t.host.call("alice", "image_gen_3d"))).toContain('"tool": "image_gen"');
    expect(okOutput(await t.host.call("alice", "image_crop"))).toContain('"tool": "image"');
  });

  it("makes a tool unavailable when it declares a schema that belongs to another visible tool (of one origin)", async () => {
    t = useTestHost();
    t.personal("image.ts", simpleTool("image", ["crop", "gen_3d"])); // image_gen_3d belongs to image_gen
    t.personal("image_gen.ts", simpleTool("image_gen", ["3d"]));
    const listing = await t.host.list("alice");
    const image = listing.tools.find((tool) => tool.name === "image");
    expect(image?.status).toBe("error");
    expect(image?.error?.type).toBe("LoadError");
    expect(image?.error?.message).toMatch(/schema "image_gen_3d" collides with tool "image_gen"/);
    expect(image?.error?.message).toMatch(/rename the schema/);
    expect(listing.tools.find((tool) => tool.name === "image_gen")?.status).toBe("ok");
    expect(okOutput(await t.host.call("alice", "image_gen_3d"))).toContain('"tool": "image_gen"');
    const crop = await t.host.call("alice", "image_crop");
    expect(crop.status === "error" && crop.error_type).toBe("LoadError");
  });

  it("of two colliding tools of different origins, makes the one of lower precedence unavailable, whichever name is longer", async () => {
    t = useTestHost();
    t.personal("image.ts", simpleTool("image", ["crop", "gen_3d"]));
    t.shared("image_gen.ts", simpleTool("image_gen", ["3d"])); // longer, but below personal: it gives way
    t.core("video.ts", simpleTool("video", ["cut"]));
    t.personal("video_cut.ts", simpleTool("video_cut", ["fast"])); // no schema of video starts with "video_cut_": no clash
    t.core("audio_gen.ts", simpleTool("audio_gen", ["3d"]));
    t.personal("audio.ts", simpleTool("audio", ["gen_3d"])); // shorter, below core: unavailable, as always
    const listing = await t.host.list("alice");
    const status = (name: string) => listing.tools.find((tool) => tool.name === name);
    expect(status("image")?.status).toBe("ok");
    expect(status("image_gen")?.status).toBe("error");
    expect(status("image_gen")?.error?.message).toMatch(/shared tool "image_gen" collides with the personal tool "image": its schema "image_gen_3d"/);
    expect(okOutput(await t.host.call("alice", "image_gen_3d"))).toContain('"tool": "image"');
    expect(status("video")?.status).toBe("ok"); // video_cut declares video_cut_fast, not one of video's
    expect(status("video_cut")?.status).toBe("ok");
    expect(status("audio_gen")?.status).toBe("ok");
    expect(status("audio")?.error?.message).toMatch(/schema "audio_gen_3d" collides with tool "audio_gen"/);
    expect(okOutput(await t.host.call("alice", "audio_gen_3d"))).toContain('"tool": "audio_gen"');
  });

  it("does not mistake two tools with identical source for each other (descriptions are per tool name)", async () => {
    t = useTestHost();
    const source = simpleTool("same");
    t.personal("same.ts", source);
    t.personal("copy.ts", source); // declares same_run: wrong for a tool named "copy"
    const listing = await t.host.list("alice");
    expect(listing.tools.find((tool) => tool.name === "same")?.status).toBe("ok");
    const copy = listing.tools.find((tool) => tool.name === "copy");
    expect(copy?.status).toBe("error");
    expect(copy?.error?.message).toMatch(/must be named copy_<action>/);
  });
});

describe("ToolRegistry: failures to run a module are retried, failed checks are not", () => {
  let data: TempDataDir;
  afterEach(() => {
    vi.useRealTimers();
    data?.cleanup();
  });

  function registryWith(outcomes: DescribeOutcome[]) {
    data = makeDataDir();
    const describe = vi.fn(async () => outcomes.shift() ?? outcomes[outcomes.length - 1]!);
    const executor: Executor = { describe, call: vi.fn(), close: async () => {}, stuckEntries: () => 0 };
    const registry = new ToolRegistry({
      dataDir: data.dir,
      coreToolsDir: join(data.dir, "core"),
      loadTimeoutMs: 1_000,
      memoryLimitMb: 64,
      bundler: new ToolBundler(join(data.dir, "cache")),
      executor,
    });
    return { registry, describe };
  }

  it("asks the executor again after LOAD_FAILURE_RETRY_MS when loading failed (e.g. a crashed sandbox)", async () => {
    const good: DescribeOutcome = {
      ok: true,
      module: { exports: { dispatch: "function", get_tool_schemas: "function" }, schemas: [{ name: "flaky_run" }], profile: null },
    };
    const { registry, describe } = registryWith([
      { ok: false, error: { type: "LoadError", fault: "tool", message: "the sandbox process stopped (signal SIGKILL) while the call was running" } },
      good,
    ]);
    data.write("common_tools/flaky.ts", simpleTool("flaky"));
    vi.useFakeTimers({ toFake: ["hrtime"] });
    const source = (await registry.sources(undefined)).tools.get("flaky")!;
    expect((await registry.loadDeclared(source)).state).toBe("error");
    expect((await registry.loadDeclared(source)).state).toBe("error"); // remembered for a while
    expect(describe).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(LOAD_FAILURE_RETRY_MS + 1);
    expect((await registry.loadDeclared(source)).state).toBe("ok");
    expect(describe).toHaveBeenCalledTimes(2);
  });

  it("load_retry_storm: a version whose load keeps failing is retried ever less often (bounded), and a refresh does not cut that short", async () => {
    const spun: DescribeOutcome = { ok: false, error: { type: "Timeout", fault: "tool", message: "the load ran past its timeout" } };
    const good: DescribeOutcome = { ok: true, module: { exports: { dispatch: "function" }, schemas: [{ name: "spinload_run" }], profile: null } };
    const { registry, describe } = registryWith([...Array.from({ length: 9 }, () => spun), good]);
    data.write("common_tools/spinload.ts", simpleTool("spinload"));
    vi.useFakeTimers({ toFake: ["hrtime"] });
    const source = (await registry.sources(undefined)).tools.get("spinload")!;
    const load = async () => (await registry.loadDeclared(source)).state;
    expect(await load()).toBe("error");
    // Each further failure doubles the wait before the next attempt, up to LOAD_FAILURE_MAX_DOUBLINGS.
    for (const [attempt, waitMs] of [10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 640_000, 640_000].entries()) {
      vi.advanceTimersByTime(waitMs - 1);
      registry.forget(); // a refresh re-reads the tools, but this version's failure stands until its retry
      expect(await load()).toBe("error");
      expect(describe).toHaveBeenCalledTimes(attempt + 1);
      vi.advanceTimersByTime(1);
      expect(await load()).toBe("error");
      expect(describe).toHaveBeenCalledTimes(attempt + 2);
    }
    vi.advanceTimersByTime(640_000);
    expect(await load()).toBe("ok");
    expect(describe).toHaveBeenCalledTimes(10);
  });

  it("describes a personal tool for its owner, in its owner's cordon, and never reuses that description for another Anima", async () => {
    const good: DescribeOutcome = { ok: true, module: { exports: { dispatch: "function" }, schemas: [{ name: "twin_run" }], profile: null } };
    const { registry, describe } = registryWith([good, good, good]);
    data.anima("alice");
    data.anima("eve");
    // The same text in both folders: one bundle hash, two owners.
    data.write("animas/alice/tools/twin.ts", simpleTool("twin"));
    data.write("animas/eve/tools/twin.ts", simpleTool("twin"));
    data.write("common_tools/shared_twin.ts", simpleTool("shared_twin"));
    for (const anima of ["eve", "alice"]) {
      const source = (await registry.sources({ name: anima, dir: join(data.dir, "animas", anima) })).tools.get("twin")!;
      expect((await registry.loadDeclared(source)).state).toBe("ok");
    }
    const shared = (await registry.sources(undefined)).tools.get("shared_twin")!;
    await registry.loadDeclared(shared);
    expect(describe.mock.calls.map((args) => (args as unknown[] as [{ owner?: string }])[0].owner)).toEqual(["eve", "alice", undefined]);
  });

  it("keeps a schema-check failure until the tool changes", async () => {
    const { registry, describe } = registryWith([
      { ok: true, module: { exports: { dispatch: "function" }, schemas: [{ name: "wrong_prefix" }], profile: null } },
    ]);
    data.write("common_tools/fixed.ts", simpleTool("fixed"));
    vi.useFakeTimers({ toFake: ["hrtime"] });
    const source = (await registry.sources(undefined)).tools.get("fixed")!;
    const first = await registry.loadDeclared(source);
    expect(first.state === "error" && first.error.message).toMatch(/must be named fixed_<action>/);
    vi.advanceTimersByTime(LOAD_FAILURE_RETRY_MS * 10);
    expect((await registry.loadDeclared(source)).state).toBe("error");
    expect(describe).toHaveBeenCalledTimes(1);
  });
});
