import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterEach, describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { formatAnimaReport } from "../../src/audit/report-text.js";
import type { AuditReader } from "../../src/host-api.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { managementOf } from "../../src/lifecycle/management.js";
import { startMcpServer } from "../../src/mcp/server.js";
import { cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir, writeUntil } from "../helpers/data-dir.js";
import { simpleTool, useTestHost } from "../helpers/tools.js";

const BROKEN = `export function get_tool_schemas() { return [{ name: "wrong", description: "x" }]; }\n`;
const ALLOW_SHARING = JSON.stringify({ tool_creation: { personal: true, shared: true } });

type Reload = Extract<AuditRecord, { kind: "reload" }>;

const refreshTools = (host: ToolHost, anima: string) => managementOf(host).refresh(anima);

async function reloads(audit: AuditReader): Promise<Reload[]> {
  return (await audit.read()).filter((record): record is Reload => record.kind === "reload");
}

/** The reload records as `change tool (origin) trigger [anima]`, for compact expectations. */
const summary = (records: Reload[]) => records.map((r) => `${r.change} ${r.tool} (${r.origin}) ${r.trigger ?? "-"}${r.anima ? ` ${r.anima}` : ""}`);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function watchingHost(data: TempDataDir): ToolHost {
  mkdirSync(join(data.dir, "core-tools"), { recursive: true });
  const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", watch: true, onLog: () => {} });
  cleanups.push(() => host.close());
  return host;
}

function tempData(files: Record<string, string> = {}): TempDataDir {
  const data = makeDataDir(files);
  cleanups.push(() => data.cleanup());
  return data;
}

