import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type CallResult, createHost } from "../../src/host.js";
import { cliRunner } from "../helpers/cli-modes.js";
import { type TestHost, useTestHost } from "../helpers/tools.js";

/**
 * A tool that throws at run time: its error names the tool's own lines (file:line:column relative to its
 * folder), through the host's source map of its bundle, and nothing a tool writes into `error.stack`
 * can put anything else there (src/bundling/tool-frames.ts).
 */

const SCHEMAS = `export function get_tool_schemas() {
  return ["get", "later", "clean"].map((action) => ({ name: "weather_" + action, description: "d", input_schema: { type: "object", properties: {} } }));
}
`;

const WEATHER = `import { parse } from "./lib/parse";
${SCHEMAS.trimEnd()}

export function weather_get() {
  const data: { value?: string } | undefined = undefined;
  return parse(data);
}

export async function weather_later() {
  await new Promise((resolve) => setTimeout(resolve, 1));
  const reading = undefined as unknown as { value: string };
  return reading.value;
}

export function weather_clean() {
  return parse({ value: "sunny" });
}
`;

const PARSE = `// a helper in a subfolder

export function parse(data: any): string {
  return data.value;
}
`;

/**
 * `line:column` (from 1) of the first `marker` in `source`, plus `offset` columns: where V8 places a
 * frame (a property read at the property's name, a call at the callee's name, `new` at `new`).
 */
function at(source: string, marker: string, offset = 0): string {
  const index = source.indexOf(marker);
  if (index < 0) throw new Error(`no ${marker}`);
  const before = source.slice(0, index).split("\n");
  return `${before.length}:${(before.at(-1)?.length ?? 0) + 1 + offset}`;
}

const IN_PARSE = `lib/parse.ts:${at(PARSE, "data.value", "data.".length)}`;
const IN_GET = `weather.ts:${at(WEATHER, "parse(data)")}`;
const IN_LATER = `weather.ts:${at(WEATHER, "reading.value", "reading.".length)}`;

function failure(result: CallResult): { error_type: string; message: string; fault: string } {
  if (result.status !== "error") throw new Error(`expected an error, got ${JSON.stringify(result)}`);
  return result;
}

