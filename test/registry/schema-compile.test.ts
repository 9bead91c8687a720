import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { InlineSourceChecker, ProcessSourceChecker, sharedSourceChecker } from "../../src/lifecycle/source-checker.js";
import { INLINE_SCHEMA_CHARS, type SchemaCheckRequest } from "../../src/registry/schema-compile.js";
import { loadValidator } from "../../src/validation/ajv.js";
import { type CheckReplyMessage, MAX_REPLY_FRAME_BYTES } from "../../src/lifecycle/checks-process/protocol.js";
import { replyFrame } from "../../src/lifecycle/checks-process/reply-bound.js";
import { FrameDecoder } from "../../src/isolation/wire/frames.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { turnsDuring } from "../helpers/event-loop.js";

/**
 * schema_compile_stall: a tool's schemas are checked and compiled when the host loads it, and a 62 KB
 * schema costs that ≈ 0.5 s; twenty such tools of one Anima held every other Anima's calls up to 2.5 s
 * each on a shared daemon. A schema larger than INLINE_SCHEMA_CHARS is checked and compiled in the
 * source-checks process instead, each Anima's loads in turn (so that many of them wait there rather
 * than fail as Busy); small ones, as honest tools have, stay on the host's thread (no round trip on a
 * first call).
 */

/** A flat schema of `count` string properties (2,400 ≈ 62 KB: under the 64 KiB schema bound). */
function wideSchema(count: number): Record<string, unknown> {
  return { type: "object", properties: Object.fromEntries(Array.from({ length: count }, (_, i) => [`p${i}`, { type: "string" }])) };
}

function wideTool(name: string, count: number): string {
  return `export function get_tool_schemas() { return [{ name: "${name}_run", description: "run", input_schema: ${JSON.stringify(wideSchema(count))} }]; }
export function dispatch(name, args) { return "ran " + Object.keys(args).filter((key) => key !== "anima_dir").length; }`;
}

describe("a tool's schemas checked and compiled off the host's thread", () => {
  const checkers: ProcessSourceChecker[] = [];
  afterEach(async () => {
    await Promise.all(checkers.splice(0).map((checker) => checker.close()));
  });

  it("schema_compile_stall: the checks process compiles a wide schema while the event loop turns (on this thread it holds it)", async () => {
    const request: SchemaCheckRequest = {
      toolName: "wide",
      schemas: [{ name: "wide_run", description: "run", input_schema: wideSchema(2_400) }],
      profile: undefined,
    };
    expect(JSON.stringify(request.schemas).length).toBeGreaterThan(INLINE_SCHEMA_CHARS);
    const inProcess = new ProcessSourceChecker();
    checkers.push(inProcess);
    const [there, here] = [await turnsDuring(() => inProcess.checkSchemas(request)), await turnsDuring(() => new InlineSourceChecker().checkSchemas(request))];
    expect(here.turns).toBe(0); // the measure works: work on this thread gives it no turn
    expect(there.turns).toBeGreaterThan(10);
    expect(there.result.ok && here.result.ok).toBe(true);
    if (!there.result.ok) return;
    const schema = there.result.schemas[0];
    expect(schema?.name).toBe("wide_run");
    // The code made there validates here, as a cached description's does.
    const validate = loadValidator(schema?.validatorSource ?? "");
    expect(validate({ p7: "x" })).toBe(true);
    expect(validate({ p2399: 5 })).toBe(false);
  }, 60_000);

  it("says a tool whose validators' code would pass the reply's bound is too large, as the tool's problem (not a failed check retried)", () => {
    const schema = { name: "big_run", action: "run", description: "run", parameters: { type: "object" as const } };
    const reply = (validatorSource: string): CheckReplyMessage => ({
      id: 7,
      schemaCheck: { ok: true, schemas: [{ ...schema, validatorSource }], profile: {} },
    });
    const decoded = (frame: Buffer): unknown => new FrameDecoder(MAX_REPLY_FRAME_BYTES).push(frame)[0];
    expect(decoded(replyFrame(reply("x".repeat(1_000))))).toEqual(reply("x".repeat(1_000)));
    // Past the bound the host's decoder refuses: the tool is told instead, in a frame it takes.
    expect(decoded(replyFrame(reply("x".repeat(MAX_REPLY_FRAME_BYTES))))).toEqual({
      id: 7,
      schemaCheck: { ok: false, problems: [expect.stringMatching(/^its schemas compile to \d+ bytes of validators, more than the 16777216 the host takes/)] },
    });
  });

  it("refuses a wrong schema there as here, with the same problems", async () => {
    const request: SchemaCheckRequest = {
      toolName: "wide",
      schemas: [{ name: "wide_run", description: "run", input_schema: { ...wideSchema(1_000), required: ["nope"] } }],
      profile: undefined,
    };
    const inProcess = new ProcessSourceChecker();
    checkers.push(inProcess);
    const there = await inProcess.checkSchemas(request);
    expect(there.ok).toBe(false);
    expect(there).toEqual(await new InlineSourceChecker().checkSchemas(request));
  }, 60_000);
});

describe("a host loading an Anima's tools with large schemas", () => {
  let data: TempDataDir;
  let host: ToolHost;
  afterAll(async () => {
    await host?.close();
    data?.cleanup();
  });

  it("checks each in the shared checks process, in turn: all twelve load (none refused as Busy), and their validators hold", async () => {
    const tools: Record<string, string> = { "animas/mallory/tools/small.ts": wideTool("small", 5) };
    for (let i = 0; i < 12; i++) tools[`animas/mallory/tools/wide${i}.ts`] = wideTool(`wide${i}`, 1_500);
    data = makeDataDir(tools);
    // Counts what the host's composition hands the shared checker.
    const shared = sharedSourceChecker();
    const asked: string[] = [];
    const original = shared.checkSchemas.bind(shared);
    shared.checkSchemas = (request, asker) => {
      asked.push(`${asker}:${request.toolName}`);
      return original(request, asker);
    };
    try {
      host = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
      const listing = await host.list("mallory");
      expect(listing.tools.filter((tool) => tool.status === "error").map((tool) => tool.error?.message)).toEqual([]);
      expect(listing.tools.filter((tool) => tool.name.startsWith("wide"))).toHaveLength(12);
      // The large ones went there, as mallory's; the small one was compiled here.
      expect(asked.toSorted()).toEqual(Array.from({ length: 12 }, (_, i) => `mallory:wide${i}`).toSorted());
    } finally {
      shared.checkSchemas = original;
    }
    expect(await host.call("mallory", "wide3_run", { p1: "a", p2: "b" })).toMatchObject({ status: "ok", output: "ran 2" });
    expect(await host.call("mallory", "wide3_run", { p1499: 7 })).toMatchObject({ status: "error", error_type: "InvalidArguments" });
  }, 120_000);
});
