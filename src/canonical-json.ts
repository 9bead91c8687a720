/**
 * JSON text with object keys sorted at every level (UTF-16 code unit order), so that equal values always
 * give the same text: a job's arguments for its idempotency key (jobs/service.ts), a policy for its hash
 * (audit/policy-ledger.ts). Undefined object members are left out and undefined array items become null,
 * as JSON.stringify does. Keys are written as text, so a "__proto__" key stays a plain key.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? "null" : canonicalJson(item))).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}
