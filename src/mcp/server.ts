import { join } from "node:path";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { type CallToolRequest, CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type ServerNotification, type ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { FsCapability } from "../capabilities/fs.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost } from "../host.js";
import { refreshTools, formatRefresh } from "../cli/lifecycle.js";
import { errorsForShare, hostLoader, shareTool, writeMemoryFile } from "../lifecycle/index.js";
import { JobService } from "../jobs/service.js";
import { watchToolFolders } from "../registry/watcher.js";
import { recordWatchedReloads, shareReloadEvent } from "../audit/reloads.js";
import { coreToolExposure } from "./exposure.js";
import { JobTaskStore, TASK_POLL_INTERVAL_MS } from "./job-tasks.js";
import { InFlight, refusingServer } from "./refusing-server.js";
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
  /** Set when the server could only refuse (an unknown Anima): the exit code for `animaworks-tool mcp`. */
  exitCode?: number;
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
  // An unknown Anima is told to the client, in answer to its requests, not only as a closed connection.
  const animaProblem = await host.list(anima).then(
    () => undefined,
    (error: unknown) => (error instanceof ToolHostError ? error : new ToolHostError("ExecutionError", String(error instanceof Error ? error.message : error))),
  );
  if (animaProblem) return refusingServer(transport, animaProblem);
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
        properties: {
          path: { type: "string", description: "a path relative to your own directory, e.g. notes/today.md or tools/my_tool.ts" },
          content: { type: "string", description: "the text to write" },
          mode: { type: "string", enum: ["overwrite", "append"], description: "replace the file (default) or add to its end" },
        },
        required: ["path", "content"],
      },
      run: async (args) => writeMemoryFile({ animaDir, path: args["path"], content: args["content"], mode: args["mode"] === "append" ? "append" : "overwrite" }),
    },
    {
      name: "read_memory_file",
      description: "Read a text file in your own directory.",
      inputSchema: { type: "object", properties: { path: { type: "string", description: "a path relative to your own directory" } }, required: ["path"] },
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
      inputSchema: { type: "object", properties: { tool_name: { type: "string", description: "the name of one of your personal tools" } }, required: ["tool_name"] },
      run: async (args) =>
        shareTool({
          dataDir: host.config.dataDir,
          animaDir,
          anima,
          toolName: args["tool_name"],
          validate: errorsForShare({ load: hostLoader(host) }),
          onShared: (tool) => host.audit.append(shareReloadEvent(anima, tool)),
        }),
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
  const listedTools = async () => {
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
    return [...management.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })), ...toolSchemas];
  };
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await listedTools() }));

  const inFlight = new InFlight();
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => inFlight.track(callTool(request, extra)));
  async function callTool(request: CallToolRequest, extra: RequestHandlerExtra<ServerRequest, ServerNotification>) {
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
    // An unknown name is answered with the names this client can call (the CLI's hint lists tools).
    const hint = result.error_type === "ToolNotFound" && result.message.startsWith("unknown tool") ? `MCP tools: ${(await listedTools()).map((tool) => tool.name).join(", ")}` : result.hint;
    return errorContent({ type: result.error_type, message: result.message, ...(hint ? { hint } : {}) });
  }

  const watcher = options.watch === false
    ? undefined
    : await watchToolFolders([join(host.config.dataDir, "common_tools"), join(animaDir, "tools")], async (paths) => {
        host.refresh();
        await notifyIfChanged();
        // The tools are listed now (above), so recording which of them changed costs no reload.
        await recordWatchedReloads(host, paths, anima);
      });

  await server.connect(transport);
  return {
    server,
    close: async () => {
      // Calls in flight when the client closed stdin are answered first (stdout is still open).
      await inFlight.settled(host.config.maxCallTimeoutMs);
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
