import { checkSource } from "../source-checks.js";
import { scanImports } from "../source-scan.js";
import type { CheckReplyMessage, CheckRequestMessage } from "./protocol.js";

/**
 * The source-checks process (source-checker.ts starts it, with an IPC channel): answers each request, one
 * at a time, in order, with `checkSource`'s findings or the text's imports. It exits when the host
 * disconnects (the host closing, or stopping it idle).
 */
const send = process.send?.bind(process);
if (!send) throw new Error("the source-checks entry runs only as a child process with an IPC channel");
process.on("message", (message: CheckRequestMessage) => {
  let reply: CheckReplyMessage;
  try {
    reply = "check" in message ? { id: message.id, findings: checkSource(message.check) } : { id: message.id, imports: scanImports(message.importsOf) };
  } catch (error) {
    reply = { id: message.id, failed: error instanceof Error ? error.message : String(error) };
  }
  send(reply);
});
process.on("disconnect", () => process.exit(0));
