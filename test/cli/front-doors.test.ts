import { execFileSync, spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_ARGUMENTS_BYTES } from "../../src/endpoint/invocation.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { CLI_MODES, type CliRun, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir, within } from "../helpers/data-dir.js";

/**
 * The CLI's doors under bad input, in-process and through a running host alike: every input gets its
 * documented exit code and one error line (or the `-j` envelope wherever `-j` stands), no stack trace,
 * no hang, nothing created where it was not asked for; and a host that served a bad call serves the next.
 */
const ECHO_TOOL = `
export function get_tool_schemas() {
  return [{ name: "echo_say", description: "Echo", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "said " + args.text; }
`;

const STACK = /\n\s+at .+:\d+:\d+/;

function expectOneErrorLine(run: CliRun, code: number, line: RegExp): void {
  expect(run.code).toBe(code);
  expect(run.stderr).toMatch(line);
  expect(run.stderr.split("\n").filter((l) => l.startsWith("Error ("))).toHaveLength(1);
  expect(run.stderr + run.stdout).not.toMatch(STACK);
}

describe.each(CLI_MODES)("the CLI's doors under bad input (%s)", (mode) => {
  let data: TempDataDir;
  let runner: CliRunner;
  let scratch: string;
  const cli = (...argv: string[]) => within(15_000, `animaworks-tool ${argv.join(" ")}`, runner.run(["--data-dir", data.dir, ...argv]));

  beforeAll(async () => {
    data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL });
    scratch = mkdtempSync(join(tmpdir(), "awt-doors-"));
    runner = await cliRunner(mode, data.dir);
  });
  afterAll(async () => {
    await runner.close();
    data.cleanup();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("refuses an --args-file that is a FIFO at once (five of them leave the host serving)", async () => {
    const fifo = join(scratch, "args.fifo");
    execFileSync("mkfifo", [fifo]);
    const runs = await Promise.all(Array.from({ length: 5 }, () => cli("--anima", "alice", "echo", "say", "--args-file", fifo)));
    for (const run of runs)
      expectOneErrorLine(run, 2, new RegExp(`^Error \\(InvalidArguments\\): --args-file ${fifo} is not a regular file \\(it is a FIFO\\)`));
    const next = await cli("--anima", "alice", "echo", "say", "after");
    expect(next).toMatchObject({ code: 0, stdout: "said after" });
    if (mode === "daemon") expect(next.ranBy).toBe("host");
  });

  it("refuses /dev/zero and a file over the size cap as --args-file, without reading them", async () => {
    expectOneErrorLine(
      await cli("--anima", "alice", "echo", "say", "--args-file", "/dev/zero"),
      2,
      /^Error \(InvalidArguments\): --args-file \/dev\/zero is not a regular file \(it is a character device\)/,
    );
    const big = join(scratch, "big.json");
    writeFileSync(big, "");
    truncateSync(big, MAX_ARGUMENTS_BYTES + 1); // sparse: costs no disk
    expectOneErrorLine(
      await cli("--anima", "alice", "echo", "say", "--args-file", big),
      2,
      new RegExp(`--args-file ${big} is larger than the ${MAX_ARGUMENTS_BYTES}-byte limit`),
    );
  });

  it("refuses arguments on stdin over the cap with an argument error (exit 2), and serves the next call", async () => {
    const run = await within(
      60_000,
      "a call with too much stdin",
      runner.run(["--data-dir", data.dir, "--anima", "alice", "echo", "say", "--args-file", "-"], { stdin: "x".repeat(MAX_ARGUMENTS_BYTES + 1) }),
    );
    expectOneErrorLine(run, 2, new RegExp(`^Error \\(InvalidArguments\\): the arguments on stdin are larger than the ${MAX_ARGUMENTS_BYTES}-byte limit`));
    expect((await cli("--anima", "alice", "echo", "say", "next")).stdout).toBe("said next");
  }, 60_000);

  it("takes an empty --data-dir as an error, creating nothing in the working directory", async () => {
    const cwd = mkdtempSync(join(scratch, "cwd-"));
    const run = await within(15_000, "--data-dir ''", runner.run(["--data-dir", "", "--anima", "alice", "echo", "say", "x"], { cwd }));
    expectOneErrorLine(run, 2, /^Error \(InvalidArguments\): --data-dir is empty/);
    expect(readdirSync(cwd)).toEqual([]);
  });

  it("takes a regular file as --data-dir as NotFound (exit 2), not as an empty data dir", async () => {
    const file = join(scratch, "passwd");
    writeFileSync(file, "root:x:0:0::/root:/bin/sh\n");
    for (const argv of [["list"], ["--anima", "alice", "echo", "say", "x"]]) {
      const run = await within(15_000, "--data-dir FILE", runner.run(["--data-dir", file, ...argv]));
      expectOneErrorLine(run, 2, new RegExp(`^Error \\(NotFound\\): the data dir ${file} is not a directory`));
    }
  });

  it("answers in the -j envelope wherever -j stands, for errors found before the call", async () => {
    const badConfig = makeDataDir({ "animas/alice/tools/.keep": "", "config.json": JSON.stringify({ animaworks_tool: { no_such_key: 1 } }) });
    try {
      const cases: Array<[string[], string, number]> = [
        [["--data-dir", data.dir, "--anima", "carol", "echo", "say", "abc", "-j"], "NotFound", 2],
        [["--data-dir", join(scratch, "missing"), "echo", "say", "abc", "--json"], "NotFound", 2],
        // The operator's file is wrong: the operator's error (exit 1), not the caller's.
        [["--data-dir", badConfig.dir, "--anima", "alice", "echo", "say", "abc", "-j"], "ToolConfigError", 1],
        [["--data-dir", data.dir, "--anima", "alice", "echo", "say", "--args-file", "/dev/zero", "-j"], "InvalidArguments", 2],
      ];
      for (const [argv, type, code] of cases) {
        const run = await within(15_000, argv.join(" "), runner.run(argv));
        expect(run.code).toBe(code);
        expect(run.stderr).toBe("");
        expect(JSON.parse(run.stdout)).toMatchObject({ status: "error", error_type: type, fault: expect.any(String), message: expect.any(String) });
      }
    } finally {
      badConfig.cleanup();
    }
  });
});

