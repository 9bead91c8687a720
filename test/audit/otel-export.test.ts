import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { resolveConfig } from "../../src/config.js";
import type { LogRecord } from "../../src/host-options.js";
import { type CallResult, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor, within } from "../helpers/data-dir.js";

const PROBE_TOOL = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "probe_work", description: "writes its own file, tries another Anima's" }]; }
export async function dispatch() {
  await fs.writeFile("note.txt", "x");
  try { await fs.readFile("../bob/secret.txt"); } catch {}
  return "done";
}
`;

type OtlpValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values: OtlpValue[] } };
interface OtlpLogRecord {
  timeUnixNano: string;
  severityNumber: number;
  severityText: string;
  eventName?: string;
  body: OtlpValue;
  attributes: Array<{ key: string; value: OtlpValue }>;
}
interface ExportedRecord {
  record: OtlpLogRecord;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

const valueOf = (value: OtlpValue): unknown =>
  value.stringValue ??
  (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
  value.doubleValue ??
  value.boolValue ??
  value.arrayValue?.values.map(valueOf);
const attributeMap = (attributes: Array<{ key: string; value: OtlpValue }>) => Object.fromEntries(attributes.map(({ key, value }) => [key, valueOf(value)]));

/** An OTLP/HTTP collector on 127.0.0.1 that keeps what it is sent (JSON, as the exporter sends it). */
async function startCollector(): Promise<{ url: string; received: ExportedRecord[]; paths: string[]; apiKeys: Set<string>; stop(): Promise<void> }> {
  const received: ExportedRecord[] = [];
  const paths: string[] = [];
  const apiKeys = new Set<string>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      paths.push(`${request.method ?? ""} ${request.url ?? ""} ${request.headers["content-type"] ?? ""}`);
      apiKeys.add(String(request.headers["x-api-key"]));
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceLogs: Array<{ resource: { attributes: OtlpLogRecord["attributes"] }; scopeLogs: Array<{ logRecords: OtlpLogRecord[] }> }>;
      };
      for (const resourceLogs of body.resourceLogs) {
        const resource = attributeMap(resourceLogs.resource.attributes);
        for (const scope of resourceLogs.scopeLogs)
          for (const record of scope.logRecords) received.push({ record, attributes: attributeMap(record.attributes), resource });
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    paths,
    apiKeys,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on (it was free a moment ago, on loopback). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("audit records copied to an OpenTelemetry collector (OTLP/HTTP)", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  const dataDir = () => makeDataDir({ "animas/alice/tools/probe.ts": PROBE_TOOL, "animas/bob/.keep": "" });

  it("sends each record of a call, with its callId, every field, its time and the right severity", async () => {
    data = dataDir();
    const collector = await startCollector();
    // The collector's API key: the exporter's own standard variable (never config.json, never a record).
    vi.stubEnv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k-123");
    try {
      const logs: LogRecord[] = [];
      const host = createHost({ dataDir: data.dir, isolation: "in-process", auditOtlpEndpoint: collector.url, onLog: (record) => logs.push(record) });
      const result = await host.call("alice", "probe_work");
      expect(result).toMatchObject({ status: "ok", output: "done" });
      const callId = result.callId as string;
      const onDisk = (await host.audit.read({ anima: "alice" })).filter((record) => "callId" in record && record.callId === callId);
      await within(10_000, "the host's close", host.close());

      await waitFor(() => collector.received.filter((r) => r.attributes["animaworks.audit.callId"] === callId).length === 4, 5_000);
      // The collector gets each trail's batch as it is written (the denial's trail is the security trail):
      // put the copies in the order the trail reads them back, by time, then start, uses, end.
      const rank = (r: (typeof collector.received)[number]) => ({ call_start: 0, call: 2 })[String(r.attributes["animaworks.audit.kind"])] ?? 1;
      const exported = collector.received
        .filter((r) => r.attributes["animaworks.audit.callId"] === callId)
        .sort((a, b) => String(a.attributes["animaworks.audit.ts"]).localeCompare(String(b.attributes["animaworks.audit.ts"])) || rank(a) - rank(b));
      expect(exported.map((r) => `${String(r.attributes["animaworks.audit.kind"])}:${r.record.severityText}:${r.record.severityNumber}`)).toEqual([
        "call_start:INFO:9",
        "capability:INFO:9",
        "capability:WARN:13",
        "call:INFO:9",
      ]);
      expect(onDisk.map((record) => record.kind)).toEqual(exported.map((r) => r.attributes["animaworks.audit.kind"]));
      exported.forEach((r, i) => {
        const stored = onDisk[i] as AuditRecord;
        // Every field of the record as the trail keeps it, its place in the chain included (seq, prev).
        const { ts: _ts, ...fields } = stored;
        for (const [field, value] of Object.entries(fields)) expect(r.attributes[`animaworks.audit.${field}`], field).toEqual(value);
        expect(typeof stored.seq).toBe("number");
        expect(r.attributes["animaworks.audit.v"]).toBe(1);
        expect(r.record.eventName).toBe(`animaworks.audit.${stored.kind}`);
        expect(r.record.body.stringValue).toMatch(new RegExp(`^${stored.kind} alice/probe`));
        // The record's time is its `ts` (nanoseconds).
        expect(BigInt(r.record.timeUnixNano)).toBe(BigInt(Date.parse(r.attributes["animaworks.audit.ts"] as string)) * 1_000_000n);
        expect(r.resource["service.name"]).toBe("animaworks-tool");
      });
      expect(exported[2]?.attributes).toMatchObject({ "animaworks.audit.outcome": "denied", "animaworks.audit.target": "../bob/secret.txt" });
      expect(typeof exported[2]?.attributes["animaworks.audit.policy"]).toBe("string");
      // The host's other records went too (its policies, first seen), and all of it to the logs path, as JSON.
      expect(collector.received.some((r) => r.attributes["animaworks.audit.kind"] === "policy_change")).toBe(true);
      expect(new Set(collector.paths)).toEqual(new Set(["POST /v1/logs application/json"]));
      expect(collector.apiKeys).toEqual(new Set(["k-123"]));
      expect(logs.filter((record) => record.message.includes("OpenTelemetry"))).toEqual([]);
    } finally {
      vi.unstubAllEnvs();
      await collector.stop();
    }
  });

  it("an unreachable collector changes nothing for calls: same results, same trail, one warning, a bounded close", async () => {
    data = dataDir();
    const logs: LogRecord[] = [];
    const plain = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
    const expected = await plain.call("alice", "probe_work");
    await plain.close();

    const host = createHost({
      dataDir: data.dir,
      isolation: "in-process",
      auditOtlpEndpoint: `http://127.0.0.1:${await closedPort()}/v1/logs`,
      onLog: (record) => logs.push(record),
    });
    const results: CallResult[] = [];
    for (let i = 0; i < 3; i++) results.push(await host.call("alice", "probe_work"));
    for (const result of results)
      expect({ ...result, callId: undefined, durationMs: undefined }).toEqual({ ...expected, callId: undefined, durationMs: undefined });
    const records = await host.audit.read({ anima: "alice", kind: "call" });
    expect(records.filter((record) => "callId" in record && results.some((result) => result.callId === record.callId))).toHaveLength(3);
    await within(10_000, "the host's close", host.close());
    const warnings = logs.filter((record) => record.message.includes("OpenTelemetry collector"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: "warn", logger: "animaworks.host" });
    expect(warnings[0]?.message).toContain("the audit trail on disk has every record");
  });

  it("is an operator setting: audit_otlp_endpoint in config.json or $ANIMAWORKS_AUDIT_OTLP_ENDPOINT, checked, /v1/logs added to a bare URL", () => {
    data = makeDataDir({ "config.json": JSON.stringify({ animaworks_tool: { audit_otlp_endpoint: "http://collector.internal:4318" } }) });
    const fromFile = resolveConfig({ dataDir: data.dir, onLog: () => {} }, {});
    expect(fromFile.auditOtlpEndpoint).toBe("http://collector.internal:4318/v1/logs");
    expect(fromFile.operator.sources["audit_otlp_endpoint"]).toBe("file");
    const fromEnv = resolveConfig({ dataDir: data.dir, onLog: () => {} }, { ANIMAWORKS_AUDIT_OTLP_ENDPOINT: "https://otel.example/custom/logs" });
    expect(fromEnv.auditOtlpEndpoint).toBe("https://otel.example/custom/logs");
    const bare = makeDataDir();
    expect(resolveConfig({ dataDir: bare.dir, onLog: () => {} }, {}).auditOtlpEndpoint).toBeUndefined();
    bare.cleanup();
    expect(() => resolveConfig({ dataDir: data.dir, onLog: () => {} }, { ANIMAWORKS_AUDIT_OTLP_ENDPOINT: "ftp://x" })).toThrow(
      /must be an http:\/\/ or https:\/\/ URL/,
    );
    data.write("config.json", JSON.stringify({ animaworks_tool: { audit_otlp_endpoint: "collector:4318" } }));
    expect(() => resolveConfig({ dataDir: data.dir, onLog: () => {} }, {})).toThrow(/audit_otlp_endpoint/);
  });
});
