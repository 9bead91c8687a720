import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { managementOf } from "../../src/lifecycle/management.js";
import { type TestHost, useTestHost } from "../helpers/tools.js";

/**
 * Issue #34's "trace one call end to end": every record a call causes carries its callId, which the caller
 * gets back; call records name the real tool, its version and the isolation layers; a start is written
 * before the call runs; denials name what was refused and the policy in force; refusals are recorded.
 */

const TOOL = `
import { fs, getCredential } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "probe_touch", description: "writes a file, then reads outside the folder", input_schema: { type: "object", properties: {} } },
    { name: "probe_secret", description: "asks for a credential", input_schema: { type: "object", properties: { name: { type: "string" }, env: { type: "string" } }, required: ["name"] } },
    { name: "probe_wait", description: "waits until told", input_schema: { type: "object", properties: {} } },
  ];
}
export async function dispatch(name, args) {
  if (name === "probe_touch") {
    await fs.writeFile("note.txt", "x");
    try { await fs.readFile("../bob/secret.txt"); } catch (error) { return "refused"; }
    return "read";
  }
  if (name === "probe_secret") {
    try { return await getCredential(args.name, "probe", args.env ? { envVar: args.env } : {}); } catch (error) { return "no:" + error.message.slice(0, 20); }
  }
  if (name === "probe_wait") {
    while (!(await fs.exists("go.txt"))) await new Promise((resolve) => setTimeout(resolve, 5));
    return "went";
  }
}
`;

let t: TestHost;
beforeEach(() => {
  t = useTestHost();
  t.data.anima("bob");
  t.data.write("animas/bob/secret.txt", "bob's");
  t.personal("probe.ts", TOOL);
});
afterEach(() => t.close());

async function recordsOf(callId: string | undefined): Promise<AuditRecord[]> {
  expect(callId).toMatch(/^[0-9a-z-]+$/);
  return (await t.host.audit.read()).filter((record) => "callId" in record && record.callId === callId);
}

describe("call records", () => {
  it("tie a call's start, capability uses, denial and end together by the callId the caller gets back", async () => {
    const result = await t.host.call("alice", "probe_touch", {});
    expect(result).toMatchObject({ status: "ok", output: "refused" });
    const records = await recordsOf(result.callId);
    expect(records.map((r) => `${r.kind}:${"operation" in r ? r.operation : ""}:${"outcome" in r ? r.outcome : ""}`)).toEqual([
      "call_start::",
      "capability:fs.writeFile:ok",
      "capability:fs.readFile:denied",
      "call::ok",
    ]);
    const [start, , denial, end] = records;
    const version = (await t.host.list("alice")).tools.find((tool) => tool.name === "probe")?.bundleHash;
    expect(start).toMatchObject({ anima: "alice", tool: "probe", schema: "probe_touch", version, pid: process.pid });
    expect(end).toMatchObject({ anima: "alice", tool: "probe", schema: "probe_touch", version, layers: ["isolate"] });
    // The denial carries the policy in force: <permissions hash>.<operator hash>, the `to` of the changes that set them.
    const changes = await t.host.audit.read({ kind: "policy_change" });
    const permissions = changes.filter((r) => r.kind === "policy_change" && r.anima === "alice").at(-1);
    const operator = changes.filter((r) => r.kind === "policy_change" && r.anima === undefined).at(-1);
    expect(denial).toMatchObject({ policy: `${(permissions as { to: string }).to}.${(operator as { to: string }).to}` });
  });

  it("name the tool a refused call asked for, or (unknown), never a piece of the action's name", async () => {
    const unknown = await t.host.call("alice", "text_stats", {});
    expect(unknown).toMatchObject({ status: "error", error_type: "ToolNotFound" });
    expect(await recordsOf(unknown.callId)).toMatchObject([{ kind: "call", tool: "(unknown)", schema: "text_stats", outcome: "error" }]);
    const invalid = await t.host.call("alice", "probe_secret", { name: 42 });
    expect(invalid).toMatchObject({ status: "error", error_type: "InvalidArguments" });
    expect(await recordsOf(invalid.callId)).toMatchObject([{ kind: "call", tool: "probe", schema: "probe_secret", errorType: "InvalidArguments" }]);
  });

  it("write the start before the call ends: a call in flight shows as started, not yet ended", async () => {
    const running = t.host.call("alice", "probe_wait", {});
    let start: AuditRecord | undefined;
    for (let i = 0; i < 500 && !start; i++) {
      start = (await t.host.audit.read({ kind: "call_start" })).find((r) => r.kind === "call_start" && r.schema === "probe_wait");
      if (!start) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(start).toBeDefined();
    const callId = (start as { callId: string }).callId;
    expect((await t.host.audit.read({ kind: "call" })).some((r) => "callId" in r && r.callId === callId)).toBe(false);
    t.data.write("animas/alice/go.txt", "");
    const result = await running;
    expect(result.callId).toBe(callId);
    expect((await recordsOf(callId)).at(-1)).toMatchObject({ kind: "call", outcome: "ok" });
  });

  it("name the refused credential, and record a variable outside allowed_environment as a denial", async () => {
    const other = await t.host.call("alice", "probe_secret", { name: "API_KEY__bob" });
    expect(other).toMatchObject({ status: "ok", output: expect.stringMatching(/^no:/) });
    expect((await recordsOf(other.callId)).find((r) => r.kind === "credential")).toMatchObject({ name: "API_KEY__bob", outcome: "denied" });
    const variable = await t.host.call("alice", "probe_secret", { name: "weather", env: "HOME" });
    expect((await recordsOf(variable.callId)).find((r) => r.kind === "credential")).toMatchObject({
      name: "HOME",
      outcome: "denied",
      reason: "not in allowed_environment",
    });
  });

  it("record a change of an Anima's permissions, old → new, and a refused share", async () => {
    await t.host.call("alice", "probe_touch", {});
    t.data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: true, shared: false }, sandbox: { network: "none" } }));
    t.host.refresh();
    await t.host.call("alice", "probe_touch", {});
    const changes = (await t.host.audit.read({ kind: "policy_change", anima: "alice" })) as Array<AuditRecord & { from?: string; to: string; after: string }>;
    expect(changes).toHaveLength(2);
    expect(changes[1]!.from).toBe(changes[0]!.to);
    expect(JSON.parse(changes[1]!.after)).toMatchObject({ source: "permissions.json", sandbox: { network: { mode: "none" } } });
    // Changed again with no refresh: the next denial carries the policy in force then, and the change is recorded.
    t.data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: true, shared: false }, sandbox: { network: "public" } }));
    const denied = await t.host.call("alice", "probe_touch", {});
    let latest: (AuditRecord & { to: string; from?: string }) | undefined;
    for (let i = 0; i < 500 && latest?.from !== changes[1]!.to; i++) {
      latest = (await t.host.audit.read({ kind: "policy_change", anima: "alice" })).at(-1) as AuditRecord & { to: string; from?: string };
      if (latest.from !== changes[1]!.to) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const denial = (await recordsOf(denied.callId)).find((r) => r.kind === "capability" && r.outcome === "denied") as { policy: string };
    expect(denial.policy.split(".")[0]).toBe(latest!.to);
    await expect(managementOf(t.host).share("alice", "probe")).rejects.toThrow();
    expect(await t.host.audit.read({ kind: "refusal" })).toMatchObject([
      { kind: "refusal", anima: "alice", command: "share_tool", target: "probe", errorType: "PermissionDenied" },
    ]);
  });
});
