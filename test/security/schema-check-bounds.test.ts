import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, within } from "../helpers/data-dir.js";

/**
 * What a tool's schema checks runs on the host's thread, for every Anima: the arguments a caller sends
 * (up to 64 MiB) and the result a tool returns, against a schema the tool wrote. Each attack below held
 * or ended the shared daemon (red-team round 19); each is now refused on its own, with a bounded
 * message, and alice's call after it is served. (Time is bounded only by each test's limit: before the
 * fixes each ran for minutes, or ended the process.)
 */

/** Colons after a scheme, then a character the expression cannot match: its backtracking grew with the cube of the colons. */
const URL_BOMB = `http://${":".repeat(200_000)}\u0000`;

const LINKS = `
export function get_tool_schemas() {
  return [
    { name: "links_check", description: "check", input_schema: { type: "object", properties: { url: { type: "string", format: "url" } } } },
    { name: "links_echo", description: "echo", input_schema: { type: "object", properties: { kind: { type: "string" } } },
      output_schema: { type: "object", properties: { url: { type: "string", format: "url" } } } },
    { name: "links_list", description: "list", input_schema: { type: "object", properties: {
      exclude: { type: "array", maxItems: 1000, items: { type: "string" } } } } },
  ];
}
export function dispatch(name, args) {
  if (name === "links_echo") return { url: args.kind === "bomb" ? "http://" + ":".repeat(200000) + "\\u0000" : "https://example.com/a" };
  return "ok";
}
`;

/** A definition of 200 properties named 800 times (37 KB): inlined, ajv generated code past the heap for it and the daemon ended (100 × 400: 38.7 M characters, 17.8 s, 1.7 GB). */
function refBombTool(): string {
  const properties = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${i}`, { type: "string" }]));
  const refs = Object.fromEntries(Array.from({ length: 800 }, (_, i) => [`r${i}`, { $ref: "#/definitions/part" }]));
  const schema = { type: "object", definitions: { part: { type: "object", properties } }, properties: refs };
  return `export function get_tool_schemas() { return [{ name: "refbomb_run", description: "run", input_schema: ${JSON.stringify(schema)} }]; }
export function dispatch() { return "ran"; }`;
}

/** A flat schema of `count` string properties (2,500: ≈ 63 KB, under the 64 KiB bound; too wide for a first-error validator). */
function wideTool(name: string, count: number): string {
  const properties = Object.fromEntries(Array.from({ length: count }, (_, i) => [`p${i}`, { type: "string" }]));
  return `export function get_tool_schemas() { return [{ name: "${name}_run", description: "run", input_schema: ${JSON.stringify({ type: "object", properties })} }]; }
export function dispatch() { return "ran"; }`;
}

/** One action whose items must be one of 5,000 names: every wrong item's error named all 5,000 (15–56 s to describe 30,000). */
const PICKER = `
export function get_tool_schemas() {
  const names = Array.from({ length: 5000 }, (_, i) => "name" + i);
  return [{ name: "picker_pick", description: "pick", input_schema: { type: "object", properties: { picks: { type: "array", items: { enum: names } } } } }];
}
export function dispatch() { return "picked"; }
`;

/** Eight definitions, each an anyOf of ten $refs to the one before (1.9 KB at six: 1.4 s and 1.1 M errors on {"a":1}; ×10 a level). */
function fanOutTool(): string {
  const definitions: Record<string, unknown> = { d0: { type: "string" } };
  for (let level = 1; level < 8; level++) definitions[`d${level}`] = { anyOf: Array.from({ length: 10 }, () => ({ $ref: `#/definitions/d${level - 1}` })) };
  const schema = { type: "object", definitions, properties: { a: { $ref: "#/definitions/d7" } } };
  return `export function get_tool_schemas() { return [{ name: "fanout_run", description: "run", input_schema: ${JSON.stringify(schema)} }]; }
export function dispatch() { return "ran"; }`;
}

const PING = `
export function get_tool_schemas() { return [{ name: "ping_now", description: "ping" }]; }
export function dispatch() { return "pong"; }
`;

