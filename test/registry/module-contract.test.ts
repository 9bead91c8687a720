import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type TestHost, installFixtures, okOutput, useTestHost } from "../helpers/tools.js";

/** The module interface of docs/design.md §3 / docs/animaworks-reference.md §3, exercised through a host on real isolates. */
describe("the tool module contract", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  function withContractTools(options: Parameters<typeof useTestHost>[0] = {}): TestHost {
    t = useTestHost(options);
    installFixtures("contract", join(t.data.dir, "animas", "alice", "tools"));
    return t;
  }

  it("reads getToolSchemas and cliMain as aliases of get_tool_schemas and cli_main", async () => {
    withContractTools();
    const camel = await t.host.describe("alice", "camel");
    expect(camel.status).toBe("ok");
    expect(camel.schemas.map((s) => s.name)).toEqual(["camel_echo"]);
    expect(camel.hasCliMain).toBe(true);
    expect(okOutput(await t.host.call("alice", "camel_echo", { text: "hi" }))).toBe("camel_echo: hi");
    expect(okOutput(await t.host.callCli("alice", "camel", ["--x", "1"]))).toBe('camel cli got ["--x","1"]');
  });

  it("detects cli_main and passes the raw argv to it, and the Anima's folder second; tools without one say so", async () => {
    withContractTools();
    expect((await t.host.describe("alice", "snake_cli")).hasCliMain).toBe(true);
    expect(JSON.parse(okOutput(await t.host.callCli("alice", "snake_cli", ["run", "--flag", "two words"])))).toEqual({
      argv: ["run", "--flag", "two words"],
      animaDir: join(t.data.dir, "animas", "alice"),
    });
    expect((await t.host.describe("alice", "prefers_dispatch")).hasCliMain).toBe(false);
    const none = await t.host.callCli("alice", "prefers_dispatch", []);
    expect(none.status === "error" && none.error_type).toBe("ToolNotFound");
  });

  it("calls dispatch(name, args) in preference to a function named like the schema (ref 21)", async () => {
    withContractTools();
    expect(okOutput(await t.host.call("alice", "prefers_dispatch_run"))).toBe("dispatch answered prefers_dispatch_run");
  });

  it("calls the function named like the schema when there is no dispatch, with the args object (ref 22)", async () => {
    withContractTools();
    expect(okOutput(await t.host.call("alice", "named_only_greet", { who: "Ada" }))).toBe("hello Ada");
    // anima_dir is injected here too (the Python reference's keyword-argument TypeError cannot happen).
    expect(JSON.parse(okOutput(await t.host.call("alice", "named_only_keys", {})))).toEqual(["anima_dir"]);
  });

  it("makes a tool that handles only some of its schemas unavailable, naming the unhandled ones (ref 23)", async () => {
    withContractTools();
    const info = await t.host.describe("alice", "no_handler");
    expect(info.status).toBe("error");
    expect(info.error?.type).toBe("LoadError");
    expect(info.error?.message).toBe("no_handler: no handler for no_handler_b");
    expect(info.error?.hint).toMatch(/export dispatch\(name, args\), or a function named like each schema/);
    const call = await t.host.call("alice", "no_handler_a");
    expect(call.status === "error" && call.error_type).toBe("LoadError");
  });

  it("loads CommonJS modules and async get_tool_schemas() with `parameters`", async () => {
    withContractTools();
    expect(okOutput(await t.host.call("alice", "common_js_ping"))).toBe("common_js_ping: pong");
    expect(okOutput(await t.host.call("alice", "async_schemas_sum", { values: [1, 2, 3.5] }))).toBe("6.5");
    const info = await t.host.describe("alice", "async_schemas");
    expect(info.schemas[0]?.parameters).toMatchObject({ type: "object", required: ["values"] });
    expect(info.schemas[0]?.description).toBe("");
  });

  it("applies EXECUTION_PROFILE timeout_seconds per action, hyphenated keys included", async () => {
    withContractTools({ timeoutMs: 250 });
    const info = await t.host.describe("alice", "profiled");
    expect(info.schemas.find((s) => s.action === "patient")?.profile).toEqual({ expected_seconds: 2, background_eligible: true, timeout_seconds: 5 });
    expect(info.schemas.find((s) => s.action === "slow_one")?.profile?.timeout_seconds).toBe(0.3);
    expect(info.schemas.find((s) => s.action === "plain")?.profile).toBeUndefined();

    // Longer than the host default of 250 ms, allowed by the action's 5 s.
    expect(okOutput(await t.host.call("alice", "profiled_patient", { ms: 600 }))).toBe("profiled_patient slept 600 ms");
    // The same wait without a profile runs into the host default.
    const plain = await t.host.call("alice", "profiled_plain", { ms: 600 });
    expect(plain.status === "error" && plain.error_type).toBe("Timeout");
    // Shorter than the default: "slow-one" allows 0.3 s.
    const slow = await t.host.call("alice", "profiled_slow_one", { ms: 5_000 });
    expect(slow.status === "error" && slow.error_type).toBe("Timeout");
    expect(slow.status === "error" && slow.message).toMatch(/within 300 ms/);
    expect(slow.durationMs).toBeLessThan(3_000);
  });
});

describe("a broken tool is unavailable with a LoadError; the others keep working (ref 26, 27)", () => {
  let t: TestHost;
  afterEach(async () => t?.close());

  it("reports each kind of breakage with its reason", async () => {
    t = useTestHost({ loadTimeoutMs: 500 });
    installFixtures("broken", join(t.data.dir, "animas", "alice", "tools"));
    const listing = await t.host.list("alice");
    const byName = new Map(listing.tools.map((tool) => [tool.name, tool]));
    expect(byName.get("healthy")?.status).toBe("ok");

    const expectations: Record<string, RegExp> = {
      syntax_error: /personal\/syntax_error\.ts could not be built: syntax_error\.ts:2:10: Expected "}" but found "\["/,
      top_throw: /top-level code threw: cannot start: the lookup table is missing/,
      top_loop: /did not finish within/,
      schemas_throw: /get_tool_schemas\(\) threw: Error: schema table not ready/,
      no_schemas: /does not export get_tool_schemas\(\)/,
      bad_schema: /at "properties\.n\.type": must be one of .*\(got "integr"\)/,
      wrong_name: /schema "other_x" must be named wrong_name_<action>/,
    };
    for (const [name, pattern] of Object.entries(expectations)) {
      const tool = byName.get(name);
      expect(tool?.status, name).toBe("error");
      expect(tool?.error?.type, name).toBe("LoadError");
      expect(tool?.error?.message, name).toMatch(pattern);
      const call = await t.host.call("alice", `${name}_x`);
      expect(call.status === "error" && call.error_type, name).toBe("LoadError");
    }
    // Host paths never leak into load errors.
    for (const tool of listing.tools) expect(tool.error?.message ?? "").not.toContain(t.data.dir);
    expect(okOutput(await t.host.call("alice", "healthy_ping"))).toBe("pong");
  });
});
