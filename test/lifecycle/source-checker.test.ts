import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { InlineSourceChecker, type SourceChecker, ProcessSourceChecker } from "../../src/lifecycle/source-checker.js";
import { MAX_FINDING_MESSAGE_CHARS, type SourceCheckRequest } from "../../src/lifecycle/source-checks.js";
import { runValidate, validateToolFile, validationJson } from "../../src/lifecycle/validate.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { turnsDuring } from "../helpers/event-loop.js";
import { loadValidator } from "../../src/validation/ajv.js";

/**
 * A draft crafted to cost the checks the most per byte (measured: ≈ 0.5 s for 1 MiB on this machine):
 * 15,000 literal schema objects, each judged. On a shared host's event loop, every Anima's calls waited
 * for it; an Anima could ask again and again.
 */
const COSTLY_DRAFT = `export function get_tool_schemas() { return [${"{ name: 'a', description: 'b', input_schema: { type: 'object' } },".repeat(15_000)}]; }\n`;

const GOOD = `/** Say hello. */
export function get_tool_schemas() {
  return [{ name: "greet_hello", description: "Greets someone by name, politely.", input_schema: { type: "object", properties: { who: { type: "string" } } } }];
}
export async function dispatch(name, args) { return \`Hello, \${args.who}!\`; }
`;
const LEAKY = `const key = "sk-ant-api03-${"a".repeat(90)}";\n${GOOD}`;

const CASES: Array<{ what: string; request: SourceCheckRequest; expectFindings: (findings: Array<{ check: string; line?: number; level: string }>) => void }> =
  [
    {
      what: "a secret in a draft with no load: an error at its line",
      request: { fileName: "greet.mjs", text: LEAKY },
      expectFindings: (findings) => expect(findings).toContainEqual(expect.objectContaining({ check: "secrets", level: "error", line: 1 })),
    },
    {
      what: "a load that threw: a load error beside the text's findings",
      request: { fileName: "greet.mjs", text: LEAKY, load: { threw: "no sandbox" } },
      expectFindings: (findings) => {
        expect(findings).toContainEqual(expect.objectContaining({ check: "load", level: "error" }));
        expect(findings).toContainEqual(expect.objectContaining({ check: "secrets", line: 1 }));
      },
    },
    {
      what: "a load that failed: its problem as a load finding",
      request: { fileName: "greet.mjs", text: GOOD, load: { ok: false, problems: ["dispatch threw at start"] } },
      expectFindings: (findings) => expect(findings).toContainEqual(expect.objectContaining({ check: "load", level: "error" })),
    },
    {
      what: "a Python source with a secret: an error at its line",
      request: { fileName: "greet.py", text: `KEY = "sk-ant-api03-${"b".repeat(90)}"\n` },
      expectFindings: (findings) => expect(findings).toContainEqual(expect.objectContaining({ check: "secrets", level: "error", line: 1 })),
    },
  ];

const checkers: Array<[string, () => SourceChecker]> = [
  ["InlineSourceChecker", () => new InlineSourceChecker()],
  ["ProcessSourceChecker", () => new ProcessSourceChecker()],
];

let open: SourceChecker[] = [];
afterEach(async () => {
  await Promise.all(open.map((checker) => checker.close()));
  open = [];
});
const made = <T extends SourceChecker>(checker: T): T => {
  open.push(checker);
  return checker;
};

