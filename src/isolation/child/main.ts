/**
 * Entry point of a sandbox process (started by the pool, pool/child-spawn.ts). It owns an
 * `IsolateRunner` and answers the host's requests over the framed channel on fd `CHANNEL_FD`
 * (wire/frames.ts). It holds no secrets and has an empty environment; if it dies, the host restarts it.
 */
import { setPriority } from "node:os";
import { writeSync } from "node:fs";
import { IsolateRunner, SNAPSHOT_AFTER_ISOLATES } from "../isolate/isolate-runner.js";
import { DEFAULT_PYTHON_INTERPRETERS } from "../isolate/isolate-runner-options.js";
import { stripHostDetails } from "../isolate/ivm-errors.js";
import { Socket } from "node:net";
import { BULK_FD, BulkReceiver } from "../wire/bulk-channel.js";
import { ReplyAssembler } from "../wire/reply-chunks.js";
import { ByteLru } from "../../byte-lru.js";
import { SANDBOX_PROCESS_IN_FLIGHT } from "../call-ledger.js";
import { decodeToSandbox } from "../wire/decode.js";
import { FramedSocket } from "../wire/framed-socket.js";
import { CHANNEL_FD, MAX_FRAME_FROM_HOST_BYTES } from "../wire/frames.js";
import { fitToFrames } from "../wire/parts.js";
import type { CallLabel, CallOutcome, CapabilityReply, DescribeOutcome, FromSandbox, ToSandbox } from "../wire/messages.js";

// Arguments (child-spawn.ts): warm pool bytes, idle isolates at most, nice value, startup snapshot (1 or 0),
// warm up before saying ready (1 or 0), warm Python interpreters at most, a spare interpreter (1 or 0),
// idle ms before an isolate is compacted (0: never).
const warmPoolBytes = Number(process.argv[2]) || 256 * 2 ** 20;
const maxIdleIsolates = Number(process.argv[3]) || Number.POSITIVE_INFINITY;
const nice = Number(process.argv[4]) || 0;
const startupSnapshot = process.argv[5] !== "0";
const warmUpFirst = process.argv[6] === "1";
const warmPythonInterpreters = Number(process.argv[7]);
const pythonInterpreters = {
  warm: Number.isInteger(warmPythonInterpreters) && warmPythonInterpreters >= 0 ? warmPythonInterpreters : DEFAULT_PYTHON_INTERPRETERS.warm,
  spare: process.argv[8] !== "0",
};
const compactIdleAfterMs = Number(process.argv[9]);
const toolsPerIsolate = Number(process.argv[10]);
// Before isolated-vm starts a thread: Linux nice values are per thread, and threads inherit the value of
// the thread that starts them. An unprivileged process (the OS sandbox's uid) cannot raise it back.
if (nice > 0) setPriority(nice);

/** The channel to the host; the host closing it ends this process (no orphaned sandboxes). */
const channel = new FramedSocket(new Socket({ fd: CHANNEL_FD, readable: true, writable: true }), {
  maxFrameBytes: MAX_FRAME_FROM_HOST_BYTES,
  onMessage: (raw) => {
    const message = decodeToSandbox(raw);
    if (message) handle(message);
    else refuse(raw);
  },
  onBroken: (reason) => {
    process.stderr.write(`animaworks sandbox ${process.pid}: the host's channel ${reason}; ending\n`);
    endProcess();
  },
  onClose: () => endProcess(),
});

let outbox: FromSandbox[] = [];
let outboxCallbacks: Array<() => void> = [];

/**
 * Answers ready in the same event-loop iteration share one write (see the pool's outbox). The flush
 * waits for `setImmediate`, not a microtask: isolated-vm delivers each finished call in its own task,
 * so a microtask flush wrote one message per call under load. A message too large for one frame goes
 * as parts (wire/parts.ts).
 */
function send(message: FromSandbox, then?: () => void): void {
  if (outbox.length === 0) setImmediate(flushOutbox);
  outbox.push(...fitToFrames(message));
  if (then) outboxCallbacks.push(then);
}

function flushOutbox(): void {
  const messages = outbox;
  const callbacks = outboxCallbacks;
  outbox = [];
  outboxCallbacks = [];
  channel.send(messages, () => {
    for (const callback of callbacks) callback();
  });
}

/**
 * Bundle code by hash; the host sends each bundle's code once (and again after `needBundle`). Bounded by
 * characters, not count: a host serving a thousand small tools keeps them all.
 */
const bundleCode = new ByteLru<string>(64 * 2 ** 20); // characters of code

