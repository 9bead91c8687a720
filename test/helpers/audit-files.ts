import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Every trail file of an audit folder (src/audit/jsonl-audit-log.ts), current and rotated, as one text. */
export function auditText(auditDir: string): string {
  const files: string[] = [];
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (/\.jsonl(\.\d+)?$/.test(entry.name)) files.push(join(dir, entry.name));
    }
  };
  walk(auditDir);
  return files.map((file) => readFileSync(file, "utf8")).join("");
}

/** Every record line of an audit folder, parsed (in no particular order across trails). */
export function auditRecords(auditDir: string): Array<Record<string, unknown>> {
  return auditText(auditDir)
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}
