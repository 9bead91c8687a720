import { secretRedactor } from "../credentials/index.js";
import { type AuditEvent, type AuditLog, ForwardingAuditLog } from "./audit-log.js";

/**
 * The audit log as the host appends to it: every string of a record that names an Anima has the secret
 * values that Anima's tools obtained redacted, as its log lines have (composition.ts ToolLogRouter). A
 * tool chooses much of what a record holds (the URL it fetched, the path it asked for, the reason a
 * request was refused): a tool that put a credential in a denied URL had it written into the trail, shown
 * by `audit` and copied to the operator's collector. Redacted before the trail cuts long fields, so that
 * a cut never leaves a secret's first part in place.
 */
export class RedactingAuditLog extends ForwardingAuditLog {
  constructor(
    trail: AuditLog,
    /** The secret values handed to an Anima's tools so far (capabilities/service.ts `secretsOf`). */
    private readonly secretsOf: (anima: string) => readonly string[],
  ) {
    super(trail);
  }

  override append(event: AuditEvent): void {
    const anima = (event as { anima?: unknown }).anima;
    const secrets = typeof anima === "string" ? this.secretsOf(anima) : [];
    this.inner.append(secrets.length === 0 ? event : (redacted(event, secretRedactor(secrets)) as AuditEvent));
  }
}

/** `value` with every string in it (object values, list items, at any depth) redacted. */
function redacted(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === "string") return redact(value);
  if (Array.isArray(value)) return value.map((item) => redacted(item, redact));
  if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, redacted(item, redact)]));
  return value;
}
