import { resolveConfig } from "../../src/config.js";
import type { LogRecord } from "../../src/host-options.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ivm from "isolated-vm";
import { BRIDGE_METHODS } from "../../src/contract/isolate.js";
import { TOOL_API_EXPORTS } from "../../src/contract/tool-api.js";
import { type Bridge, bindPrelude } from "../../src/isolation/isolate/pooled-isolate.js";
import { readPrelude } from "../../src/isolation/isolate/prelude-source.js";
import { REPO_ROOT, type TestHost, okOutput, useTestHost } from "../helpers/tools.js";

/**
 * `@animaworks/tool` is one list, `TOOL_API_EXPORTS` (src/contract/tool-api.ts), read by the prelude that
 * provides the values (its `toolApi` object is typed by the list) and by the bundler that lets a tool
 * import them; sandbox/animaworks-tool.d.ts declares their types for authors. These fail when they differ.
 */
describe("@animaworks/tool: prelude, import list and type declarations agree", () => {
  const valueNames = (text: string) => new Set([...text.matchAll(/^\s*export (?:const|function|class) (\w+)/gm)].map((m) => m[1]));

  it("declares a type for every importable name, and no value that cannot be imported", () => {
    const declarations = readFileSync(join(REPO_ROOT, "sandbox", "animaworks-tool.d.ts"), "utf8");
    expect(declarations).toMatch(/declare module "@animaworks\/tool" \{/);
    expect([...valueNames(declarations)].sort()).toEqual([...TOOL_API_EXPORTS].sort());
  });

  it("the prelude, once bound, provides exactly the names a tool may import, each a value", () => {
    const isolate = new ivm.Isolate({ memoryLimit: 16 });
    try {
      const context = isolate.createContextSync();
      isolate.compileScriptSync(readPrelude()).runSync(context);
      const bridge = Object.fromEntries(BRIDGE_METHODS.map((method) => [method, new ivm.Callback(() => undefined, { ignored: true })])) as Bridge;
      bindPrelude(context, bridge).release();
      const provided = JSON.parse(
        context.evalSync("JSON.stringify(Object.entries(__animaworksTool).map(([name, value]) => [name, value !== undefined]))") as string,
      ) as Array<[string, boolean]>;
      expect(provided.map(([name]) => name).sort()).toEqual([...TOOL_API_EXPORTS].sort());
      expect(provided.filter(([, defined]) => !defined)).toEqual([]);
    } finally {
      isolate.dispose();
    }
  });
});

describe("@animaworks/tool at run time", () => {
  let t: TestHost;
  beforeAll(() => {
    t = useTestHost();
    t.personal(
      "api_probe.ts",
      `import { logger, setTimeout, clearTimeout, sleep, ToolError, ToolConfigError } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "api_probe_run" }]; }
export async function dispatch() {
  logger.debug("d"); logger.info("i"); logger.warn("w"); logger.warning("w2"); logger.error("e"); logger.exception(new ToolError("boom"));
  let fired = false;
  const cancelled = setTimeout(() => { fired = true; }, 5);
  clearTimeout(cancelled);
  const started = Date.now();
  await sleep(20);
  const waited = await new Promise((resolve) => setTimeout((value) => resolve(value), 1, "timer arg"));
  return {
    logger: logger.name,
    slept: Date.now() - started >= 15,
    fired,
    waited,
    configIsToolError: new ToolConfigError("x") instanceof ToolError,
    names: [new ToolError("a").name, new ToolConfigError("b").name],
  };
}
`,
    );
  });
  afterAll(async () => t.close());

  it("provides the logger (with Python's aliases), timers, sleep and the error classes", async () => {
    expect(JSON.parse(okOutput(await t.host.call("alice", "api_probe_run")))).toEqual({
      logger: "animaworks.tools",
      slept: true,
      fired: false,
      waited: "timer arg",
      configIsToolError: true,
      names: ["ToolError", "ToolConfigError"],
    });
    const lines = t.logs.filter((r) => r.logger === "animaworks.tools").map((r) => [r.level, r.message, r.anima, r.tool]);
    expect(lines).toEqual([
      ["debug", "d", "alice", "api_probe"],
      ["info", "i", "alice", "api_probe"],
      ["warn", "w", "alice", "api_probe"],
      ["warn", "w2", "alice", "api_probe"],
      ["error", "e", "alice", "api_probe"],
      ["error", "ToolError: boom", "alice", "api_probe"],
    ]);
  });
});

describe("the host's log level", () => {
  it("is info by default (debug lines dropped), set by logLevel or $ANIMAWORKS_LOG_LEVEL, and refuses a bad one", () => {
    const seen: string[] = [];
    const sink = (record: LogRecord) => void seen.push(`${record.level}:${record.message}`);
    const line = (level: LogRecord["level"]) => ({ level, logger: "animaworks.tools", message: level });
    const byDefault = resolveConfig({ dataDir: "/tmp/none", onLog: sink });
    for (const level of ["debug", "info", "warn", "error"] as const) byDefault.onLog(line(level));
    expect(seen).toEqual(["info:info", "warn:warn", "error:error"]);
    seen.length = 0;
    const warnOnly = resolveConfig({ dataDir: "/tmp/none", onLog: sink, logLevel: "warn" });
    for (const level of ["debug", "info", "warn"] as const) warnOnly.onLog(line(level));
    expect(seen).toEqual(["warn:warn"]);
    expect(() => resolveConfig({ dataDir: "/tmp/none", logLevel: "loud" as LogRecord["level"] })).toThrow(/must be debug, info, warn or error/);
  });
});
