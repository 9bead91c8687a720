import { writeSync } from "node:fs";
import { FrameDecoder, encodeFrame } from "../../isolation/wire/frames.js";
import { checkSource } from "../source-checks.js";
import { scanImports } from "../source-scan.js";
import { checkAndCompile } from "../../registry/schema-compile.js";
import { replyFrame } from "./reply-bound.js";
import { MAX_REQUEST_FRAME_BYTES, type CheckReplyMessage, type CheckRequestMessage, type ReadyMessage } from "./protocol.js";

/**
 * The source-checks process (source-checker.ts starts it): says it is ready once its code is loaded, then
 * reads requests as frames on stdin and answers each, one at a time, in order, with `checkSource`'s
 * findings, the text's imports or a tool's schemas checked and compiled, as a frame on stdout
 * (reply-bound.ts). It exits when stdin ends (the host closing, or stopping it idle).
 */
const decoder = new FrameDecoder(MAX_REQUEST_FRAME_BYTES);

function answer(message: CheckRequestMessage): CheckReplyMessage {
  try {
    if ("check" in message) return { id: message.id, findings: checkSource(message.check) };
    if ("schemas" in message) return { id: message.id, schemaCheck: checkAndCompile(message.schemas) };
    return { id: message.id, imports: scanImports(message.importsOf) };
  } catch (error) {
    return { id: message.id, failed: error instanceof Error ? error.message : String(error) };
  }
}

/** Writes all of `bytes` to stdout, a pipe left blocking (Node's stream for it is never made). */
function writeAll(bytes: Buffer): void {
  for (let offset = 0; offset < bytes.length;) {
    try {
      offset += writeSync(1, bytes, offset);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
    }
  }
}

process.stdin.on("data", (chunk: Buffer) => {
  // The host's own frames: a broken one is a defect of the host, and ends this process (the host reports it).
  for (const message of decoder.push(chunk)) writeAll(replyFrame(answer(message as CheckRequestMessage)));
});
process.stdin.on("end", () => process.exit(0));
writeAll(encodeFrame({ ready: true } satisfies ReadyMessage));
