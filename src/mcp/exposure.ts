import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ToolHostError } from "../errors.js";
import type { ToolHost, ToolInfo } from "../host-api.js";

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
  const file = join(host.config.dataDir, "config.json");
  let text: string | undefined;
  try {
    text = await readFile(file, "utf8");
  } catch {
    // no config.json: every core tool
  }
  const listed = text === undefined ? undefined : listedCoreTools(text, file);
  if (listed !== undefined) {
    const core = (await host.list()).tools.filter((tool) => tool.origin === "core").map((tool) => tool.name);
    const unknown = [...listed].filter((name) => !core.includes(name));
    if (unknown.length > 0) {
      throw new ToolHostError("InvalidArguments", `${MCP_CORE_TOOLS_KEY} in ${file} names ${unknown.map((n) => JSON.stringify(n)).join(", ")}, which ${unknown.length === 1 ? "is not a core tool" : "are not core tools"}`, `core tools: ${core.join(", ")}`);
    }
  }
  const exposes = (tool: ToolInfo): boolean => tool.origin !== "core" || listed === undefined || listed.has(tool.name);
  return {
    exposes,
    async hiddenCoreTool(anima, schemaName) {
      if (listed === undefined) return undefined;
      const tool = (await host.list(anima)).tools.find((t) => t.schemas.some((s) => s.name === schemaName));
      return tool && !exposes(tool) ? tool.name : undefined;
    },
  };
}

function listedCoreTools(text: string, file: string): Set<string> | undefined {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new ToolHostError("InvalidArguments", `${file} is not valid JSON: ${(error as Error).message}`, "fix the file (AnimaWorks refuses it too)");
  }
  const section = typeof config === "object" && config !== null ? (config as Record<string, unknown>)["animaworks_tool"] : undefined;
  if (section === undefined) return undefined;
  const value = typeof section === "object" && section !== null && !Array.isArray(section) ? (section as Record<string, unknown>)["mcp_core_tools"] : section;
  if (value === undefined && typeof section === "object" && section !== null && !Array.isArray(section)) return undefined;
  if (!Array.isArray(value) || !value.every((name) => typeof name === "string")) {
    throw new ToolHostError("InvalidArguments", `${MCP_CORE_TOOLS_KEY} in ${file} must be a list of core tool names`, 'e.g. "animaworks_tool": { "mcp_core_tools": ["text_stats", "file_search"] }');
  }
  return new Set(value as string[]);
}