let inFlight = 0;
let nextCapabilityId = 1;
/** Capability calls waiting for the host process's answer. */
const capabilityWaiters = new Map<number, (reply: CapabilityReply) => void>();
/** How to stop each call in flight, so that the host can (`abort`). */
const stoppers = new Map<number, () => void>();
let retiring = false;
const replies = new ReplyAssembler();
/** Large file contents arrive as bytes on their own pipe (bulk-channel.ts). */
const bulk = new BulkReceiver(openBulkPipe());

function openBulkPipe(): Socket | undefined {
  try {
    const pipe = new Socket({ fd: BULK_FD, readable: true, writable: false });
    pipe.on("error", () => {
      // the host went away: the channel's close ends this process
    });
    return pipe;
  } catch {
    return undefined; // started without one (tests): answers then come as JSON only
  }
}
/**
 * The host's request id of each call's label object (the runner hands back the very object it was
 * given; each request decodes to a fresh one). The label (the Anima's name, the tool) is all this
 * process is told of whom a call is for: messages about a call name only that id, and the host
 * attributes them from its own record of the request.
 */
const requestIdOf = new WeakMap<CallLabel, number>();

/**
 * Ends this process once its last answer is written. SIGKILL rather than `process.exit`: a lost
 * isolate's thread is parked inside V8 and exit-time clean-up could wait on it forever.
 */
function endIfRetiredAndIdle(): void {
  if (retiring && inFlight === 0) process.kill(process.pid, "SIGKILL");
}

const runner = new IsolateRunner({
  warmPoolBytes,
  // What the host holds this process to (pool/capability-relay.ts): past these, a request of its is a violation.
  capabilityLimits: { maxInFlightPerCall: SANDBOX_PROCESS_IN_FLIGHT.perCall, maxInFlightPerAnima: SANDBOX_PROCESS_IN_FLIGHT.perAnima },
  maxIdleIsolates,
  startupSnapshot,
  pythonInterpreters,
  ...(Number.isFinite(compactIdleAfterMs) && compactIdleAfterMs >= 0 ? { compactIdleAfterMs } : {}),
  ...(Number.isInteger(toolsPerIsolate) && toolsPerIsolate >= 1 ? { toolsPerIsolate } : {}),
  // Capabilities run in the host process, which holds the policy, the credentials and the audit log.
  invokeCapability: (context, name, argsJson) =>
    new Promise<CapabilityReply>((resolve) => {
      const id = requestIdOf.get(context);
      if (id === undefined) return resolve({ ok: false, error: { type: "ExecutionError", fault: "tool", message: `${name}: the call has ended` } });
      const capabilityId = nextCapabilityId++;
      capabilityWaiters.set(capabilityId, resolve);
      send({ type: "capability", capabilityId, id, name, argsJson });
    }),
  onLog: (line) => {
    const id = requestIdOf.get(line.context);
    if (id !== undefined) send({ type: "log", id, level: line.level, message: line.message });
  },
  onUnrecoverable: (reason) => {
    if (retiring) return;
    retiring = true;
    process.stderr.write(`animaworks sandbox ${process.pid}: ${reason}; retiring this process\n`);
    send({ type: "retiring", reason }, endIfRetiredAndIdle);
  },
});

/**
 * A message from the host that is not part of the protocol: a bug of the host's, never acted on. It is
 * reported (on stderr, which the host logs) by its type only, since it may carry a tool's data. A request
 * that names its id is answered with an error at once, so that its caller does not wait for the deadline.
 */
function refuse(raw: unknown): void {
  const message = typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>) : undefined;
  const type = typeof message?.["type"] === "string" ? JSON.stringify(message["type"].slice(0, 40)) : typeof raw;
  process.stderr.write(`animaworks sandbox ${process.pid}: the host sent a message that is not part of the protocol (${type}); dropped\n`);
  const id = message?.["id"];
  if (message?.["type"] === "request" && typeof id === "number" && Number.isSafeInteger(id) && id > 0) {
    const error = { type: "ExecutionError" as const, fault: "host" as const, message: "the sandbox process could not read the host's request" };
    send({ type: "response", id, outcome: { ok: false, error, durationMs: 0 } });
  }
}

