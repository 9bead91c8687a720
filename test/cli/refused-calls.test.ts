import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { CLI_MODES, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * Issue #34 "nothing lost unseen": a call the CLI refuses before the host runs it (a tool that failed to
 * build, an unknown tool, arguments that do not parse) is still a call asked for — recorded with the tool
 * it named (or `(unknown)`) and answered with its call id, in-process and through a running host alike.
 */
describe.each(CLI_MODES)("calls refused before they run (%s)", (mode) => {
  let data: TempDataDir;
  let cli: CliRunner;
  beforeAll(async () => {
    data = makeDataDir();
    data.anima("alice");
    data.write("animas/alice/tools/halfdone.ts", "export function get_tool_schemas( { return [] }\n");
    data.write(
      "animas/alice/tools/counter.ts",
      `export function get_tool_schemas() { return [{ name: "counter_add", description: "adds", input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } }]; }
export function dispatch(name, args) { return args.n + 1; }`,
    );
    cli = await cliRunner(mode, data.dir);
  });
  afterAll(async () => {
    await cli.close();
    data.cleanup();
  });

  it("are recorded with the tool they named and answered with their call id", async () => {
    const broken = await cli.run(["--data-dir", data.dir, "--anima", "alice", "-j", "halfdone", "run"]);
    expect(broken.code).toBe(6);
    const brokenEnvelope = JSON.parse(broken.stdout) as { error_type: string; call_id: string };
    expect(brokenEnvelope).toMatchObject({ status: "error", error_type: "LoadError", call_id: expect.any(String) });
    const unknown = await cli.run(["--data-dir", data.dir, "--anima", "alice", "-j", "nosuch", "run"]);
    const unknownEnvelope = JSON.parse(unknown.stdout) as { call_id: string };
    const badFlag = await cli.run(["--data-dir", data.dir, "--anima", "alice", "-j", "counter", "add", "--n", "many"]);
    expect(badFlag.code).toBe(2);
    const badFlagEnvelope = JSON.parse(badFlag.stdout) as { call_id: string };

    await cli.host?.audit.flush(); // the running host's records are written at most 20 ms later
    const log = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
    const calls = await log.read({ kind: "call" });
    await log.close();
    const byId = (id: string) => calls.find((record) => "callId" in record && record.callId === id);
    expect(byId(brokenEnvelope.call_id)).toMatchObject({ anima: "alice", tool: "halfdone", schema: "halfdone_run", outcome: "error", errorType: "LoadError" });
    expect(byId(unknownEnvelope.call_id)).toMatchObject({ anima: "alice", tool: "(unknown)", schema: "nosuch_run", errorType: "ToolNotFound" });
    expect(byId(badFlagEnvelope.call_id)).toMatchObject({ anima: "alice", tool: "counter", schema: "counter_add", errorType: "InvalidArguments" });
  });

  it("leave help alone: asking for help is not a call", async () => {
    const help = await cli.run(["--data-dir", data.dir, "--anima", "alice", "counter", "add", "--help"]);
    expect(help.code).toBe(0);
    await cli.host?.audit.flush();
    const log = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
    const records = await log.read({ kind: "call" });
    await log.close();
    expect(records.filter((record) => record.kind === "call" && record.schema === "counter_add" && record.outcome === "ok")).toEqual([]);
    expect(records.filter((record) => record.kind === "call")).toHaveLength(3);
  });
});