describe("the CLI's doors as processes", () => {
  it("reads no more than the cap from this process's stdin (--args-file - < /dev/zero)", () => {
    const data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL });
    try {
      const zero = openSync("/dev/zero", "r"); // endless stdin
      const run = spawnSync(
        process.execPath,
        [join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--no-daemon", "--data-dir", data.dir, "--anima", "alice", "echo", "say", "--args-file", "-"],
        {
          stdio: [zero, "pipe", "pipe"],
          timeout: 30_000,
          encoding: "utf8",
        },
      );
      closeSync(zero);
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(new RegExp(`^Error \\(InvalidArguments\\): the arguments on stdin are larger than the ${MAX_ARGUMENTS_BYTES}-byte limit`));
    } finally {
      data.cleanup();
    }
  }, 40_000);

  it("never hangs the thin client on a config.json that is a FIFO, nor throws on a data dir that is a file", () => {
    const data = makeDataDir({ "animas/alice/tools/echo.ts": ECHO_TOOL });
    try {
      execFileSync("mkfifo", [join(data.dir, "config.json")]);
      writeFileSync(join(data.dir, "plain-file"), "x");
      // The built thin client in a process of its own: a blocking read would hang it (and only it).
      const script = `
        const client = require(${JSON.stringify(join(PROJECT_ROOT, "dist", "cli", "client.cjs"))});
        const io = { write() {}, readStdin: async () => "", isTerminal: () => false };
        const setup = { build: "b", install: "/i", env: { ANIMAWORKS_NO_DAEMON: "" }, cwd: "/", hostname: "h" };
        (async () => {
          for (const dir of process.argv.slice(1)) {
            const outcome = await client.runThroughHost(["--data-dir", dir, "list"], io, setup);
            console.log(JSON.stringify({ served: outcome.served, daemon: outcome.daemon !== undefined }));
          }
        })();`;
      const run = spawnSync(process.execPath, ["-e", script, data.dir, join(data.dir, "plain-file"), join(data.dir, "plain-file", "below")], {
        timeout: 15_000,
        encoding: "utf8",
      });
      expect(run.error).toBeUndefined();
      expect(run.stderr).toBe("");
      expect(
        run.stdout
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line)),
      ).toEqual([
        { served: false, daemon: true },
        { served: false, daemon: false },
        { served: false, daemon: false },
      ]);
    } finally {
      data.cleanup();
    }
  });
});
