import type { ChildProcess } from "node:child_process";
import { StringDecoder } from "node:string_decoder";
import type { Readable, Writable } from "node:stream";

/**
 * Large file contents cross from the host to a sandbox process as raw bytes on a pipe of their own
 * (fd `BULK_FD` of the child), never as JSON text on the IPC channel, and are decoded (UTF-8 or base64)
 * by the sandbox process. The host's share of a 10 MiB read is then its read(2) calls and write(2)
 * calls: no decoding, no joining, no JSON, none of which it could do without holding its event loop
 * for tens of milliseconds per read, with every other Anima's call waiting behind it.
 *
 * Invariants:
 * - The pipe runs one way, host → sandbox process; the host never reads from it, so nothing the sandbox
 *   process writes there reaches the host.
 * - A frame is `[u32 capabilityId][u32 length][u8 encoding]` followed by `length` bytes; the frames of
 *   one answer are written in order and the answer's IPC message (`capabilityReply` with `bulk`) is
 *   sent after the last one was written. The two channels are not ordered with each other, so the
 *   receiver completes an answer when it has both its message and all of its `bulk.bytes`.
 */

/** The child's fd of the bulk pipe (0–2 stdio, 3 the IPC channel, 4 bwrap's seccomp program). */
export const BULK_FD = 5;
const HEADER_BYTES = 9;

/** The host's end of a sandbox process's bulk pipe (started with a pipe at `BULK_FD`). */
export function bulkPipeOf(child: ChildProcess): Writable | undefined {
  return ((child.stdio as unknown[])[BULK_FD] as Writable | null | undefined) ?? undefined;
}
const ENCODINGS = ["utf8", "base64"] as const;
export type TextEncoding = (typeof ENCODINGS)[number];

/**
 * File contents read on the host and not decoded there. In a sandbox process's answer it crosses as
 * bytes (above); anywhere else it is serialised as its text (`toJSON`), so an in-process isolate gets the
 * same string it always did.
 */
export class UndecodedText {
  constructor(
    readonly chunks: readonly Buffer[],
    readonly encoding: TextEncoding,
  ) {}

  get byteLength(): number {
    return this.chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  }

  decode(): string {
    const decoder = new ChunkDecoder(this.encoding);
    for (const chunk of this.chunks) decoder.write(chunk);
    return decoder.end();
  }

  toJSON(): string {
    return this.decode();
  }
}

/** Writes the frames of one answer; resolves with false if the pipe failed or closed on the way. */
export async function writeBulk(pipe: Writable, capabilityId: number, text: UndecodedText): Promise<boolean> {
  for (const chunk of text.chunks) {
    if (pipe.destroyed || !pipe.writable) return false;
    const header = Buffer.alloc(HEADER_BYTES);
    header.writeUInt32LE(capabilityId, 0);
    header.writeUInt32LE(chunk.length, 4);
    header.writeUInt8(ENCODINGS.indexOf(text.encoding), 8);
    pipe.write(header);
    // Each chunk waits until written: the host never queues a whole answer (the ledger counts it until then).
    const written = await new Promise<boolean>((resolve) => pipe.write(chunk, (error) => resolve(!error)));
    if (!written) return false;
  }
  return true;
}

/** The sandbox process's side: decodes frames as they arrive and completes answers (see invariants). */
export class BulkReceiver {
  /** Bytes received and not yet taken as frames; joined once a whole frame is there. */
  private received: Buffer[] = [];
  private receivedBytes = 0;
  private readonly incoming = new Map<number, { decoder: ChunkDecoder; bytes: number }>();
  private readonly waiting = new Map<number, { bytes: number; complete: (text: string) => void }>();

  constructor(pipe: Readable | undefined) {
    pipe?.on("data", (data: Buffer) => this.take(data));
  }

  /** Calls `complete` with the decoded text once `bytes` bytes of answer `capabilityId` have arrived. */
  expect(capabilityId: number, bytes: number, complete: (text: string) => void): void {
    this.waiting.set(capabilityId, { bytes, complete });
    this.completeIfWhole(capabilityId);
  }

  private take(data: Buffer): void {
    this.received.push(data);
    this.receivedBytes += data.length;
    for (;;) {
      if (this.receivedBytes < HEADER_BYTES) return;
      if ((this.received[0] as Buffer).length < HEADER_BYTES) this.received = [Buffer.concat(this.received)];
      const head = this.received[0] as Buffer;
      const length = head.readUInt32LE(4);
      if (this.receivedBytes < HEADER_BYTES + length) return;
      const all = this.received.length === 1 ? head : Buffer.concat(this.received);
      const capabilityId = all.readUInt32LE(0);
      const encoding = ENCODINGS[all.readUInt8(8)] ?? "utf8";
      let entry = this.incoming.get(capabilityId);
      if (!entry) this.incoming.set(capabilityId, (entry = { decoder: new ChunkDecoder(encoding), bytes: 0 }));
      entry.decoder.write(all.subarray(HEADER_BYTES, HEADER_BYTES + length));
      entry.bytes += length;
      const rest = all.subarray(HEADER_BYTES + length);
      this.received = rest.length > 0 ? [rest] : [];
      this.receivedBytes = rest.length;
      this.completeIfWhole(capabilityId);
    }
  }

  private completeIfWhole(capabilityId: number): void {
    const waiting = this.waiting.get(capabilityId);
    const entry = this.incoming.get(capabilityId);
    if (!waiting || (waiting.bytes > 0 && (entry?.bytes ?? 0) < waiting.bytes)) return;
    this.waiting.delete(capabilityId);
    this.incoming.delete(capabilityId);
    waiting.complete(entry ? entry.decoder.end() : "");
  }
}

/** UTF-8 or base64 text of bytes that arrive in chunks, each decoded as it comes. */
export class ChunkDecoder {
  private readonly parts: string[] = [];
  private readonly utf8: StringDecoder | undefined;
  /** base64: bytes left over past the last multiple of 3 (each 3 bytes encode alone). */
  private carry = Buffer.alloc(0);

  constructor(encoding: TextEncoding) {
    if (encoding === "utf8") this.utf8 = new StringDecoder("utf8");
  }

  write(bytes: Buffer): void {
    if (this.utf8) {
      this.parts.push(this.utf8.write(bytes));
      return;
    }
    const all = this.carry.length > 0 ? Buffer.concat([this.carry, bytes]) : bytes;
    const whole = all.length - (all.length % 3);
    this.parts.push(all.subarray(0, whole).toString("base64"));
    this.carry = Buffer.from(all.subarray(whole));
  }

  end(): string {
    this.parts.push(this.utf8 ? this.utf8.end() : this.carry.toString("base64"));
    return this.parts.join("");
  }
}
