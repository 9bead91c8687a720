import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  type CallToolRequest,
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { type ErrorInfo, ToolHostError, errorEnvelope, errorInfoOf, infoOfWire } from "../errors.js";
import type { ToolChangeSource, ToolHost } from "../host-api.js";
import { READ_MEMORY_FILE, WRITE_MEMORY_FILE, formatRefresh, managementOf } from "../lifecycle/management.js";
import { JobService } from "../jobs/service.js";
import { findSchema } from "../registry/actions.js";
import { coreToolExposure } from "./exposure.js";
import { JobTaskStore, TASK_POLL_INTERVAL_MS } from "./job-tasks.js";
import { InFlight, type McpServerHandle, refusingServer } from "./refusing-server.js";
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
 *  - When the set of tools changes (a reload), clients get `notifications/tools/list_changed`: the server
 *    subscribes to the host's tool change event (registry/tool-watch.ts), which starts a watcher of the
 *    Anima's folders on a host that does not watch them; the host records the reloads.
 *  - The management tools are the host's management service (lifecycle/management.ts): file reads go
 *    through the host's capability path, and every operation is audited.
 */
export type { McpServerHandle } from "./refusing-server.js";

export interface McpServerOptions {
  /** Reload tools when their files change, and tell the client (hosts made by createHost). Default: true. */
  watch?: boolean;
  /** The background jobs behind the job tools. Default: a JobService on the host's data dir, closed with the server. */
  jobs?: JobService;
  /** `submit_job` starts a detached worker when none runs (as the CLI's submit does). Default: true. */
  startWorkers?: boolean;
}

