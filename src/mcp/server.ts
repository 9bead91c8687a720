import { join } from "node:path";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { FsCapability } from "../capabilities/fs.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host.js";
import { refreshTools, formatRefresh } from "../cli/lifecycle.js";
import { errorsForShare, hostLoader, shareTool, writeMemoryFile } from "../lifecycle/index.js";
import { JobService } from "../jobs/service.js";
import { watchToolFolders } from "../registry/watcher.js";
import { coreToolExposure } from "./exposure.js";
import { JobTaskStore, TASK_POLL_INTERVAL_MS } from "./job-tasks.js";
import { TaskStatusWatch, startWorker } from "./task-watch.js";
import { jobTools } from "./job-tools.js";
import type { ManagementTool } from "./management-tool.js";

/**
 * `animaworks-tool mcp --anima NAME`: the Anima's tools, the seed's management tools and the background
 * job tools (submit_job, list_jobs, job_status, job_result, cancel_job) over MCP.
 *
 * Invariants:
 *  - The Anima is fixed when the server starts (its launch arguments); no request can change it.
 *  - Tool failures are results with `isError`, never protocol errors (as the MCP SDK intends).
 *  - When the set of tools changes (a reload), clients get `notifications/tools/list_changed`.
 */
export interface McpServerHandle {
  server: Server;
  close(): Promise<void>;
}

export interface McpServerOptions {
  /** Reload tools when their files change, and tell the client. Default: true. */
  watch?: boolean;
  /** The background jobs behind the job tools. Default: a JobService on the host's data dir, closed with the server. */
  jobs?: JobService;
  /** `submit_job` starts a detached worker when none runs (as the CLI's submit does). Default: true. */
  startWorkers?: boolean;
}

