// A host with in-process isolation (the one-shot CLI's mode) for the security suite, in a process of its
// own. An attack can cost an in-process host a thread for good (isolated-vm cannot stop some isolates),
// and a process in that state can deadlock or never exit: that must happen here, never in the test
// runner. The test talks to this process over IPC and ends it with SIGKILL.
import { createHost } from "../../dist/src/index.js";

const { throwFromLogSink, ...options } = JSON.parse(process.argv[2] ?? "{}");
const host = createHost({
  ...options,
  isolation: "in-process",
  onLog: (record) => {
    process.send?.({ type: "log", record });
    // As the harness's logSinkFailure(): a broken operator sink, which the host must contain.
    if (throwFromLogSink && record.message.startsWith(throwFromLogSink)) throw new Error(`EPIPE: write failed at ${process.cwd()}/log.txt`);
  },
});

process.on("message", (message) => {
  if (message.type === "call") {
    void host.call(message.anima, message.schema, message.args, message.options).then((result) => process.send?.({ type: "result", id: message.id, result }));
  } else if (message.type === "close") {
    void host.close().then(() => process.send?.({ type: "result", id: message.id, result: { canExitCleanly: host.canExitCleanly() } }));
  }
});
// No orphans: the test runner going away ends this process (SIGKILL: a normal exit may hang, see above).
process.on("disconnect", () => process.kill(process.pid, "SIGKILL"));
process.send?.({ type: "ready" });
