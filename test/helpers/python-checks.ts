import { type Finding, validateSource } from "../../src/lifecycle/validate.js";

export { template } from "./python-templates.js";

export const brief = (findings: Finding[]): string[] => findings.map((f) => `${f.level} ${f.check}${f.line !== undefined ? `:${f.line}` : ""}`);
export const check = (source: string, file = "my_tool.py", name?: string): Finding[] =>
  validateSource(file, source, { staticSchemas: true, ...(name !== undefined ? { name } : {}) });
export const only = (findings: Finding[], name: Finding["check"]): Finding[] => findings.filter((f) => f.check === name);
/** `lines` with each numbered line (1-based) replaced; a replacement may be several lines, or none (""). */
export const edit = (lines: string[], changes: Record<number, string>): string =>
  lines
    .flatMap((line, index) => {
      const change = changes[index + 1];
      return change === undefined ? [line] : change === "" ? [] : change.split("\n");
    })
    .join("\n");
/** Lines 6-11 of GOOD (the list's entries) removed, for a get_tool_schemas() that returns something else. */
export const WITHOUT_LIST = { 6: "", 7: "", 8: "", 9: "", 10: "", 11: "" };

/** A small tool in the templates' form; the tests below break one rule of it at a time. */
export const GOOD = [
  "from __future__ import annotations", // 1
  "", // 2
  "", // 3
  "def get_tool_schemas() -> list[dict]:", // 4
  "    return [", // 5
  "        {", // 6
  '            "name": "my_tool_run",', // 7
  '            "description": "Runs it.",', // 8
  '            "input_schema": {"type": "object", "properties": {}},', // 9
  "        },", // 10
  "    ]", // 11
  "", // 12
  "", // 13
  "def dispatch(name: str, args: dict) -> dict:", // 14
  '    args.pop("anima_dir", None)', // 15
  '    return {"ran": name}', // 16
  "",
];
