import { ToolHostError } from "../errors.js";

/**
 * Finding a tool's action by name, and what to say when there is none: one lookup for the host (by
 * schema name), the CLI (by action name, `<tool> <action>` and `submit`) and the MCP server (a schema
 * among the tools it offers).
 */
export interface ActionSchema {
  /** `{tool}_{action}` */
  name: string;
  action: string;
}

export interface ToolActions<S extends ActionSchema = ActionSchema> {
  name: string;
  schemas: readonly S[];
}

/** `actions: a, b` — the hint of every "no such action" error. */
export function actionsHint(tool: ToolActions): string {
  return tool.schemas.length > 0 ? `actions: ${tool.schemas.map((s) => s.action).join(", ")}` : "this tool has no actions";
}

/** The schema of `tool`'s action `action`; `ToolNotFound`, naming the actions there are, when it has none. */
export function actionOf<S extends ActionSchema>(tool: ToolActions<S>, action: string): S {
  const schema = tool.schemas.find((s) => s.action === action);
  if (!schema) throw noSuchAction(tool, action);
  return schema;
}

/** The schema named `schemaName` (`{tool}_{action}`) of `tool`; `ToolNotFound` as `actionOf` when it has none. */
export function schemaOf<S extends ActionSchema>(tool: ToolActions<S>, schemaName: string): S {
  const schema = tool.schemas.find((s) => s.name === schemaName);
  if (!schema) throw noSuchAction(tool, schemaName.slice(tool.name.length + 1));
  return schema;
}

/** The tool among `tools` that has a schema named `schemaName`, with that schema; undefined when none has. */
export function findSchema<T extends ToolActions>(tools: readonly T[], schemaName: string): { tool: T; schema: T["schemas"][number] } | undefined {
  for (const tool of tools) {
    const schema = tool.schemas.find((s) => s.name === schemaName);
    if (schema) return { tool, schema };
  }
  return undefined;
}

function noSuchAction(tool: ToolActions, action: string): ToolHostError {
  return new ToolHostError("ToolNotFound", `tool "${tool.name}" has no action "${action}"`, actionsHint(tool));
}
