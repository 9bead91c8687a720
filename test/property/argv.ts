import fc from "fast-check";
import { expect } from "vitest";
import { jsonRequested } from "../../src/cli/invocation.js";
import { ERROR_TYPES, EXIT_CODES, type ErrorType } from "../../src/errors.js";
import type { CliRun } from "../helpers/cli-modes.js";
import { STACK_TRACE } from "./settings.js";

/**
 * Command lines as people and scripts get them wrong: the CLI's options anywhere, with and without values,
 * commands and tool names real and not, files that are FIFOs, devices, missing or not directories, JSON
 * good and bad, and arbitrary text. Left out: what runs until stopped by design (`serve`, `mcp`,
 * `daemon`), `submit` (it starts a background worker) and `--demo` (it writes into the repository's demo
 * data dir).
 */
export interface ArgvPlaces {
  dataDir: string;
  fifo: string;
  regularFile: string;
  missing: string;
}

export function argvArbitrary(places: ArgvPlaces): fc.Arbitrary<string[]> {
  const token = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        "-j",
        "--json",
        "-h",
        "--help",
        "--version",
        "--no-daemon",
        "--",
        "-",
        "--anima",
        "--data-dir",
        "--args-json",
        "--args-file",
        "--os-sandbox",
        "--jobs-url",
      ),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        "--anima=alice",
        "--anima=",
        "--data-dir=",
        "--args-file=-",
        "--text",
        "--text=",
        "--no-text",
        "--limit",
        "-x",
        "--nope",
        "--json=1",
      ),
    },
    { weight: 3, arbitrary: fc.constantFrom("list", "describe", "refresh", "share", "validate", "jobs", "help", "audit", "show", "cancel", "result", "wait") },
    { weight: 4, arbitrary: fc.constantFrom("echo", "say", "ghost", "alice", "bob", "a3 ") },
    { weight: 2, arbitrary: fc.constantFrom(places.dataDir, places.fifo, places.regularFile, places.missing, "/dev/zero", "/dev/null", "", ".", "/", "~") },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '{"text":"a"}',
        "{",
        "[]",
        "null",
        "5",
        '{"text":5}',
        "auto",
        "required",
        "off",
        "postgres://nobody@127.0.0.1:1/none",
        "http://x",
      ),
    },
    { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
  );
  return fc.array(token, { maxLength: 8 });
}

/** Nearly right calls of the test's tool (`echo say`), with their flags, values and files garbled. */
export function toolCallArbitrary(places: ArgvPlaces): fc.Arbitrary<string[]> {
  const value = fc.oneof(fc.constantFrom("hi", "", "5", '{"text":"a"}', "{", places.fifo, places.regularFile, "/dev/zero", "-"), fc.string({ maxLength: 10 }));
  const flag = fc.oneof(
    fc
      .tuple(fc.constantFrom("--text", "--limit", "--args-json", "--args-file", "--text=x", "-j", "--json", "--help", "--no-text", "--"), value)
      .map(([name, v]) => (name.includes("=") || name.startsWith("-j") || name === "--json" || name === "--help" ? [name] : [name, v])),
    value.map((v) => [v]),
  );
  return fc
    .tuple(
      fc.constantFrom("echo", "ghost", "list", "describe", "validate", "jobs"),
      fc.constantFrom("say", "x", "list", places.regularFile),
      fc.array(flag, { maxLength: 4 }),
    )
    .map(([tool, action, flags]) => [tool, action, ...flags.flat()]);
}

/** The argv a test runs: `--data-dir` first (it may be given again later), and an Anima most of the time. */
export function withPlace(places: ArgvPlaces): fc.Arbitrary<string[]> {
  return fc
    .tuple(fc.boolean(), fc.oneof(argvArbitrary(places), toolCallArbitrary(places)))
    .map(([anima, rest]) => ["--data-dir", places.dataDir, ...(anima ? ["--anima", "alice"] : []), ...rest]);
}

const ERROR_LINE = /^Error \(([A-Za-z]+)\): /;

/**
 * What every invocation must do, whatever its argv: a documented exit code; no stack trace; each error
 * a single line of a known type whose exit code matches; and with `-j` anywhere, errors only as the JSON
 * envelope on stdout.
 */
export function expectDocumentedOutcome(argv: readonly string[], run: CliRun): void {
  const context = `argv ${JSON.stringify(argv)} → exit ${run.code}\nstdout: ${run.stdout.slice(0, 2_000)}\nstderr: ${run.stderr.slice(0, 2_000)}`;
  expect(run.code, context).toBeGreaterThanOrEqual(0);
  expect(run.code, context).toBeLessThanOrEqual(6);
  expect(`${run.stdout}\n${run.stderr}`, context).not.toMatch(STACK_TRACE);
  const errorLines = run.stderr.split("\n").filter((line) => ERROR_LINE.test(line));
  for (const line of errorLines) {
    const type = ERROR_LINE.exec(line)?.[1] as ErrorType;
    expect(ERROR_TYPES, context).toContain(type);
  }
  if (errorLines.length > 0) expect(run.code, context).toBe(EXIT_CODES[ERROR_LINE.exec(errorLines[0] as string)?.[1] as ErrorType]);
  const json = jsonRequested(argv);
  if (json) expect(errorLines, context).toEqual([]);
  for (const line of run.stdout.split("\n")) {
    // The error envelope (validate --json has a report of its own, with "status" too).
    if (!line.startsWith('{"status":"error","error_type"')) continue;
    const envelope = JSON.parse(line) as { error_type: ErrorType; message: unknown; fault: unknown };
    expect(ERROR_TYPES, context).toContain(envelope.error_type);
    expect(typeof envelope.message, context).toBe("string");
    expect(["tool", "caller", "host"], context).toContain(envelope.fault);
    expect(run.code, context).toBe(EXIT_CODES[envelope.error_type]);
  }
}
