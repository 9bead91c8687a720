import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { typeCheckTools } from "../helpers/tool-typecheck.js";

/**
 * The published types (sandbox/animaworks-tool.d.ts) accept what the host accepts: a tool written as the
 * README and the tool-creator guide show it type-checks (issue #35: `output_schema` was rejected, TS2561).
 */
describe("@animaworks/tool types", () => {
  it("type-check a tool with input_schema, output_schema and the capabilities", () => {
    const dir = mkdtempSync(join(tmpdir(), "awt-types-"));
    try {
      const file = join(dir, "weather.ts");
      writeFileSync(
        file,
        `import { type ToolSchema, fetch, getCredential, progress, isCancelled } from "@animaworks/tool";
export function get_tool_schemas(): ToolSchema[] {
  return [{
    name: "weather_now",
    description: "current weather",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    output_schema: { type: "object", properties: { celsius: { type: "number" } }, required: ["celsius"] },
  }];
}
export async function dispatch(name: string, args: { city: string }): Promise<{ celsius: number }> {
  const key = await getCredential("weather", "weather");
  await progress(0.5, "asking");
  if (await isCancelled()) return { celsius: Number.NaN };
  const answer = await fetch("https://api.example.com/" + args.city + "?key=" + key, { timeoutMs: 5000 });
  return { celsius: Number(answer.status) };
}
`,
      );
      const problems = typeCheckTools([file]).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      expect(problems).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