describe("schema checks bounded by what they check", () => {
  let data: TempDataDir;
  let host: ToolHost;
  beforeAll(() => {
    data = makeDataDir({
      "animas/mallory/tools/links.ts": LINKS,
      "animas/mallory/tools/refbomb.ts": refBombTool(),
      "animas/mallory/tools/picker.ts": PICKER,
      "animas/mallory/tools/fanout.ts": fanOutTool(),
      "animas/alice/tools/ping.ts": PING,
      "animas/alice/tools/wide.ts": wideTool("wide", 2_500),
      "animas/alice/tools/broad.ts": wideTool("broad", 2_000),
    });
    host = createHost({ dataDir: data.dir, isolation: "in-process", timeoutMs: 20_000, onLog: () => {} });
  });
  afterAll(async () => {
    await host?.close();
    data?.cleanup();
  });

  const alicePings = async (): Promise<void> => {
    expect(await within(20_000, "alice's call", host.call("alice", "ping_now", {}))).toMatchObject({ status: "ok", output: "pong" });
  };

  it("url_format_stall: a crafted string under format url is refused at once, as an argument and as a result", async () => {
    const refused = await within(20_000, "mallory's call", host.call("mallory", "links_check", { url: URL_BOMB }));
    expect(refused).toMatchObject({ status: "error", error_type: "InvalidArguments" });
    expect(refused.status === "error" && refused.message).toMatch(/"url" must match format "url"/);
    await alicePings();
    const result = await within(20_000, "mallory's call", host.call("mallory", "links_echo", { kind: "bomb" }));
    expect(result).toMatchObject({ status: "error", error_type: "ExecutionError" });
    expect(result.status === "error" && result.message).toMatch(/does not match its output_schema: "url" must match format "url"/);
    await alicePings();
    // What the format is for still passes.
    expect(await host.call("mallory", "links_check", { url: "https://example.com/path?q=1" })).toMatchObject({ status: "ok" });
    expect(await host.call("mallory", "links_echo", { kind: "plain" })).toMatchObject({ status: "ok" });
  }, 60_000);

  it("all_errors_flood: millions of wrong items make one problem, not one per item", async () => {
    const exclude = new Array<number>(4_000_000).fill(1);
    const refused = await within(30_000, "mallory's call", host.call("mallory", "links_list", { exclude }));
    expect(refused).toMatchObject({ status: "error", error_type: "InvalidArguments" });
    const message = refused.status === "error" ? refused.message : "";
    expect(message).toMatch(/"exclude" must NOT have more than 1000 items/);
    expect(message.length).toBeLessThan(1_000);
    // A small wrong value still lists its problems, at most 20 and the count of the rest.
    const few = await host.call("mallory", "links_list", { exclude: new Array<number>(50).fill(1) });
    const lines = few.status === "error" ? few.message.split("; ") : [];
    expect(lines).toHaveLength(21);
    expect(lines.at(-1)).toBe("and more problems (50 errors in all)");
    await alicePings();
  }, 60_000);

  it("ref_inline_bomb: a definition named hundreds of times compiles once, as a call", async () => {
    expect(await within(30_000, "mallory's call", host.call("mallory", "refbomb_run", { r1: { p1: "x" } }))).toMatchObject({ status: "ok", output: "ran" });
    const refused = await host.call("mallory", "refbomb_run", { r799: { p199: 5 } });
    expect(refused).toMatchObject({ status: "error", error_type: "InvalidArguments" });
    expect(refused.status === "error" && refused.message).toMatch(/"r799\.p199" must be string/);
    await alicePings();
  }, 60_000);

  it("a large value under a schema too wide to check one problem at a time is checked whole when it has few parts", async () => {
    // 2,500 parts: no first-error validator can be made; 2,000: one can, and overflows the stack as it runs.
    for (const tool of ["wide_run", "broad_run"]) {
      expect(await within(30_000, "alice's call", host.call("alice", tool, { p1: "x".repeat(70_000) }))).toMatchObject({ status: "ok", output: "ran" });
      const wrong = await host.call("alice", tool, { p1: 5, p2: "x".repeat(70_000) });
      expect(wrong).toMatchObject({ status: "error", error_type: "InvalidArguments" });
      expect(wrong.status === "error" && wrong.message).toMatch(/"p1" must be string/);
      // Many parts could make as many errors: refused, saying why.
      const many = await host.call("alice", tool, { p1: new Array<string>(20_000).fill("a") });
      expect(many).toMatchObject({ status: "error", error_type: "InvalidArguments" });
      expect(many.status === "error" && many.message).toMatch(/too large to be checked against a schema of this many parts/);
    }
  }, 120_000);

  it("enum_describe_flood: thousands of wrong items under an enum of thousands are described in 20 lines, each naming a cut list", async () => {
    const refused = await within(30_000, "mallory's call", host.call("mallory", "picker_pick", { picks: new Array<number>(30_000).fill(0) }));
    expect(refused).toMatchObject({ status: "error", error_type: "InvalidArguments" });
    const message = refused.status === "error" ? refused.message : "";
    expect(message).toMatch(/"picks\.0" must be one of \["name0","name1",/);
    expect(message).toMatch(/and more problems \(30000 errors in all\)/);
    expect(message.length).toBeLessThan(10_000);
    await alicePings();
  }, 60_000);

  it("schema_fan_out: a schema whose anyOf and $ref multiply past the bound does not load, and nothing is validated against it", async () => {
    const refused = await within(30_000, "mallory's call", host.call("mallory", "fanout_run", { a: 1 }));
    expect(refused).toMatchObject({ status: "error", error_type: "LoadError" });
    expect(refused.status === "error" && refused.message).toMatch(/applies its parts more than 10000 times to one path of a value/);
    await alicePings();
  }, 60_000);
});
