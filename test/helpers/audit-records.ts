import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AuditEvent, AuditLog } from "../../src/audit/audit-log.js";

/**
 * A day of audit records for many Animas, appended straight through an audit log (a `JsonlAuditLog` of a
 * throwaway data dir), for the report's tests and benchmarks/audit-html.mjs. Deterministic (a seeded
 * generator); records are stamped with simulated times spread over the period, oldest first.
 *
 * Imports types only, so that the benchmark runs it with Node's type stripping against dist/.
 */
export interface GenerateOptions {
  animas: readonly string[];
  /** Records per active Anima (about: a call is two records). */
  recordsPerAnima: number;
  /** Start of the simulated period, ms since the epoch, and its length. */
  startMs: number;
  spanMs: number;
  /** Every `idleEvery`th Anima writes nothing (0: none idle). Default: 5. */
  idleEvery?: number;
  /** A pid no process has: calls "started" there read as interrupted. Default: 4194000. */
  deadPid?: number;
  seed?: number;
}

export const GENERATED_SECRET = "xoxb-generated-secret-value";

/** The Animas' folders (permissions of three kinds, by index) and a config.json with credentials and operator grants. */
export function writeGeneratedDataDir(dataDir: string, animas: readonly string[]): void {
  writeFileSync(
    join(dataDir, "config.json"),
    JSON.stringify({
      credentials: { slack: { api_key: GENERATED_SECRET }, unused_service: { api_key: GENERATED_SECRET } },
      animaworks_tool: { allow_internal_hosts: ["10.0.0.0/8", "intranet.example"], allowed_environment: ["GENERATED_TOKEN"] },
    }),
  );
  animas.forEach((anima, index) => {
    const dir = join(dataDir, "animas", anima);
    mkdirSync(join(dir, "tools"), { recursive: true });
    const network = policyOf(index);
    writeFileSync(join(dir, "permissions.json"), JSON.stringify({ tool_creation: { personal: true, shared: false }, sandbox: { network } }));
  });
}

function policyOf(index: number): unknown {
  return index % 3 === 0 ? { allow: ["api.example.com", "*.example.org", "unused.example.com"] } : index % 3 === 1 ? "public" : "none";
}

/** Appends the records; returns how many. */
export function generateAuditRecords(log: Pick<AuditLog, "append">, options: GenerateOptions): number {
  let state = options.seed ?? 42;
  const random = () => (state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const idleEvery = options.idleEvery ?? 5;
  const events: Array<{ ms: number; event: AuditEvent }> = [];
  options.animas.forEach((anima, index) => {
    if (idleEvery > 0 && index % idleEvery === idleEvery - 1) return;
    const mode = index % 3 === 0 ? "allowlist" : index % 3 === 1 ? "public" : "none";
    let written = 0;
    let call = 0;
    while (written < options.recordsPerAnima) {
      const ms = options.startMs + Math.floor(random() * options.spanMs);
      const tool = pick(["search", "notes", "fetcher", "mailer"]);
      // A new version of each tool from the second half of the day on.
      const version = `${tool}-${ms - options.startMs > options.spanMs / 2 ? "v2" : "v1"}-${"0".repeat(52)}`;
      const callId = `${anima}-${++call}`;
      const base = { anima, tool, schema: `${tool}_run`, version };
      const roll = random();
      // About one call in 200 starts in a host that is gone: an interrupted call.
      const pid = roll < 0.005 ? (options.deadPid ?? 4_194_000) : 4_000;
      events.push({ ms, event: { kind: "call_start", callId, ...base, pid } });
      written++;
      if (pid !== 4_000) continue;
      const inner = ms + 1;
      if (tool === "fetcher") {
        const denied = mode === "none" || roll < 0.1;
        const host = mode === "public" ? pick(["api.example.com", "news.example.net", "10.1.2.3"]) : denied ? "evil.example.net" : "api.example.com";
        events.push({
          ms: inner,
          event: {
            kind: "capability",
            callId,
            anima,
            tool,
            operation: "fetch",
            target: `https://${host}/v1/items`,
            outcome: denied ? "denied" : "ok",
            ...(denied ? { reason: "SandboxViolation: not in the network policy", policy: "sha256:p1" } : {}),
          },
        });
      } else if (tool === "mailer") {
        const outcome = roll < 0.05 ? "denied" : roll < 0.1 ? "missing" : "ok";
        const name = outcome === "denied" ? `SLACK__${pick(options.animas)}x` : "slack";
        events.push({ ms: inner, event: { kind: "credential", callId, anima, tool, name, outcome, ...(outcome === "ok" ? { source: "config.json" } : {}) } });
      } else {
        events.push({ ms: inner, event: { kind: "capability", callId, anima, tool, operation: "fs.readFile", target: "notes/today.md", outcome: "ok" } });
      }
      const failed = roll > 0.97;
      events.push({
        ms: ms + 2,
        event: {
          kind: "call",
          callId,
          ...base,
          layers: ["process", "isolate"],
          durationMs: 3,
          outcome: failed ? "error" : "ok",
          ...(failed ? { errorType: pick(["Timeout", "MemoryLimit", "ExecutionError"]), errorFault: "tool" } : {}),
        },
      });
      if (roll > 0.999)
        events.push({
          ms: ms + 3,
          event: { kind: "sandbox_crash", callId, anima, tool, message: "sandbox process 4001 sent a message that is not part of the protocol" },
        });
      written += 2;
    }
    if (index % 7 === 0) {
      events.push({
        ms: options.startMs + options.spanMs / 3,
        event: { kind: "refusal", anima, command: "share_tool", target: "notes", errorType: "PermissionDenied", reason: "tool_creation.shared is false" },
      });
      events.push({
        ms: options.startMs + options.spanMs / 4,
        event: {
          kind: "policy_change",
          anima,
          scope: "permissions",
          from: "sha256:p0",
          to: "sha256:p1",
          before: '{"network":"public"}',
          after: JSON.stringify({ network: policyOf(index) }),
        },
      });
      events.push({
        ms: options.startMs + options.spanMs / 2,
        event: { kind: "reload", anima, tool: "notes", origin: "personal", change: "changed", trigger: "watcher" },
      });
    }
  });
  events.push({
    ms: options.startMs + 1,
    event: { kind: "policy_change", scope: "operator", to: "sha256:o1", after: '{"allow_internal_hosts":["10.0.0.0/8"]}' },
  });
  events.sort((a, b) => a.ms - b.ms);
  for (const { ms, event } of events) atTime(ms, () => log.append(event));
  return events.length;
}

/** Runs `work` with `new Date()` and `Date.now()` answering `ms` (an audit log stamps records with the current time). */
function atTime(ms: number, work: () => void): void {
  const RealDate = Date;
  const FakeDate = function (...args: unknown[]) {
    return args.length === 0 ? new RealDate(ms) : new RealDate(...(args as [string]));
  } as unknown as DateConstructor;
  FakeDate.now = () => ms;
  FakeDate.parse = RealDate.parse;
  FakeDate.UTC = RealDate.UTC;
  globalThis.Date = FakeDate;
  try {
    work();
  } finally {
    globalThis.Date = RealDate;
  }
}