describe("reload records", () => {
  it("an explicit refresh records each tool loaded, changed, removed or failed, and nothing when nothing changed", async () => {
    const h = useTestHost();
    cleanups.push(() => h.close());
    h.personal("alpha.ts", simpleTool("alpha"));
    h.shared("beta.ts", simpleTool("beta"));
    await refreshTools(h.host, "alice");
    // In the listing's order (by name).
    expect(summary(await reloads(h.host.audit))).toEqual(["loaded alpha (personal) refresh alice", "loaded beta (shared) refresh alice"]);

    await refreshTools(h.host, "alice");
    expect(await reloads(h.host.audit)).toHaveLength(2);

    h.personal("alpha.ts", simpleTool("alpha", ["run", "stop"]));
    rmSync(join(h.data.dir, "common_tools", "beta.ts"));
    h.personal("gamma.ts", simpleTool("gamma"));
    h.personal("delta.ts", BROKEN);
    await refreshTools(h.host, "alice");
    const records = await reloads(h.host.audit);
    expect(summary(records.slice(2)).sort()).toEqual([
      "changed alpha (personal) refresh alice",
      "failed delta (personal) refresh alice",
      "loaded gamma (personal) refresh alice",
      "removed beta (shared) refresh alice",
    ]);
    expect(records.find((r) => r.tool === "delta")?.message).toMatch(/wrong/);

    // Still broken the same way, everything else as it was: no new record.
    await refreshTools(h.host, "alice");
    expect(await reloads(h.host.audit)).toHaveLength(6);
  });

  it("a long-running host's folder watcher records a change once, for the Animas it concerns", async () => {
    const data = tempData({ "animas/alice/tools/alpha.ts": simpleTool("alpha"), "animas/bob/tools/.keep": "" });
    const host = watchingHost(data);
    await host.ready();
    await refreshTools(host, "alice");
    expect(summary(await reloads(host.audit))).toEqual(["loaded alpha (personal) refresh alice"]);

    await writeUntil(data, "animas/alice/tools/alpha.ts", simpleTool("alpha", ["run", "stop"]), async () => (await reloads(host.audit)).length > 1);
    expect(summary((await reloads(host.audit)).slice(1))).toEqual(["changed alpha (personal) watcher alice"]);

    // A shared tool is new to every Anima.
    await writeUntil(data, "common_tools/beta.ts", simpleTool("beta"), async () => (await reloads(host.audit)).length >= 4);
    expect(summary((await reloads(host.audit)).slice(2)).sort()).toEqual(["loaded beta (shared) watcher alice", "loaded beta (shared) watcher bob"]);

    // The refresh still reports the change to its caller, but the audit log has it already.
    const report = await refreshTools(host, "alice");
    expect(report.changed).toContain("alpha");
    expect(await reloads(host.audit)).toHaveLength(4);
  });

  it("an MCP server's watcher records changes of its Anima's tools", async () => {
    const data = tempData({ "animas/alice/tools/alpha.ts": simpleTool("alpha") });
    mkdirSync(join(data.dir, "core-tools"));
    const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", onLog: () => {} });
    cleanups.push(() => host.close());
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = await startMcpServer(host, "alice", serverSide, { startWorkers: false });
    cleanups.push(() => server.close());
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(clientSide);
    cleanups.push(() => client.close());

    await writeUntil(data, "animas/alice/tools/alpha.ts", BROKEN, async () => (await reloads(host.audit)).length > 0);
    const [record] = await reloads(host.audit);
    expect(record).toMatchObject({
      anima: "alice",
      tool: "alpha",
      origin: "personal",
      change: "failed",
      trigger: "watcher",
      message: expect.stringMatching(/wrong/),
    });
  });

  it("CLI refresh and share are recorded, and the audit report shows them (text and JSON)", async () => {
    const data = tempData({ "animas/alice/tools/alpha.ts": simpleTool("alpha"), "animas/alice/permissions.json": ALLOW_SHARING });
    const runner = await cliRunner("in-process", data.dir);
    cleanups.push(() => runner.close());
    const cli = (...argv: string[]) => runner.run(["--data-dir", data.dir, "--anima", "alice", ...argv]);

    expect((await cli("refresh")).code).toBe(0);
    const shared = await cli("share", "alpha");
    expect(shared.code, shared.stderr).toBe(0);
    expect((await cli("refresh")).code).toBe(0); // alice still sees her own alpha: nothing to record

    const audit = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
    cleanups.push(() => audit.close());
    expect(summary(await reloads(audit))).toEqual(["loaded alpha (personal) refresh alice", "loaded alpha (shared) share alice"]);

    const json = JSON.parse((await cli("audit", "--json")).stdout) as { reports: Array<{ anima: string; reloads: unknown[] }> };
    expect(json.reports[0]?.reloads).toMatchObject([
      { tool: "alpha", origin: "personal", change: "loaded", trigger: "refresh" },
      { tool: "alpha", origin: "shared", change: "loaded", trigger: "share" },
    ]);
    const text = (await cli("audit")).stdout;
    expect(text).toMatch(/reload alpha \(personal\) loaded by refresh/);
    expect(text).toMatch(/reload alpha \(shared\) loaded by share/);
  });

  it("the text report lists the last 10 reloads", () => {
    const reloads = Array.from({ length: 12 }, (_, i) => ({
      ts: `2026-01-01T00:00:${String(i).padStart(2, "0")}.000Z`,
      tool: `t${i}`,
      origin: "personal",
      change: "failed",
      trigger: "watcher",
      message: "bad",
    }));
    const report = {
      anima: "alice",
      policy: {
        source: "default",
        allowInternalHosts: [],
        fsLimits: { quotaBytes: 1, maxFiles: 1, maxReadBytes: 1, maxWriteBytes: 1 },
        allowedEnvironment: [],
        timeoutMs: 1,
        memoryLimitMb: 1,
        cordon: "anima:a",
        cordonMates: [],
      },
      tools: [],
      activity: [],
      loadErrors: [],
      reloads,
      records: 12,
      coverage: { rotatedAway: false, lostRecords: 0 },
      interrupted: [],
      inFlight: [],
      violations: [],
      refusals: [],
      leastPrivilege: {
        network: { mode: "public", grants: [], hosts: [], hostsReached: 0 },
        internalHosts: [],
        credentials: [],
        lookups: [],
        unusedGrants: [],
      },
      policyHistory: [],
      versions: [],
      timeline: [],
      timelineDropped: 0,
    } as unknown as Parameters<typeof formatAnimaReport>[0];
    const text = formatAnimaReport(report);
    expect(text).toContain("… 2 earlier reloads");
    expect(text).not.toMatch(/reload t1 /);
    expect(text).toContain("reload t11 (personal) failed: bad by watcher (2026-01-01T00:00:11.000Z)");
  });
});
