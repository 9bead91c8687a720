import type { HostConfig } from "../config.js";
import type { CallOutcome, CallRequest, DescribeOutcome, DescribeRequest, Executor, ToolLogLine } from "./protocol.js";
import { SandboxPool } from "./sandbox-pool.js";

/** Picks where isolates run (see `HostOptions.isolation`). */
export function createExecutor(config: HostConfig, onLog: (line: ToolLogLine) => void): Executor {
  if (config.isolation === "in-process") return new InProcessExecutor(config.maxIdleIsolates, onLog);
  return new SandboxPool({ processes: config.sandboxProcesses, maxIdleIsolates: config.maxIdleIsolates, onLog });
}

/**
 * Runs isolates in this process. isolated-vm is imported on first use, so a host in process mode
 * never loads it (and does not need `--no-node-snapshot`).
 */
class InProcessExecutor implements Executor {
  private runner: Promise<Executor> | undefined;

  constructor(
    private readonly maxIdleIsolates: number,
    private readonly onLog: (line: ToolLogLine) => void,
  ) {}

  private get(): Promise<Executor> {
    this.runner ??= import("./isolate-runner.js").then(
      ({ IsolateRunner }) => new IsolateRunner({ maxIdleIsolates: this.maxIdleIsolates, onLog: this.onLog }),
    );
    return this.runner;
  }

  async describe(request: DescribeRequest): Promise<DescribeOutcome> {
    return (await this.get()).describe(request);
  }

  async call(request: CallRequest): Promise<CallOutcome> {
    return (await this.get()).call(request);
  }

  async close(): Promise<void> {
    if (this.runner) await (await this.runner).close();
  }
}
