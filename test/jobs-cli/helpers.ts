import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { main } from "../../src/cli/main.js";
import { jobPaths } from "../../src/jobs/service.js";

/**
 * A personal tool with one background-eligible action (`echo`), one that is not (`quick`), one that loops
 * forever under a 1 s profile timeout (`spin`), one that waits (`sleep`, timeout 120 s) and one that
 * reports its version (`version`).
 */
export function jobsTool(version = "v1"): string {
  return `
import { setTimeout as later } from "@animaworks/tool";
export const EXECUTION_PROFILE = {
  sleep: { background_eligible: true, timeout_seconds: 120 },
  echo: { background_eligible: true, expected_seconds: 120 },
  quick: { expected_seconds: 5 },
  spin: { background_eligible: true, timeout_seconds: 1 },
};
export function get_tool_schemas() {
  return [
    { name: "bg_echo", description: "Echo text.", input_schema: { type: "object",
      properties: { text: { type: "string" }, times: { type: "integer" } }, required: ["text"] } },
    { name: "bg_quick", description: "Not long-running.", input_schema: { type: "object", properties: {} } },
    { name: "bg_spin", description: "Never ends.", input_schema: { type: "object", properties: {} } },
    { name: "bg_sleep", description: "Waits.", input_schema: { type: "object", properties: { ms: { type: "integer" } } } },
    { name: "bg_version", description: "Which version runs.", input_schema: { type: "object", properties: {} } },
  ];
}
export function dispatch(name, args) {
  if (name === "bg_echo") return (args.text + " ").repeat(args.times ?? 1).trim();
  if (name === "bg_quick") return "quick";
  if (name === "bg_spin") { for (;;) {} }
  if (name === "bg_sleep") return new Promise((resolve) => later(() => resolve("woke"), args.ms ?? 60000));
  if (name === "bg_version") return ${JSON.stringify(version)};
}
`;
}

/**
 * A tool whose one background-eligible action (`mark_run {tag, ms}`) sleeps, then writes a mark,
 * `marks/<tag>.<start>.<random>` holding `{start, end}`, in the Anima's folder: one per run that completed,
 * so a test can tell that no job ran to completion twice.
 */
export function markTool(): string {
  return `
import { fs, setTimeout as later } from "@animaworks/tool";
export const EXECUTION_PROFILE = { run: { background_eligible: true, timeout_seconds: 120 } };
export function get_tool_schemas() {
  return [{ name: "mark_run", description: "Sleeps, then marks.", input_schema: { type: "object",
    properties: { tag: { type: "string" }, ms: { type: "integer" } }, required: ["tag", "ms"] } }];
}
export async function dispatch(name, args) {
  const start = Date.now();
  await new Promise((resolve) => later(resolve, args.ms));
  await fs.mkdir("marks", { recursive: true });
  await fs.writeFile("marks/" + args.tag + "." + start + "." + Math.random().toString(36).slice(2), JSON.stringify({ start, end: Date.now() }));
  return "marked " + args.tag;
}
`;
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process against `dataDir`; `onStdout` sees each stdout write as it happens. */
export async function cli(dataDir: string, argv: string[], onStdout?: (text: string) => void): Promise<CliRun> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await main(["--data-dir", dataDir, ...argv], {
    stdout: (text) => {
      onStdout?.(text);
      stdout.push(text);
    },
    stderr: (text) => stderr.push(text),
  });
  return { code, stdout: stdout.join("\n"), stderr: stderr.join("\n") };
}

/** Rows of the job table, read straight from the database file (synchronously, as another process would). */
export function jobRows(dataDir: string): Array<{ id: string; anima: string; status: string }> {
  const path = jobPaths(dataDir).store;
  if (!existsSync(path)) return [];
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT id, anima, status FROM jobs ORDER BY seq").all() as Array<{ id: string; anima: string; status: string }>;
  } finally {
    db.close();
  }
}

/** Polls `check` until it holds; fails after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
