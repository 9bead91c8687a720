import { parentPort } from "node:worker_threads";
import { checkSource } from "../source-checks.js";
import { scanImports } from "../source-scan.js";
import type { CheckReplyMessage, CheckRequestMessage } from "./protocol.js";

/**
 * The source-checks thread (source-checker.ts starts it): answers each request, one at a time, in order,
 * with `checkSource`'s findings or the text's imports.
 */
const port = parentPort;
if (!port) throw new Error("the source-checks entry runs only as a worker thread");
port.on("message", (message: CheckRequestMessage) => {
  let reply: CheckReplyMessage;
  try {
    reply = "check" in message ? { id: message.id, findings: checkSource(message.check) } : { id: message.id, imports: scanImports(message.importsOf) };
  } catch (error) {
    reply = { id: message.id, failed: error instanceof Error ? error.message : String(error) };
  }
  port.postMessage(reply);
});
