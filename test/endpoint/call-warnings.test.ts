import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_CALL_WARNINGS } from "../../src/capabilities/call-warnings.js";
import { CLI_MODES, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

// The host's warnings about one call (a refused file read…) reach that call's caller on stderr, through
// a running host as in-process (issue #35 item 8: they went to the daemon's log), and no other caller.

const PEEK = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() {
  return [{ name: "peek_read", description: "reads files", input_schema: { type: "object", properties: { path: { type: "string" }, times: { type: "integer" } }, required: ["path"] } }];
}
export async function dispatch(name, args) {
  let refused = 0;
  for (let i = 0; i < (args.times ?? 1); i++) {
    try { await fs.readFile(args.path + (args.times ? "-" + i : "")); } catch { refused++; }
  }
  return "refused " + refused;
}
`;

let data: TempDataDir;
beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/peek.mjs": PEEK, "animas/bob/tools/peek.mjs": PEEK });
});
afterAll(() => data.cleanup());

/** Each mode's runs, by what they were. */
const runs = new Map<string, Record<string, { code: number; stdout: string; stderr: string }>>();

describe.each(CLI_MODES)("a call's host warnings (%s)", (mode) => {
  let runner: CliRunner;
  beforeAll(async () => {
    runner = await cliRunner(mode, data.dir);
  });
  afterAll(() => runner.close());

  const call = async (label: string, ...argv: string[]) => {
    const run = await runner.run(["--data-dir", data.dir, ...argv]);
    if (mode === "daemon") expect(run.ranBy).toBe("host");
    const result = { code: run.code, stdout: run.stdout, stderr: run.stderr };
    runs.set(mode, { ...runs.get(mode), [label]: result });
    return result;
  };

  it("are printed on the caller's stderr: a refused read", async () => {
    const run = await call("one", "--anima", "alice", "peek", "read", "/etc/hostname");
    expect(run).toMatchObject({ code: 0, stdout: "refused 1" });
    expect(run.stderr).toMatch(/^\[warn\] animaworks\.host \(alice\/peek\): denied fs\.readFile: .*absolute path outside the Anima's directory/);
    expect(run.stderr.split("\n")).toHaveLength(1);
  });

  it(`are bounded per call: ${MAX_CALL_WARNINGS} lines, then how many more there were`, async () => {
    const run = await call("many", "--anima", "alice", "peek", "read", "/etc/nothing", "--times", "80");
    expect(run.stdout).toBe("refused 80");
    const lines = run.stderr.split("\n");
    expect(lines).toHaveLength(MAX_CALL_WARNINGS + 1);
    expect(lines.slice(0, -1).every((line) => line.includes("denied fs.readFile"))).toBe(true);
    expect(lines.at(-1)).toBe(
      `[warn] animaworks.host (alice/peek): ${80 - MAX_CALL_WARNINGS} more warnings of this call not shown (at most ${MAX_CALL_WARNINGS} lines and 16 KiB are shown per call)`,
    );
  });

  it("go to their own call's caller only, however calls interleave", async () => {
    const [alice, bob] = await Promise.all([
      call("alice", "--anima", "alice", "peek", "read", "/etc/alice-only", "--times", "5"),
      call("bob", "--anima", "bob", "peek", "read", "/etc/bob-only", "--times", "5"),
    ]);
    for (const [run, own, other] of [
      [alice, "alice", "bob"],
      [bob, "bob", "alice"],
    ] as const) {
      const lines = run.stderr.split("\n");
      expect(lines).toHaveLength(5);
      for (const line of lines) {
        expect(line).toContain(`(${own}/peek): denied fs.readFile`);
        expect(line).not.toContain(other);
      }
    }
  });
});

describe("in-process and through a running host", () => {
  it("the same calls give the same output", () => {
    const inProcess = runs.get("in-process");
    expect(Object.keys(inProcess ?? {})).toHaveLength(4);
    expect(runs.get("daemon")).toEqual(inProcess);
  });
});
