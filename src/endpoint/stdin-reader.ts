import { ToolHostError } from "../errors.js";
import { stdinTooLarge } from "./invocation.js";
import type { HostMessage } from "./protocol.js";

/**
 * A client's stdin, asked for when the invocation first reads it (`--args-file -`). At most `maxBytes`
 * are held: beyond them the read fails with InvalidArguments (the invocation answers it, exit 2) and
 * the rest the client sends, up to its `stdin-end`, is dropped unread.
 *
 * Invariant: all of stdin arrives within `timeoutMs` of the request, or the read fails with Timeout (the
 * invocation answers it, exit 3) and the rest is dropped unread: a client that never sends its stdin held
 * a call's slot for as long as it stayed connected (256 of them refused every other client as busy and
 * kept the daemon from idling out).
 */
export class StdinReader {
  private parts: string[] = [];
  private bytes = 0;
  private pending: { resolve(text: string): void; reject(error: Error): void } | undefined;
  private result: Promise<string> | undefined;
  private discarding = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly send: (message: HostMessage) => void,
    private readonly maxBytes: number,
    private readonly timeoutMs: number,
  ) {}

  read(): Promise<string> {
    this.result ??= new Promise<string>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.send({ type: "stdin-request" });
      this.timer = setTimeout(() => this.timedOut(), this.timeoutMs);
      this.timer.unref();
    });
    return this.result;
  }

  private timedOut(): void {
    if (!this.pending) return;
    this.pending.reject(
      new ToolHostError(
        "Timeout",
        `the client sent no complete stdin within ${this.timeoutMs} ms of the request (--args-file -)`,
        "send the arguments on stdin and close it, or pass them in a file (--args-file FILE)",
        "caller",
      ),
    );
    this.pending = undefined;
    this.parts = [];
    this.discarding = true;
  }

  expecting(): boolean {
    return this.pending !== undefined || this.discarding;
  }

  /** Takes a stdin message; returns a protocol problem, if any. */
  take(message: { type: "stdin"; data: string } | { type: "stdin-end" }): string | undefined {
    if (message.type === "stdin-end") {
      clearTimeout(this.timer);
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
    clearTimeout(this.timer);
    this.pending?.reject(stdinTooLarge());
    this.pending = undefined;
    return undefined;
  }

  fail(): void {
    clearTimeout(this.timer);
    this.pending?.reject(new ToolHostError("ExecutionError", "the client went away before sending stdin"));
    this.pending = undefined;
  }
}
