import { execFileSync } from "node:child_process";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { CLI_MODES, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir, within } from "../helpers/data-dir.js";
import { type ArgvPlaces, expectDocumentedOutcome, withPlace } from "./argv.js";
import { fuzzParameters, propertyTimeoutMs } from "./settings.js";

/**
 * Property: any command line, in-process or through a running host, ends within a bound with a documented
 * exit code and no stack trace (see argv.ts `expectDocumentedOutcome`); through a host, the host serves a
 * well-formed call right after it.
 */
const ECHO_TOOL = `
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "Echo", input_schema: { type: "object", properties: { text: { type: "string" }, limit: { type: "integer" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "said " + args.text; }
`;
const RUNS = 12;
const CALL_BOUND_MS = 30_000;

describe.each(CLI_MODES)("any argv (%s)", (mode) => {
  let data: TempDataDir;
  let runner: CliRunner;
  let places: ArgvPlaces;

  beforeAll(async () => {
    data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL, "animas/bob/tools/.keep": "", "plain-file": "not a data dir\n" });
    execFileSync("mkfifo", [join(data.dir, "args.fifo")]);
    places = { dataDir: data.dir, fifo: join(data.dir, "args.fifo"), regularFile: join(data.dir, "plain-file"), missing: join(data.dir, "missing") };
    runner = await cliRunner(mode, data.dir);
  });
  afterAll(async () => {
    await runner.close();
    data.cleanup();
  });

  it(
    "gets a documented exit code, one error line or the -j envelope, no stack trace, no hang",
    async () => {
      await fc.assert(
        fc.asyncProperty(withPlace(places), async (argv) => {
          const run = await within(CALL_BOUND_MS, `animaworks-tool ${JSON.stringify(argv)}`, runner.run(argv, { cwd: data.dir }));
          expectDocumentedOutcome(argv, run);
          if (mode === "daemon") {
            // The host that took the call serves the next one.
            const next = await within(CALL_BOUND_MS, "the next call", runner.run(["--data-dir", data.dir, "--anima", "alice", "echo", "say", "next"]));
            if (next.code !== 0 || next.stdout !== "said next" || next.ranBy !== "host")
              throw new Error(`the host did not serve the call after ${JSON.stringify(argv)}: ${JSON.stringify(next)}`);
          }
        }),
        fuzzParameters(RUNS),
      );
    },
    propertyTimeoutMs(60_000, RUNS),
  );
});
