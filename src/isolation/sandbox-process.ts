/**
 * Entry point of a sandbox process (forked by `SandboxPool`). It owns an `IsolateRunner` and answers the
 * host's requests over the IPC channel. It holds no secrets and has an empty environment; if it dies,
 * the host restarts it.
 */
import { IsolateRunner } from "./isolate-runner.js";
import type { FromSandbox, ToSandbox } from "./protocol.js";

const maxIdleIsolates = Number(process.argv[2]) || 64;

function send(message: FromSandbox): void {
  if (process.connected) process.send?.(message);
}

const runner = new IsolateRunner({ maxIdleIsolates, onLog: (line) => send({ type: "log", line }) });

process.on("message", (message: ToSandbox) => {
  if (message.type === "shutdown") {
    void runner.close().finally(() => process.exit(0));
    return;
  }
  if (message.type !== "request") return;
  const { id, request } = message;
  const work = request.op === "describe" ? runner.describe(request) : runner.call(request);
  work.then(
    (outcome) => send({ type: "response", id, outcome }),
    (error: unknown) =>
      send({
        type: "response",
        id,
        outcome: { ok: false, error: { type: "ExecutionError", message: `sandbox failure: ${error instanceof Error ? error.message : String(error)}` }, durationMs: 0 },
      }),
  );
});

// The host going away (IPC closed) ends this process: no orphaned sandboxes.
process.on("disconnect", () => process.exit(0));
send({ type: "ready" });
