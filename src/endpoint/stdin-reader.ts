import { ToolHostError } from "../errors.js";
import { stdinTooLarge } from "./invocation.js";
import type { HostMessage } from "./protocol.js";

/**
 * A client's stdin, asked for when the invocation first reads it (`--args-file -`). At most `maxBytes`
 * are held: beyond them the read fails with InvalidArguments (the invocation answers it, exit 2) and
 * the rest the client sends, up to its `stdin-end`, is dropped unread.
 */
export class StdinReader {
  private parts: string[] = [];
  private bytes = 0;
  private pending: { resolve(text: string): void; reject(error: Error): void } | undefined;
  private result: Promise<string> | undefined;
  private discarding = false;

  constructor(
    private readonly send: (message: HostMessage) => void,
    private readonly maxBytes: number,
  ) {}

  read(): Promise<string> {
    this.result ??= new Promise<string>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.send({ type: "stdin-request" });
    });
    return this.result;
  }

  expecting(): boolean {
    return this.pending !== undefined || this.discarding;
  }

  /** Takes a stdin message; returns a protocol problem, if any. */
  take(message: { type: "stdin"; data: string } | { type: "stdin-end" }): string | undefined {
    if (message.type === "stdin-end") {
      this.pending?.resolve(this.parts.join(""));
      this.pending = undefined;
      this.discarding = false;
      return undefined;
    }
    if (this.discarding) return undefined;
    this.bytes += Buffer.byteLength(message.data);
    this.parts.push(message.data);
    if (this.bytes <= this.maxBytes) return undefined;
    this.parts = [];
    this.discarding = true;
    this.pending?.reject(stdinTooLarge());
    this.pending = undefined;
    return undefined;
  }

  fail(): void {
    this.pending?.reject(new ToolHostError("ExecutionError", "the client went away before sending stdin"));
    this.pending = undefined;
  }
}