function handle(message: ToSandbox): void {
  if (message.type === "shutdown") {
    if (retiring) {
      process.kill(process.pid, "SIGKILL");
      return;
    }
    void runner.close().finally(endProcess);
    return;
  }
  if (message.type === "capabilityReplyPart") {
    replies.addSlice(message.capabilityId, message.text);
    return;
  }
  if (message.type === "capabilityReply") {
    const { capabilityId, bulkBytes } = message;
    const waiter = capabilityWaiters.get(capabilityId);
    capabilityWaiters.delete(capabilityId);
    if (bulkBytes !== undefined) bulk.expect(capabilityId, bulkBytes, (text) => waiter?.({ ok: true, value: text }));
    else waiter?.(replies.complete(capabilityId, message.reply, message.joinSlicesInto));
    return;
  }
  if (message.type === "forget") {
    runner.forgetAnima(message.anima);
    return;
  }
  if (message.type === "stats") {
    send({ type: "warmPool", statsId: message.statsId, ...runner.warmPoolStats() });
    return;
  }
  if (message.type === "abort") {
    stoppers.get(message.id)?.();
    return;
  }
  if (message.type !== "request") return;
  const { id } = message;
  let request = message.request;
  if (request.bundle.code === "") {
    const code = bundleCode.get(request.bundle.hash);
    if (code === undefined) return send({ type: "needBundle", id });
    request = { ...request, bundle: { ...request.bundle, code } };
  } else {
    bundleCode.set(request.bundle.hash, request.bundle.code, request.bundle.code.length);
  }
  inFlight++;
  let work: Promise<CallOutcome | DescribeOutcome>;
  if (request.op === "describe") work = runner.describe(request);
  else {
    requestIdOf.set(request.context, id);
    const call = runner.stoppableCall(request);
    stoppers.set(id, call.stop);
    work = call.outcome.finally(() => stoppers.delete(id));
  }
  work
    .then(
      (outcome) => outcome,
      (error: unknown) => ({
        ok: false as const,
        error: {
          type: "ExecutionError" as const,
          fault: "host" as const,
          message: `sandbox failure: ${stripHostDetails(error instanceof Error ? error.message : String(error))}`,
        },
        durationMs: 0,
      }),
    )
    .then((outcome) =>
      send({ type: "response", id, outcome }, () => {
        inFlight--;
        endIfRetiredAndIdle();
      }),
    )
    .catch((error: unknown) => {
      // Only framing the response can fail here. The host would wait for this call until its deadline:
      // say why on stderr (relayed to the operator) and end, so that the host fails this process's calls now.
      writeSync(
        2,
        `animaworks sandbox ${process.pid}: the response of request ${id} could not be sent (it ends, so the host fails its calls now): ${error instanceof Error ? error.message : String(error)}\n`,
      );
      process.kill(process.pid, "SIGKILL");
    });
}

/** A normal exit waits for (or crashes on) a thread an isolate still holds: then only SIGKILL ends the process. */
function endProcess(): void {
  if (retiring || runner.stuckEntries() > 0) process.kill(process.pid, "SIGKILL");
  else process.exit(0);
}
/**
 * A fresh process's first isolates pay for what every later one reuses (isolated-vm's and V8's first
 * use, the prelude's compilation, the startup snapshot made on the third isolate, the host-side code's
 * first runs): ≈ 40–50 ms on the 2-core machine this was measured on. It is paid here, on a throwaway bundle that no tool wrote, before the process
 * says it is ready, so that a spare process gives a new cordon's first call the speed of a warm one.
 */
const WARM_UP_BUNDLE = { hash: "warm-up", code: "__awRegister({ get_tool_schemas: () => [], dispatch: () => null });", displayName: "warm-up.js" };
const WARM_UP_LABEL: CallLabel = { anima: "\0warm-up", tool: "warm-up" };
async function warmUp(): Promise<void> {
  const limits = { timeoutMs: 10_000, memoryLimitMb: 32 };
  await runner.describe({ op: "describe", bundle: WARM_UP_BUNDLE, ...limits });
  // Isolates until the startup snapshot is made (isolate-runner.ts SNAPSHOT_AFTER_ISOLATES), each a call.
  for (let made = 1; made < SNAPSHOT_AFTER_ISOLATES; made++) {
    const request = { op: "call" as const, bundle: WARM_UP_BUNDLE, context: WARM_UP_LABEL, entry: "call" as const, schemaName: "warm_up", payloadJson: "{}" };
    await runner.stoppableCall({ ...request, maxResultBytes: 1_024, maxLogLines: 1, maxLogLineChars: 100, ...limits }).outcome;
    runner.forgetAnima(WARM_UP_LABEL.anima);
  }
}
if (warmUpFirst) {
  void warmUp()
    .catch(() => undefined)
    .finally(() => send({ type: "ready" }));
} else send({ type: "ready" });
