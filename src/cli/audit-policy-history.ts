import { join } from "node:path";
import type { AuditRecord } from "../audit/audit-log.js";
import { operatorPolicyJson, permissionsPolicyJson, policyHash } from "../audit/policy-ledger.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host-api.js";
import type { Output } from "./output.js";

export const AUDIT_POLICY_HISTORY_USAGE = `Usage: animaworks-tool audit policy-history [--anima NAME] [--json]
  Every recorded change of the operator's settings and of each Anima's permissions, oldest first:
  when, whose, the policy hash from → to, and the keys that changed. With --anima: that Anima's and the
  operator's (which hold for every Anima).`;

type PolicyChange = Extract<AuditRecord, { kind: "policy_change" }>;

/** One key of a policy (a dotted path) whose value differs; values as JSON text, absent when unset. */
export interface KeyChange {
  key: string;
  before?: string;
  after?: string;
}

export interface PolicyHistoryEntry {
  ts: string;
  seq?: number;
  /** The Anima, or "operator" for the operator's settings (`scope` tells which). */
  who: string;
  scope: "permissions" | "operator";
  from?: string;
  to: string;
  changedAt?: string;
  changes: KeyChange[];
  /** The policy text of a record was cut (it is bounded), so its keys could not all be compared: compare the hashes. */
  cut?: boolean;
}

/** A policy in force now that differs from the last one recorded (a change is recorded when a host notices it). */
export interface PendingChange {
  who: string;
  scope: "permissions" | "operator";
  from?: string;
  to: string;
  changes: KeyChange[];
  cut?: boolean;
}

/**
 * `animaworks-tool audit policy-history`: the `policy_change` records (policy-ledger.ts) as a history of
 * who was allowed what. The records hold each policy's JSON text, so the keys that changed are shown,
 * not only the hashes a denial's `policy` field names. It records nothing itself: a policy in force that
 * no host has noticed yet is listed apart, as not yet recorded.
 */
export async function runAuditPolicyHistory(host: ToolHost, argv: string[], anima: string | undefined, json: boolean, out: Output): Promise<number> {
  const unexpected = argv.find((arg) => arg !== "--json" && arg !== "-j");
  if (unexpected !== undefined)
    throw new ToolHostError("InvalidArguments", `audit policy-history: unexpected argument "${unexpected}"`, AUDIT_POLICY_HISTORY_USAGE);
  const records = (await host.audit.read({ kind: "policy_change" })).filter(
    (record): record is PolicyChange => record.kind === "policy_change" && (anima === undefined || record.anima === anima || record.scope === "operator"),
  );
  const history = records.map(entryOf);
  const pending = await pendingChanges(host, anima, records);
  if (json) out.stdout(JSON.stringify({ status: "ok", history, pending }, null, 2));
  else out.stdout(formatHistory(history, pending, anima));
  return 0;
}

function entryOf(record: PolicyChange): PolicyHistoryEntry {
  const diff = diffPolicies(record.before, record.after);
  return {
    ts: record.ts,
    ...(record.seq !== undefined ? { seq: record.seq } : {}),
    who: whoOf(record),
    scope: record.scope,
    ...(record.from !== undefined ? { from: record.from } : {}),
    to: record.to,
    ...(record.changedAt !== undefined ? { changedAt: record.changedAt } : {}),
    changes: diff.changes,
    ...(diff.cut ? { cut: true } : {}),
  };
}

/** The policies in force now (the operator's; each Anima's concerned) that differ from the last recorded. */
async function pendingChanges(host: ToolHost, anima: string | undefined, records: PolicyChange[]): Promise<PendingChange[]> {
  // Keyed by scope too: an Anima may be called "operator".
  const keyOf = (scope: string, who: string) => `${scope}:${who}`;
  const last = new Map<string, { to: string; after: string }>();
  for (const record of records) last.set(keyOf(record.scope, whoOf(record)), { to: record.to, after: record.after });
  const current: Array<{ who: string; scope: "permissions" | "operator"; json: string }> = [
    { who: "operator", scope: "operator", json: operatorPolicyJson(host.config) },
  ];
  for (const name of await host.animas()) {
    if (anima === undefined || name === anima)
      current.push({ who: name, scope: "permissions", json: permissionsPolicyJson(join(host.config.dataDir, "animas", name)) });
  }
  const pending: PendingChange[] = [];
  for (const { who, scope, json } of current) {
    const to = policyHash(json);
    const seen = last.get(keyOf(scope, who));
    if (seen?.to === to) continue;
    const diff = diffPolicies(seen?.after, json);
    pending.push({ who, scope, ...(seen ? { from: seen.to } : {}), to, changes: diff.changes, ...(diff.cut ? { cut: true } : {}) });
  }
  return pending;
}