describe("a tool's runtime error names its own lines", () => {
  let t: TestHost;
  afterEach(async () => t.close());

  it("names the line in an imported helper, then the line of the main file that called it", async () => {
    t = useTestHost();
    t.personal("weather.ts", WEATHER);
    t.personal("lib/parse.ts", PARSE);
    const result = failure(await t.host.call("alice", "weather_get", {}));
    expect(result).toMatchObject({ error_type: "ExecutionError", fault: "tool" });
    expect(IN_PARSE).toBe("lib/parse.ts:4:15");
    expect(result.message).toBe(`TypeError: Cannot read properties of undefined (reading 'value') (in ${IN_PARSE}, called from ${IN_GET})`);
    // A tool that works still works, and its result carries nothing of this.
    expect(await t.host.call("alice", "weather_clean", {})).toMatchObject({ status: "ok", output: "sunny" });
  });

  it("names the line of a throw after an await", async () => {
    t = useTestHost();
    t.personal("weather.ts", WEATHER);
    t.personal("lib/parse.ts", PARSE);
    expect(failure(await t.host.call("alice", "weather_later", {})).message).toBe(
      `TypeError: Cannot read properties of undefined (reading 'value') (in ${IN_LATER})`,
    );
  });

  it("shows nothing a tool writes into error.stack, and the host keeps serving", async () => {
    t = useTestHost({ timeoutMs: 3_000 });
    const dataDir = t.data.dir;
    t.personal(
      "evil.ts",
      `export function get_tool_schemas() {
  return ["fake", "huge", "getter", "prepare", "inherited", "line1"].map((a) => ({ name: "evil_" + a, description: "d", input_schema: { type: "object", properties: {} } }));
}
function fail(stack: unknown): never {
  const error = new TypeError("boom");
  Object.defineProperty(error, "stack", { value: stack });
  throw error;
}
export function evil_fake() {
  fail("Error: boom\\n    at readSecret (/etc/passwd:1:1)\\n    at x (${dataDir}/animas/alice/tools/evil.ts:3:1)\\n    at y (animaworks:prelude.js:10:5)\\n    at z (tool:personal/evil.ts:999999:1)\\n    at eval (eval at w (tool:personal/evil.ts:5:3), <anonymous>:1:1)\\n    at tool:personal/evil.ts:1:1");
}
export function evil_huge() {
  fail("    at f (tool:personal/evil.ts:1:1)\\n".repeat(200_000) + "x".repeat(4_000_000));
}
export function evil_getter() {
  const error = new TypeError("boom");
  Object.defineProperty(error, "stack", { get() { for (;;) {} } });
  throw error;
}
export function evil_inherited() {
  // V8 would call a formatter it finds anywhere up Error's prototype chain, getters included.
  Object.defineProperty(Object.prototype, "prepareStackTrace", { get() { for (;;) {} }, configurable: true });
  throw new TypeError("boom");
}
export function evil_prepare() {
  (Error as unknown as { prepareStackTrace: unknown }).prepareStackTrace = () => "    at f (/etc/shadow:1:1)";
  throw new TypeError("boom");
}
export function evil_line1() {
  fail(12345);
}
`,
    );
    t.personal("fine.ts", `${SCHEMAS.replaceAll("weather_", "fine_")}export function dispatch() { return "still here"; }\n`);
    // A getter or formatter of the tool's that never returns is never called: each ends at once, not at the timeout.
    for (const action of ["fake", "huge", "getter", "prepare", "inherited", "line1"]) {
      const result = failure(await t.host.call("alice", `evil_${action}`, {}));
      expect(result.message, action).toBe("TypeError: boom");
    }
    expect(await t.host.call("alice", "fine_get", {})).toMatchObject({ status: "ok", output: "still here" });
  });

  it("names no frame of the prelude; a ToolError or an Error keeps exactly the tool's message", async () => {
    t = useTestHost();
    const api = `import { ToolError } from "@animaworks/tool";
${SCHEMAS.replaceAll("weather_", "api_").trimEnd()}
export function api_get() {
  throw new ToolError("city not found");
}
export function api_later() {
  setTimeout("soon" as unknown as () => void, 1);
}
export function api_clean() {
  throw new Error("no disk");
}
`;
    t.personal("api.ts", api);
    // Thrown inside the prelude's setTimeout: named where the tool called it, not in the prelude.
    expect(failure(await t.host.call("alice", "api_later", {})).message).toBe(
      `TypeError: setTimeout needs a function as its first argument (in api.ts:${at(api, "setTimeout(")})`,
    );
    // The failures a tool words itself (README: "exactly your message") get no lines.
    expect(failure(await t.host.call("alice", "api_get", {})).message).toBe("city not found");
    expect(failure(await t.host.call("alice", "api_clean", {})).message).toBe("no disk");
  });

  it("maps a bundle read from the cache by a second host", async () => {
    t = useTestHost();
    t.personal("weather.ts", WEATHER);
    t.personal("lib/parse.ts", PARSE);
    expect(failure(await t.host.call("alice", "weather_get", {})).message).toContain(`(in ${IN_PARSE}, called from ${IN_GET})`);
    const cacheDir = join(t.data.dir, "cache", "animaworks-tool", "bundles");
    const cached = readdirSync(cacheDir, { recursive: true }).map(String);
    expect(cached.filter((name) => name.endsWith(".map.json")).length).toBeGreaterThan(0);
    // A new host: its bundler builds nothing (the bundle comes from the cache) and holds no map in memory.
    const second = createHost({ dataDir: t.data.dir, coreToolsDir: t.coreDir, isolation: "in-process", onLog: () => {} });
    try {
      expect(failure(await second.call("alice", "weather_get", {})).message).toContain(`(in ${IN_PARSE}, called from ${IN_GET})`);
    } finally {
      await second.close();
    }
  });
});

describe("the lines in the CLI's -j envelope and one-line error", () => {
  let t: TestHost;
  afterEach(async () => t.close());

  it("are part of the message", async () => {
    t = useTestHost();
    t.personal("weather.ts", WEATHER);
    t.personal("lib/parse.ts", PARSE);
    const cli = await cliRunner("in-process", t.data.dir);
    const json = await cli.run(["--data-dir", t.data.dir, "--anima", "alice", "-j", "weather", "get"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      status: "error",
      error_type: "ExecutionError",
      fault: "tool",
      message: `TypeError: Cannot read properties of undefined (reading 'value') (in ${IN_PARSE}, called from ${IN_GET})`,
    });
    const line = await cli.run(["--data-dir", t.data.dir, "--anima", "alice", "weather", "later"]);
    expect(line.stderr).toContain(`(in ${IN_LATER})`);
    expect(line.stderr).not.toContain(t.data.dir);
  });
});
