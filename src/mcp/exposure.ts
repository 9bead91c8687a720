import { ToolHostError } from "../errors.js";
import type { ToolHost, ToolInfo } from "../host-api.js";
import { findSchema } from "../registry/actions.js";

/** The key of the data dir's config.json that lists the core tools the MCP server offers. */
export const MCP_CORE_TOOLS_KEY = "animaworks_tool.mcp_core_tools";

export interface CoreToolExposure {
  /** Whether `tools/list` shows the tool (personal and shared tools always; core ones if listed). */
  exposes(tool: ToolInfo): boolean;
  /** The core tool a schema name belongs to when that tool is not offered over MCP, else undefined. */
  hiddenCoreTool(anima: string, schemaName: string): Promise<string | undefined>;
}

/**
 * Which core tools the MCP server offers, as AnimaWorks curates them for Mode S: the operator lists them
 * in the data dir's `config.json` under `animaworks_tool.mcp_core_tools` (e.g. `["text_stats"]`, or `[]`
 * for none), so that external-service tools can stay reachable through Bash only. Without the key every
 * core tool is offered (the default). A list that is not an array of core tool names stops the server
 * at start with an error naming the key.
 */
export async function coreToolExposure(host: ToolHost): Promise<CoreToolExposure> {
  // Read and checked for its form with the rest of the operator's settings (src/operator-config.ts).
  const listed = host.config.mcpCoreTools === undefined ? undefined : new Set(host.config.mcpCoreTools);
  if (listed !== undefined) {
    const core = (await host.list()).tools.filter((tool) => tool.origin === "core").map((tool) => tool.name);
    const unknown = [...listed].filter((name) => !core.includes(name));
    if (unknown.length > 0) {
      const file = host.config.operator.file;
      // The operator's file is wrong, not the caller's arguments: the operator's error (as operator-config.ts's).
      throw new ToolHostError(
        "ToolConfigError",
        `${MCP_CORE_TOOLS_KEY} in ${file} names ${unknown.map((n) => JSON.stringify(n)).join(", ")}, which ${unknown.length === 1 ? "is not a core tool" : "are not core tools"}`,
        `fix "mcp_core_tools" in the "animaworks_tool" section of ${file}; core tools: ${core.join(", ")}`,
        "host",
      );
    }
  }
  const exposes = (tool: ToolInfo): boolean => tool.origin !== "core" || listed === undefined || listed.has(tool.name);
  return {
    exposes,
    async hiddenCoreTool(anima, schemaName) {
      if (listed === undefined) return undefined;
      const tool = findSchema((await host.list(anima)).tools, schemaName)?.tool;
      return tool && !exposes(tool) ? tool.name : undefined;
    },
  };
}