export async function startMcpServer(host: ToolHost, anima: string, transport: Transport, options: McpServerOptions = {}): Promise<McpServerHandle> {
  // An unknown Anima is told to the client, in answer to its requests, not only as a closed connection.
  const animaProblem = await host.list(anima).then(
    () => undefined,
    (error: unknown) => (error instanceof ToolHostError ? error : ToolHostError.fromInfo(errorInfoOf(error))),
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
  // One look at a time, so that the last one always compares with what the client was last told.
  let looking: Promise<void> = Promise.resolve();
  const notifyIfChanged = (): Promise<void> =>
    (looking = looking
      .then(async () => {
        const names = await toolNames(host, anima);
        if (names.join("\n") !== knownNames.join("\n")) {
          knownNames = names;
          await server.sendToolListChanged().catch(() => {});
        }
      })
      .catch(() => {}));
  const management = managementOf(host);

  const managementTools: ManagementTool[] = [
    {
      name: WRITE_MEMORY_FILE,
      description: "Write a file in your own directory (tools/<name>.ts or tools/<name>.py creates a personal tool; needs the personal-tool permission).",
      inputSchema: {
        type: "object",
        properties: {
          path: { type: "string", description: "a path relative to your own directory, e.g. notes/today.md or tools/my_tool.ts" },
          content: { type: "string", description: "the text to write" },
          mode: { type: "string", enum: ["overwrite", "append"], description: "replace the file (default) or add to its end" },
        },
        required: ["path", "content"],
      },
      run: async (args) => {
        const result = await management.writeMemoryAndLoad(anima, {
          path: args["path"],
          content: args["content"],
          mode: args["mode"] === "append" ? "append" : "overwrite",
        });
        // A tool file was refreshed: the client hears of the change at once.
        await notifyIfChanged();
        return result.isError ? { text: result.text, isError: true as const } : result.text;
      },
    },
    {
      name: READ_MEMORY_FILE,
      description: "Read a text file in your own directory.",
      inputSchema: { type: "object", properties: { path: { type: "string", description: "a path relative to your own directory" } }, required: ["path"] },
      run: async (args) => management.readMemory(anima, args["path"]),
    },
    {
      name: "refresh_tools",
      description: "Rescan, rebuild and revalidate your tools; reports what was loaded, changed, removed or failed.",
      inputSchema: { type: "object", properties: {} },
      run: async () => {
        const report = await management.refresh(anima);
        await notifyIfChanged();
        // A tool that failed to load makes the refresh an error, as the CLI's exit 6 does.
        return report.failed.length > 0 ? { text: formatRefresh(report), isError: true as const } : formatRefresh(report);
      },
    },
    {
      name: "share_tool",
      description: "Share one of your personal tools with every Anima (needs the shared-tool permission).",
      inputSchema: {
        type: "object",
        properties: { tool_name: { type: "string", description: "the name of one of your personal tools" } },
        required: ["tool_name"],
      },
      run: async (args) => management.share(anima, args["tool_name"]),
    },
    {
      name: "list_tools",
      description: "List the tools you can use, with their actions and any load errors.",
      inputSchema: { type: "object", properties: {} },
      run: async () => {
        const listing = await host.list(anima);
        const tools = listing.tools.map((t) => ({
          name: t.name,
          origin: t.origin,
          status: t.status,
          actions: t.schemas.map((s) => s.action),
          ...(t.error ? { error: t.error.message } : {}),
        }));
        // Files that are not loaded as tools (a core tool's name, a reserved name…), with the reason.
        const skipped = listing.problems.map((p) => ({ name: p.name, origin: p.origin, reason: p.message }));
        return JSON.stringify(skipped.length > 0 ? { tools, skipped } : tools, null, 2);
      },
    },
  ];
  const exposure = await coreToolExposure(host);
  managementTools.push(...jobTools(jobs, anima, { startWorkers, hiddenCoreTool: (schemaName) => exposure.hiddenCoreTool(anima, schemaName) }));
  const managementByName = new Map(managementTools.map((tool) => [tool.name, tool]));

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
    return [...managementTools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })), ...toolSchemas];
  };
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await listedTools() }));

  const inFlight = new InFlight();
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => inFlight.track(callTool(request, extra)));
  async function callTool(request: CallToolRequest, extra: RequestHandlerExtra<ServerRequest, ServerNotification>) {
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    if (request.params.task !== undefined) {
      // A task is a background job: only for actions marked background_eligible (their taskSupport).
      const found = findSchema(
        (await host.list(anima)).tools.filter((tool) => exposure.exposes(tool)),
        name,
      );
      if (!found && !managementByName.has(name)) throw new McpError(ErrorCode.InvalidParams, `unknown tool "${name}"`);
      if (!found?.schema.profile?.background_eligible || !extra.taskStore) {
        // Revision 2025-11-25, tool-level negotiation: a task call of a tool whose taskSupport is absent or
        // "forbidden" SHOULD be answered -32601 (Method not found).
        throw new McpError(ErrorCode.MethodNotFound, `${name} does not run as a task: only actions marked background_eligible in EXECUTION_PROFILE do`);
      }
      try {
        return { task: await extra.taskStore.createTask({ ttl: request.params.task.ttl ?? null }) };
      } catch (error) {
        const info = errorInfoOf(error);
        throw new McpError(ErrorCode.InvalidParams, `${info.type}: ${info.message}`);
      }
    }
    const managementTool = managementByName.get(name);
    if (managementTool) {
      try {
        const result = await managementTool.run(args);
        return typeof result === "string"
          ? { content: [{ type: "text" as const, text: result }] }
          : { content: [{ type: "text" as const, text: result.text }], isError: true };
      } catch (error) {
        // The envelope the CLI's `-j` gives for the same refusal: type, fault and hint.
        return errorContent(errorInfoOf(error));
      }
    }
    const hidden = await exposure.hiddenCoreTool(anima, name);
    if (hidden)
      return errorContent({
        type: "ToolNotFound",
        fault: "caller",
        message: `the core tool "${hidden}" is not offered over MCP on this host`,
        hint: `call it through Bash: animaworks-tool ${hidden} <action> …`,
      });
    // A client's notifications/cancelled aborts extra.signal: the call is stopped, as the CLI's Ctrl-C stops its own.
    const result = await host.call(anima, name, args, { structured: true, signal: extra.signal });
    // The call's id in the audit trail, as the CLI's `-j` envelope gives it (`call_id`).
    const meta = result.callId !== undefined ? { _meta: { [CALL_ID_META_KEY]: result.callId } } : {};
    if (result.status === "ok") {
      return { content: [{ type: "text" as const, text: result.output }], ...(result.structured ? { structuredContent: result.structured } : {}), ...meta };
    }
    // An unknown name is answered with the names this client can call (the CLI's hint lists tools).
    const info = infoOfWire(result);
    if (info.type === "ToolNotFound" && info.message.startsWith("unknown tool"))
      info.hint = `MCP tools: ${(await listedTools()).map((tool) => tool.name).join(", ")}`;
    return { ...errorContent(info), ...meta };
  }

  // The host reloads (and records the reloads) before it tells; this only tells the client.
  const changes = options.watch === false ? undefined : changeSource(host);
  const unsubscribe = await changes?.onToolsChanged(() => void notifyIfChanged(), { anima });

  await server.connect(transport);
  return {
    server,
    close: async () => {
      // Calls in flight when the client closed stdin are answered first (stdout is still open).
      await inFlight.settled(host.config.maxCallTimeoutMs);
      taskWatch.stop();
      await unsubscribe?.();
      await looking;
      await server.close();
      if (!options.jobs) await jobs.close();
    },
  };
}

async function toolNames(host: ToolHost, anima: string): Promise<string[]> {
  const listing = await host.list(anima);
  return listing.tools
    .filter((t) => t.status === "ok")
    .flatMap((t) => t.schemas.map((s) => `${s.name}\0${t.bundleHash ?? ""}`))
    .sort();
}

/** The `_meta` key of a tool result's call id (the audit trail's `callId`). */
export const CALL_ID_META_KEY = "animaworks/call_id";

function errorContent(info: ErrorInfo) {
  return { content: [{ type: "text" as const, text: JSON.stringify(errorEnvelope(info)) }], isError: true };
}

/** The host's tool change event, if it has one (every host createHost makes). */
function changeSource(host: ToolHost): ToolChangeSource | undefined {
  const source = host as ToolHost & Partial<ToolChangeSource>;
  return typeof source.onToolsChanged === "function" ? (source as ToolHost & ToolChangeSource) : undefined;
}
