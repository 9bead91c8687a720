/**
 * The personal tool `notes` of the CLI's tests (main.test.ts, launcher.test.ts): typed parameters,
 * positional required strings, a tool that raises and one whose output is truncated.
 */
export const NOTES_TOOL = `
import { ToolError } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "notes_add", description: "Add a note.\\nSecond line.", input_schema: { type: "object",
      properties: { title: { type: "string", description: "Title" }, body: { type: "string" }, tags: { type: "array", items: { type: "string" } },
        priority: { type: "integer", default: 1 }, pinned: { type: "boolean" } }, required: ["title", "body"] } },
    { name: "notes_fail", description: "Always fails.", parameters: { type: "object", properties: {} } },
    { name: "notes_big", description: "Large output." },
  ];
}
export function dispatch(name, args) {
  if (name === "notes_add") { const { anima_dir, ...rest } = args; return { saved: rest, anima: anima_dir.split("/").pop() }; }
  if (name === "notes_fail") throw new ToolError("disk is full");
  if (name === "notes_big") return "é".repeat(40000);
}
`;