describe.each(checkers)("SourceChecker contract: %s", (_name, make) => {
  it.each(CASES)("$what", async ({ request, expectFindings }) => {
    expectFindings(await made(make()).check(request));
  });

  it("reads a text's imports, with their lines", async () => {
    const imports = await made(make()).importsOf(`// helpers\nimport { a } from "./helper.mjs";\nconst b = require("node:path");\n`);
    expect(imports).toEqual([
      { specifier: "./helper.mjs", kind: "import", line: 2 },
      { specifier: "node:path", kind: "require", line: 3 },
    ]);
  });

  it("checks and compiles a tool's schemas (SchemaChecker): validators that hold, or the schema's problems", async () => {
    const checker = made(make());
    const schema = { type: "object", properties: { who: { type: "string" } }, required: ["who"] };
    const good = await checker.checkSchemas({
      toolName: "greet",
      schemas: [{ name: "greet_hello", description: "greets", input_schema: schema }],
      profile: undefined,
    });
    expect(good.ok).toBe(true);
    const validate = loadValidator((good.ok && good.schemas[0]?.validatorSource) || "");
    expect([validate({ who: "x" }), validate({ who: 1 })]).toEqual([true, false]);
    const bad = await checker.checkSchemas({ toolName: "greet", schemas: [{ name: "hello", description: "greets" }], profile: undefined });
    expect(bad).toEqual({ ok: false, problems: [expect.stringMatching(/greet_/)] });
  });

  it("answers checks asked at once each with its own findings, in any number", async () => {
    const checker = made(make());
    const answers = await Promise.all(
      [0, 1, 2, 3].map((i) => checker.check(i % 2 === 0 ? { fileName: "greet.mjs", text: LEAKY } : { fileName: "greet.mjs", text: GOOD })),
    );
    expect(answers.map((findings) => findings.some((f) => f.check === "secrets"))).toEqual([true, false, true, false]);
  });
});