export async function startMcpServer(host: ToolHost, anima: string, transport: Transport, options: McpServerOptions = {}): Promise<McpServerHandle> {
  const animaDir = join(host.config.dataDir, "animas", anima);
  await host.list(anima); // fails now, with a clear error, if the Anima does not exist
  const jobs = options.jobs ?? new JobService({ host });
  const startWorkers = options.startWorkers ?? true;
  const taskWatch = new TaskStatusWatch(jobs, anima, (task) => server.notification({ method: "notifications/tasks/status", params: task }));
  const taskStore = new JobTaskStore(jobs, anima, (job) => {
    if (startWorkers) startWorker(jobs);
    taskWatch.add(job);
  });
  const server = new Server(
    { name: "animaworks-tool", version: "0.1.0" },
    {
      capabilities: { tools: { listChanged: true }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      defaultTaskPollInterval: TASK_POLL_INTERVAL_MS,
    },
  );
  let knownNames = await toolNames(host, anima);

  const notifyIfChanged = async (): Promise<void> => {
    const names = await toolNames(host, anima);
    if (names.join("\n") !== knownNames.join("\n")) {
      knownNames = names;
      await server.sendToolListChanged().catch(() => {});
    }
  };

  const management: ManagementTool[] = [
    {
      name: "write_memory_file",
      description: "Write a file in your own directory (tools/<name>.ts creates a personal tool; needs the personal-tool permission).",
      inputSchema: {
        type: "object",
        properties: { path: { type: "string" }, content: { type: "string" }, mode: { type: "string", enum: ["overwrite", "append"] } },
        required: ["path", "content"],
      },
      run: async (args) => writeMemoryFile({ animaDir, path: args["path"], content: args["content"], mode: args["mode"] === "append" ? "append" : "overwrite" }),
    },
    {
      name: "read_memory_file",
      description: "Read a text file in your own directory.",
      inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      run: async (args) => new FsCapability(animaDir, host.config.fsLimits).readFile(args["path"]),
    },
    {
      name: "refresh_tools",
      description: "Rescan, rebuild and revalidate your tools; reports what was loaded, changed, removed or failed.",
      inputSchema: { type: "object", properties: {} },
      run: async () => {
        const report = await refreshTools(host, anima);
        await notifyIfChanged();
        // A tool that failed to load makes the refresh an error, as the CLI's exit 6 does.
        return report.failed.length > 0 ? { text: formatRefresh(report), isError: true as const } : formatRefresh(report);
      },
    },
    {
      name: "share_tool",
      description: "Share one of your personal tools with every Anima (needs the shared-tool permission).",
      inputSchema: { type: "object", properties: { tool_name: { type: "string" } }, required: ["tool_name"] },
      run: async (args) =>
        shareTool({ dataDir: host.config.dataDir, animaDir, anima, toolName: args["tool_name"], validate: errorsForShare({ load: hostLoader(host) }) }),
    },
    {
      name: "list_tools",
      description: "List the tools you can use, with their actions and any load errors.",
      inputSchema: { type: "object", properties: {} },
      run: async () => {
        const listing = await host.list(anima);
        const tools = listing.tools.map((t) => ({ name: t.name, origin: t.origin, status: t.status, actions: t.schemas.map((s) => s.action), ...(t.error ? { error: t.error.message } : {}) }));
        // Files that are not loaded as tools (a core tool's name, a reserved name…), with the reason.
        const skipped = listing.problems.map((p) => ({ name: p.name, origin: p.origin, reason: p.message }));
        return JSON.stringify(skipped.length > 0 ? { tools, skipped } : tools, null, 2);
      },
    },
  ];
  management.push(...jobTools(jobs, anima, { startWorkers }));
  const managementByName = new Map(management.map((tool) => [tool.name, tool]));

  const exposure = await coreToolExposure(host);
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const listing = await host.list(anima);
    const toolSchemas = listing.tools
      .filter((tool) => tool.status === "ok" && exposure.exposes(tool))
      .flatMap((tool) => tool.schemas)
      .filter((schema) => !managementByName.has(schema.name))
      .map((schema) => ({
        name: schema.name,
        description: schema.description,
        inputSchema: schema.parameters as ManagementTool["inputSchema"],
        ...(schema.outputSchema ? { outputSchema: schema.outputSchema as ManagementTool["inputSchema"] } : {}),
        // Background-eligible actions may run as tasks (background jobs); a plain call runs as before.
        ...(schema.profile?.background_eligible ? { execution: { taskSupport: "optional" as const } } : {}),
      }));
    return { tools: [...management.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })), ...toolSchemas] };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    if (request.params.task !== undefined) {
      // A task is a background job: only for actions marked background_eligible (their taskSupport).
      const schema = (await host.list(anima)).tools.filter((tool) => exposure.exposes(tool)).flatMap((tool) => tool.schemas).find((s) => s.name === name);
      if (!schema?.profile?.background_eligible || !extra.taskStore) {
        throw new McpError(ErrorCode.InvalidParams, `${name} does not run as a task: only actions marked background_eligible in EXECUTION_PROFILE do`);
      }
      try {
        return { task: await extra.taskStore.createTask({ ttl: request.params.task.ttl ?? null }) };
      } catch (error) {
        const info = error instanceof ToolHostError ? error.toInfo() : { type: "ExecutionError", message: String(error instanceof Error ? error.message : error) };
        throw new McpError(ErrorCode.InvalidParams, `${info.type}: ${info.message}`);
      }
    }
    const managementTool = managementByName.get(name);
    if (managementTool) {
      try {
        const result = await managementTool.run(args);
        return typeof result === "string" ? { content: [{ type: "text" as const, text: result }] } : { content: [{ type: "text" as const, text: result.text }], isError: true };
      } catch (error) {
        const info = error instanceof ToolHostError ? error.toInfo() : { type: "ExecutionError", message: String(error instanceof Error ? error.message : error) };
        return { content: [{ type: "text" as const, text: JSON.stringify({ status: "error", error_type: info.type, message: info.message }) }], isError: true };
      }
    }
    const hidden = await exposure.hiddenCoreTool(anima, name);
    if (hidden) return errorContent({ type: "ToolNotFound", message: `the core tool "${hidden}" is not offered over MCP on this host`, hint: `call it through Bash: animaworks-tool ${hidden} <action> …` });
    const result = await host.call(anima, name, args, { structured: true });
    if (result.status === "ok") {
      return { content: [{ type: "text" as const, text: result.output }], ...(result.structured ? { structuredContent: result.structured } : {}) };
    }
    const envelope = { status: "error", error_type: result.error_type, message: result.message, ...(result.hint ? { hint: result.hint } : {}) };
    return { content: [{ type: "text" as const, text: JSON.stringify(envelope) }], isError: true };
  });

  const watcher = options.watch === false
    ? undefined
    : await watchToolFolders([join(host.config.dataDir, "common_tools"), join(animaDir, "tools")], async () => {
        host.refresh();
        await notifyIfChanged();
      });

  await server.connect(transport);
  return {
    server,
    close: async () => {
      taskWatch.stop();
      await watcher?.close();
      await server.close();
      if (!options.jobs) await jobs.close();
    },
  };
}

async function toolNames(host: ToolHost, anima: string): Promise<string[]> {
  const listing = await host.list(anima);
  return listing.tools.filter((t) => t.status === "ok").flatMap((t) => t.schemas.map((s) => `${s.name}\0${t.bundleHash ?? ""}`)).sort();
}

function errorContent(info: { type: string; message: string; hint?: string }) {
  return { content: [{ type: "text" as const, text: JSON.stringify({ status: "error", error_type: info.type, message: info.message, ...(info.hint ? { hint: info.hint } : {}) }) }], isError: true };
}