function whoOf(record: PolicyChange): string {
  return record.scope === "operator" ? "operator" : (record.anima ?? "(unknown)");
}

/** The keys (dotted paths; arrays are values) whose values differ between two policies' JSON texts. */
export function diffPolicies(before: string | undefined, after: string): { changes: KeyChange[]; cut: boolean } {
  const old = before === undefined ? new Map<string, string>() : flatten(before);
  const now = flatten(after);
  if (old === undefined || now === undefined) return { changes: [], cut: true };
  const keys = [...new Set([...old.keys(), ...now.keys()])].sort();
  const changes: KeyChange[] = [];
  for (const key of keys) {
    const [was, is] = [old.get(key), now.get(key)];
    if (was === is) continue;
    changes.push({ key, ...(was !== undefined ? { before: was } : {}), ...(is !== undefined ? { after: is } : {}) });
  }
  return { changes, cut: false };
}

/** Leaf values by dotted path, as JSON text; undefined when the text is not JSON (a cut policy). */
function flatten(text: string): Map<string, string> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const leaves = new Map<string, string>();
  const walk = (node: unknown, path: string): void => {
    if (typeof node === "object" && node !== null && !Array.isArray(node) && Object.keys(node).length > 0) {
      for (const [key, child] of Object.entries(node)) walk(child, path === "" ? key : `${path}.${key}`);
    } else {
      leaves.set(path === "" ? "(policy)" : path, JSON.stringify(node));
    }
  };
  walk(value, "");
  return leaves;
}

/** "operator settings" or "Anima alice": unambiguous although an Anima may be called "operator". */
function label(entry: { who: string; scope: "permissions" | "operator" }): string {
  return entry.scope === "operator" ? "operator settings" : `Anima ${entry.who}`;
}

function formatHistory(history: PolicyHistoryEntry[], pending: PendingChange[], anima: string | undefined): string {
  const lines: string[] = [];
  const changeLines = (changes: KeyChange[], cut: boolean | undefined, firstSeen: boolean): string[] => {
    if (cut) return ["    (a policy's text was cut at its bound: compare the hashes)"];
    if (changes.length === 0) return ["    (no key changed)"];
    return changes.map((change) =>
      firstSeen ? `    ${change.key}: ${change.after ?? "(unset)"}` : `    ${change.key}: ${change.before ?? "(unset)"} → ${change.after ?? "(unset)"}`,
    );
  };
  const scope = anima === undefined ? "every Anima and the operator" : `${anima} and the operator`;
  if (history.length === 0) lines.push(`No policy changes recorded (${scope}).`);
  else lines.push(`Policy history of ${scope}, oldest first (a change is recorded when a host notices it):`);
  for (const entry of history) {
    const when = entry.changedAt !== undefined ? `  (file changed ${entry.changedAt})` : "";
    lines.push(`${entry.ts}  ${label(entry)}  ${entry.from ?? "(first seen)"} → ${entry.to}${when}`);
    lines.push(...changeLines(entry.changes, entry.cut, entry.from === undefined));
  }
  if (pending.length > 0) {
    lines.push("", "In force now but not yet recorded (recorded when a host next serves the Anima, or starts, for the operator's):");
    for (const entry of pending) {
      lines.push(`${label(entry)}  ${entry.from ?? "(first seen)"} → ${entry.to}`);
      lines.push(...changeLines(entry.changes, entry.cut, entry.from === undefined));
    }
  }
  return lines.join("\n");
}