describe("ProcessSourceChecker", () => {
  it("checks_process_abort: a defect that aborts V8 in the checks ends their process only; that check fails, the next gets a new process", async () => {
    // V8's fatal errors (a heap or size limit it cannot recover from) abort the process they happen in,
    // whatever catches: on a worker thread, that was the daemon serving every Anima.
    const checker = made(new ProcessSourceChecker({ entry: join(PROJECT_ROOT, "test", "fixtures", "checks-process", "aborting-entry.mjs") }));
    const [aborted, after] = await Promise.all([checker.check({ fileName: "crash.mjs", text: "ABORT" }), checker.check({ fileName: "greet.mjs", text: GOOD })]);
    expect(aborted).toEqual([
      expect.objectContaining({ level: "error", check: "source", message: expect.stringMatching(/failed \(their process exited with SIGABRT/) }),
    ]);
    expect(after).toEqual([]);
    expect(await checker.importsOf("import x from './y.mjs';")).toEqual([]);
  });

  it("checks_reply_flood: a reply larger than the host reads fails that check alone, its process replaced; the next is answered", async () => {
    // Node's IPC channel reads a message whole, whatever its size: the host decodes the process's frames
    // itself, each at most MAX_REPLY_FRAME_BYTES.
    const checker = made(new ProcessSourceChecker({ entry: join(PROJECT_ROOT, "test", "fixtures", "checks-process", "flooding-entry.mjs") }));
    expect(await checker.check({ fileName: "flood.mjs", text: "FLOOD" })).toEqual([
      expect.objectContaining({ check: "source", message: expect.stringMatching(/their process sent a frame of \d+ bytes, over the 16777216-byte limit/) }),
    ]);
    expect(await checker.check({ fileName: "greet.mjs", text: GOOD })).toEqual([]);
  });

  it("finding_message_flood: findings that quote a 400 KB name 101 times are bounded where they are made", async () => {
    const name = "a".repeat(400_000);
    const text = `const N = "${name}";\nexport function get_tool_schemas() { return [${Array.from({ length: 101 }, () => "{name:N}").join(",")}]; }\n`;
    const findings = await made(new ProcessSourceChecker()).check({ fileName: "evil.mjs", text });
    expect(findings.filter((f) => f.check === "source")).toEqual([]);
    expect(findings.some((f) => f.message.includes("a".repeat(500)))).toBe(true); // the name is quoted, cut
    for (const finding of findings) expect(finding.message.length).toBeLessThanOrEqual(MAX_FINDING_MESSAGE_CHARS + 40);
    expect(findings.reduce((sum, f) => sum + f.message.length, 0)).toBeLessThan(2_000_000);
  });

  it.each([
    ["fetch(", "network-timeout"],
    ["fetch(a, ", "network-timeout"],
    ["x = getCredential(", "credentials"],
    ["x=getCredential(a);x;", "credentials"],
    ["[getCredential(a),", "credentials"],
  ])("nested_call_scan: 1 MiB of nested %s is checked within the checks' time, each call judged once", async (unit, check) => {
    // Each call's end was found by walking the rest of the file (and its inside sliced and walked again), a
    // credential's holder was looked for to the end of the file from each call, and the combinator holding
    // a call walked back to from each: quadratic, 300 KB of `fetch(` held the checks for their whole 30 s,
    // and every check behind it waited.
    const text = unit.repeat(Math.floor((1024 * 1024) / unit.length));
    const findings = await made(new ProcessSourceChecker()).check({ fileName: "nested.mjs", text });
    expect(findings.filter((f) => f.check === "source")).toEqual([]);
    expect(findings.filter((f) => f.check === check).length).toBeGreaterThan(0);
  });

  it("python_repeated_return: a module-level schema list returned 8,000 times is read once", async () => {
    // Each `return S` re-read S: R × |S| work from R × 9 + |S| bytes (27 KB held the checks 5 s; 219 KB past their 30 s).
    const list = `S = [${Array.from({ length: 8_000 }, () => "{'name':'t_a'}").join(",")}]\n`;
    const text = `${list}def get_tool_schemas():\n${"    return S\n".repeat(8_000)}def t_a(x):\n    return x\n`;
    const findings = await made(new ProcessSourceChecker()).check({ fileName: "t.py", text });
    expect(findings.filter((f) => f.check === "source" && f.level === "error")).toEqual([]);
    expect(findings.some((f) => f.check === "description")).toBe(true);
  });

  it("counts a check's time from when its process is ready: a slow start is not the check's, and one past its bound is the host's", async () => {
    const slow = join(PROJECT_ROOT, "test", "fixtures", "checks-process", "slow-start-entry.mjs");
    expect(await made(new ProcessSourceChecker({ entry: slow, timeoutMs: 300 })).check({ fileName: "greet.mjs", text: GOOD })).toEqual([]);
    expect(await made(new ProcessSourceChecker({ entry: slow, startTimeoutMs: 100 })).check({ fileName: "greet.mjs", text: GOOD })).toEqual([
      expect.objectContaining({ check: "source", message: expect.stringMatching(/failed \(their process did not start within 0\.1 s\)/) }),
    ]);
    const silent = join(PROJECT_ROOT, "test", "fixtures", "checks-process", "silent-entry.mjs");
    expect(await made(new ProcessSourceChecker({ entry: silent, timeoutMs: 200 })).check({ fileName: "greet.mjs", text: GOOD })).toEqual([
      expect.objectContaining({ check: "source", message: expect.stringMatching(/did not finish within 0\.2 s/) }),
    ]);
  });

  it("sends a check again, once, to a new process when the one that had answered before died unseen", async () => {
    const checker = made(new ProcessSourceChecker({ entry: join(PROJECT_ROOT, "test", "fixtures", "checks-process", "dies-on-second-entry.mjs") }));
    expect(await checker.check({ fileName: "greet.mjs", text: GOOD })).toEqual([]);
    expect(await checker.check({ fileName: "greet.mjs", text: GOOD })).toEqual([]);
    // A text that ends every process it reaches fails after that one more try.
    const aborting = made(new ProcessSourceChecker({ entry: join(PROJECT_ROOT, "test", "fixtures", "checks-process", "aborting-entry.mjs") }));
    expect(await aborting.check({ fileName: "greet.mjs", text: GOOD })).toEqual([]);
    expect(await aborting.check({ fileName: "crash.mjs", text: "ABORT" })).toEqual([
      expect.objectContaining({ check: "source", message: expect.stringMatching(/their process exited with SIGABRT/) }),
    ]);
  });

  it("starts the checks' process with no environment, reading the host's files only and starting nothing", async () => {
    const checker = made(new ProcessSourceChecker({ entry: join(PROJECT_ROOT, "test", "fixtures", "checks-process", "probing-entry.mjs") }));
    const said = (await checker.check({ fileName: "greet.mjs", text: GOOD })).map((finding) => finding.message);
    expect(said).toEqual(["read /etc/passwd: ERR_ACCESS_DENIED", "spawn: ERR_ACCESS_DENIED", "environment: "]);
  });

  it("costly_draft_stalls_event_loop: the checks of a crafted 1 MiB draft leave the host's event loop turning (inline they hold it)", async () => {
    const request = { fileName: "costly.mjs", text: COSTLY_DRAFT };
    const inProcess = made(new ProcessSourceChecker());
    const inline = new InlineSourceChecker();
    const [processTurns, inlineTurns] = [(await turnsDuring(() => inProcess.check(request))).turns, (await turnsDuring(() => inline.check(request))).turns];
    expect(inlineTurns).toBe(0); // the measure works: a check on this thread gives it no turn
    expect(processTurns).toBeGreaterThan(10);
    expect(await inProcess.check(request)).toEqual(await inline.check(request));
  });

  it("is what validate, share and refresh use by default: validating a costly draft leaves the event loop turning", async () => {
    const dir = mkdtempSync(join(tmpdir(), "awt-costly-"));
    try {
      writeFileSync(join(dir, "costly.mjs"), COSTLY_DRAFT);
      const { result: report, turns } = await turnsDuring(() => validateToolFile(join(dir, "costly.mjs")));
      expect(report.errors).toBeGreaterThan(0);
      expect(turns).toBeGreaterThan(10);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports a check past its time as an unfinished check, and checks the next with a new process", async () => {
    const checker = made(new ProcessSourceChecker({ timeoutMs: 20 }));
    const findings = await checker.check({ fileName: "costly.mjs", text: COSTLY_DRAFT });
    expect(findings).toEqual([
      expect.objectContaining({
        level: "error",
        check: "source",
        message: expect.stringMatching(/did not finish within 0\.02 s, so the file was not checked/),
      }),
    ]);
    const relaxed = made(new ProcessSourceChecker());
    expect(await relaxed.check({ fileName: "greet.mjs", text: LEAKY })).toContainEqual(expect.objectContaining({ check: "secrets" }));
  });

  it("throws Timeout, the caller's fault, when reading a text's imports passes its time", async () => {
    const checker = made(new ProcessSourceChecker({ timeoutMs: 1 }));
    const refused = await checker.importsOf(COSTLY_DRAFT.repeat(2)).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ToolHostError);
    expect(refused).toMatchObject({
      type: "Timeout",
      fault: "caller",
      message: expect.stringMatching(/^the imports of the source could not be read: the source checks did not finish/),
    });
  });

  it("deep_literal_quadratic: a schema literal nested 10,000 deep is checked in bounded memory", async () => {
    // Every level once copied and keyed its whole path: O(depth²) memory, past 64 MB here (256 MB at 120 KB).
    const deep = `export function get_tool_schemas() { return [{ name: "deep_x", description: "Nested deeply, for a test.", input_schema: ${"{ a: ".repeat(10_000)}1${" }".repeat(10_000)} }]; }\nexport function dispatch() {}\n`;
    const findings = await made(new ProcessSourceChecker({ maxHeapMb: 64 })).check({ fileName: "deep.mjs", text: deep });
    expect(findings.filter((f) => f.check === "source")).toEqual([]);
    // Past 1,000 levels a literal is not read (as if computed); at 30 levels its depth is the finding.
    expect(findings).toContainEqual(expect.objectContaining({ check: "schemas", message: expect.stringMatching(/builds its list at run time/) }));
    const nested = `export function get_tool_schemas() { return [{ name: "deep_x", description: "Nested deeply, for a test.", input_schema: ${"{ a: ".repeat(30)}1${" }".repeat(30)} }]; }\nexport function dispatch() {}\n`;
    expect(await made(new ProcessSourceChecker()).check({ fileName: "deep.mjs", text: nested })).toContainEqual(
      expect.objectContaining({ check: "schemas", message: expect.stringMatching(/nested deeper than 24 levels/) }),
    );
  });

  it("deep_brackets_stack: brackets nested 100,000 deep are read as a computed list, never past the checks' stack", async () => {
    const checker = made(new ProcessSourceChecker());
    const deep = `export function get_tool_schemas() { return [${"[".repeat(100_000)}${"]".repeat(100_000)}]; }\n`;
    const findings = await checker.check({ fileName: "deep.mjs", text: deep });
    expect(findings.filter((f) => f.check === "source")).toEqual([]);
    expect(findings).toContainEqual(expect.objectContaining({ check: "schemas", message: expect.stringMatching(/builds its list at run time/) }));
  });

  it("lists at most 100 findings of one check, then one that counts the rest from where they start", async () => {
    const findings = await made(new ProcessSourceChecker()).check({ fileName: "many.mjs", text: "fetch(u);\n".repeat(5_000) });
    const timeouts = findings.filter((f) => f.check === "network-timeout");
    expect(timeouts).toHaveLength(101);
    expect(timeouts.slice(0, 100).map((f) => f.line)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(timeouts[100]).toMatchObject({
      level: "warning",
      line: 101,
      omitted: 4900,
      message: expect.stringMatching(/^… and 4900 more warnings of \[network-timeout\] from here on/),
    });
  });

  it("counts every problem in validate's totals, the ones left out too, and lists the count after the ones listed (one line or many)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "awt-many-"));
    try {
      for (const [file, text] of [
        ["many.mjs", "fetch(u);\n".repeat(300)],
        ["minified.mjs", "fetch(u);".repeat(300)],
      ] as const) {
        writeFileSync(join(dir, file), text);
        const outcome = await runValidate(join(dir, file));
        expect(outcome.report).toMatchObject({ warnings: 300 });
        expect(outcome.text.split("\n").at(-1)).toMatch(/: \d+ errors?, 300 warnings$/);
        const timeouts = outcome.report.findings.filter((f) => f.check === "network-timeout");
        expect(timeouts.at(-1)).toMatchObject({ omitted: 200 });
        expect(timeouts.slice(0, -1).every((f) => f.omitted === undefined)).toBe(true);
        expect(validationJson(outcome)).toMatchObject({ warnings: 300 });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps what the load said when the checks cannot finish", async () => {
    const checker = made(new ProcessSourceChecker({ timeoutMs: 1 }));
    const findings = await checker.check({ fileName: "costly.mjs", text: COSTLY_DRAFT, load: { ok: false, problems: ['import "lodash" is not allowed'] } });
    expect(findings).toEqual([
      expect.objectContaining({ check: "source", message: expect.stringMatching(/did not finish/) }),
      expect.objectContaining({ check: "load", level: "error", message: expect.stringMatching(/lodash/) }),
    ]);
    expect(await checker.check({ fileName: "costly.mjs", text: COSTLY_DRAFT, load: { threw: "the sandbox could not start" } })).toContainEqual(
      expect.objectContaining({ check: "load", message: "the tool could not be loaded: the sandbox could not start" }),
    );
  });

  it("fails a request its process cannot be sent (not plain data) alone: the checks after it go on", async () => {
    const checker = made(new ProcessSourceChecker());
    const unsendable = { fileName: "greet.mjs", text: GOOD, load: { ok: true, problems: [], schemas: [], extra: 1n } } as unknown as SourceCheckRequest;
    expect(await checker.check(unsendable)).toEqual([
      expect.objectContaining({ check: "source", message: expect.stringMatching(/could not be sent to their process/) }),
    ]);
    expect(await checker.check({ fileName: "greet.mjs", text: LEAKY })).toContainEqual(expect.objectContaining({ check: "secrets" }));
  });

  it("reports a check past its heap limit as an unfinished check, and keeps checking", async () => {
    // 32 MB: room for the process's own start and a small check (8 MB was not, on a loaded machine), and
    // far below the costly draft's four copies (past 48 MB here).
    const checker = made(new ProcessSourceChecker({ maxHeapMb: 32 }));
    const findings = await checker.check({ fileName: "costly.mjs", text: COSTLY_DRAFT.repeat(4) });
    expect(findings).toEqual([
      expect.objectContaining({ level: "error", check: "source", message: expect.stringMatching(/ran out of memory \(their limit is 32 MB\)/) }),
    ]);
    expect(await checker.check({ fileName: "greet.mjs", text: LEAKY })).toContainEqual(expect.objectContaining({ check: "secrets" }));
  });

  it("refuses a check with Busy past the checks waiting, and answers the others", async () => {
    const checker = made(new ProcessSourceChecker({ maxWaiting: 1 }));
    const running = checker.check({ fileName: "costly.mjs", text: COSTLY_DRAFT });
    const waiting = checker.check({ fileName: "greet.mjs", text: LEAKY });
    let refused: unknown;
    try {
      await checker.check({ fileName: "greet.mjs", text: GOOD });
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ToolHostError);
    expect((refused as ToolHostError).type).toBe("Busy");
    expect((refused as ToolHostError).hint).toMatch(/try again/);
    expect((await running).length).toBeGreaterThan(0);
    expect(await waiting).toContainEqual(expect.objectContaining({ check: "secrets" }));
  });

  it("checks_queue_one_anima: one Anima's many checks never hold another's back, and past its share its next is Busy", async () => {
    const checker = made(new ProcessSourceChecker({ maxWaitingPerAsker: 4 }));
    const done: string[] = [];
    const track = (name: string, asker: string, text: string) =>
      checker.check({ fileName: "t.mjs", text }, asker).then((findings) => {
        done.push(name);
        return findings;
      });
    // mallory's first runs and four wait; alice asks after them all.
    const mallory = [1, 2, 3, 4, 5].map((i) => track(`m${i}`, "mallory", COSTLY_DRAFT));
    const refused = await checker.check({ fileName: "t.mjs", text: GOOD }, "mallory").catch((error: unknown) => error);
    expect(refused).toMatchObject({ type: "Busy", message: "4 tool sources of mallory are waiting to be checked already" });
    const alice = track("alice", "alice", LEAKY);
    expect(await alice).toContainEqual(expect.objectContaining({ check: "secrets" }));
    await Promise.all(mallory);
    // In turn: mallory's running check, her next, then alice's; first come, first served would put alice last.
    expect(done.slice(0, 3)).toEqual(["m1", "m2", "alice"]);
  });

  it("answers every check waiting when closed, never leaving one unsettled", async () => {
    const checker = new ProcessSourceChecker();
    const checks = [checker.check({ fileName: "costly.mjs", text: COSTLY_DRAFT }), checker.check({ fileName: "greet.mjs", text: GOOD })];
    await checker.close();
    for (const findings of await Promise.all(checks))
      expect(findings).toEqual([expect.objectContaining({ check: "source", message: expect.stringMatching(/were stopped/) })]);
  });

  it("keeps a process alive only while a check runs: a one-shot caller exits once answered, its idle checks process kept for a minute", async () => {
    const module = join(PROJECT_ROOT, "dist", "src", "lifecycle", "source-checker.js");
    const script = `const { ProcessSourceChecker } = await import(${JSON.stringify(module)});
      const findings = await new ProcessSourceChecker({ idleMs: 60_000 }).check({ fileName: "greet.mjs", text: ${JSON.stringify(LEAKY)} });
      console.log(findings.some((f) => f.check === "secrets") ? "checked" : "unchecked");
      // A caller that closes its checker once idle waits for the process to be gone, and is kept alive for it.
      const closing = new ProcessSourceChecker();
      await closing.check({ fileName: "greet.mjs", text: "" });
      await closing.close();
      console.log("closed");`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(stdout.trim().split("\n")).toEqual(["checked", "closed"]);
    expect(code).toBe(0);
  }, 30_000);
});
