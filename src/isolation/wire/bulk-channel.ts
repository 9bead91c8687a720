import type { ChildProcess } from "node:child_process";
import { TextPieces } from "./text-pieces.js";
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
 * The buffers file reads go into, reused: a flood of 10 MiB reads would otherwise allocate 40 fresh
 * 256 KiB buffers per read, and their external memory makes V8 run a full mark-compact every few hundred
 * milliseconds, which every other Anima's call waits for.
 *
 * Invariant (what keeps one Anima's bytes from another's read): a buffer is in the free list only when
 * nothing else references it. The only way back is `UndecodedText.recycle()`, called once the text's bytes
 * were copied out of it (written to a pipe, whose write callback means the kernel has them, or decoded
 * into a string); it empties the text, so a later use of it fails loudly instead of reading a reused
 * buffer. A reader sees only the bytes its own read(2) wrote (views of `[0, bytesRead)`).
 */
export class ReadBufferPool {
  /** Last given back, first taken (its memory is the most likely in cache). */
  private readonly free: Buffer[] = [];
  private trimTimer: NodeJS.Timeout | undefined;
  private takenSinceTrim = false;

  /**
   * `bufferBytes`: the size of each buffer; `maxFreeBuffers`: how many idle ones are kept (the rest are
   * left to the GC); `trimAfterMs`: idle buffers are dropped once no read took one for this long, ms.
   */
  constructor(
    readonly bufferBytes: number,
    private readonly maxFreeBuffers: number,
    private readonly trimAfterMs = 30_000,
  ) {}

  take(): Buffer {
    this.takenSinceTrim = true;
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes);
  }

  /** Takes `buffer` back unless it is not one of this pool's size, the pool is full, or it is already here (it would go to two reads at once). */
  give(buffer: Buffer): void {
    if (buffer.length !== this.bufferBytes || this.free.length >= this.maxFreeBuffers || this.free.includes(buffer)) return;
    this.free.push(buffer);
    this.trimTimer ??= setTimeout(() => this.trim(), this.trimAfterMs).unref();
  }

  /** After a flood, the memory goes back: idle buffers stay only while reads keep taking them. */
  private trim(): void {
    this.trimTimer = undefined;
    if (this.takenSinceTrim) {
      this.takenSinceTrim = false;
      this.trimTimer = setTimeout(() => this.trim(), this.trimAfterMs).unref();
      return;
    }
    this.free.length = 0;
  }

  get idle(): number {
    return this.free.length;
  }
}

/** The process's read buffers: 256 KiB each, up to 64 MiB of them idle, for 30 s after the last read (benchmarks/README.md: 32 MiB was too few under a read flood). */
export const READ_BUFFERS = new ReadBufferPool(256 * 1024, 256);

/**
 * File contents read on the host and not decoded there. In a sandbox process's answer it crosses as
 * bytes (above); anywhere else it is serialised as its text (`toJSON`), so an in-process isolate gets the
 * same string it always did.
 */
export class UndecodedText {
  private parts: readonly Buffer[];
  private owned: Buffer[];
  private recycled = false;

  /** `chunks`: the bytes, in order; `owned`: the pool's buffers they are views of, handed back by `recycle`. */
  constructor(
    chunks: readonly Buffer[],
    readonly encoding: TextEncoding,
    owned: Buffer[] = [],
  ) {
    this.parts = chunks;
    this.owned = owned;
  }

  get chunks(): readonly Buffer[] {
    if (this.recycled) throw new Error("file text used after its buffers were recycled");
    return this.parts;
  }

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

  /**
   * The text decoded a chunk at a time, as it is taken (the in-process bridge hands it to the isolate in
   * pieces: isolate-bridge.ts); the buffers go back to `pool` once the last chunk is decoded or the
   * taking stops.
   */
  *decodeInPieces(pool: ReadBufferPool): Generator<string> {
    const decoder = new ChunkDecoder(this.encoding);
    try {
      for (const chunk of this.chunks) yield decoder.decodeNext(chunk);
      yield decoder.finish();
    } finally {
      this.recycle(pool);
    }
  }

  /** Hands the buffers back to `pool` once their bytes were copied out (see `ReadBufferPool`); the text is then empty for good. */
  recycle(pool: ReadBufferPool): void {
    const owned = this.owned;
    this.parts = [];
    this.owned = [];
    this.recycled = true;
    for (const buffer of owned) pool.give(buffer);
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
  private readonly waiting = new Map<number, { bytes: number; complete: (text: TextPieces) => void }>();

  constructor(pipe: Readable | undefined) {
    pipe?.on("data", (data: Buffer) => this.take(data));
  }

  /** Calls `complete` with the decoded text, in the pieces it arrived in, once `bytes` bytes of answer `capabilityId` have arrived. */
  expect(capabilityId: number, bytes: number, complete: (text: TextPieces) => void): void {
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
    waiting.complete(new TextPieces(entry ? entry.decoder.endPieces() : []));
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
    this.parts.push(this.decodeNext(bytes));
  }

  /** The text of `bytes`, as far as it can be decoded yet (the rest waits for the next chunk or `finish`). */
  decodeNext(bytes: Buffer): string {
    if (this.utf8) return this.utf8.write(bytes);
    const all = this.carry.length > 0 ? Buffer.concat([this.carry, bytes]) : bytes;
    const whole = all.length - (all.length % 3);
    this.carry = Buffer.from(all.subarray(whole));
    return all.subarray(0, whole).toString("base64");
  }

  /** The text of what `decodeNext` held back. */
  finish(): string {
    return this.utf8 ? this.utf8.end() : this.carry.toString("base64");
  }

  end(): string {
    return this.endPieces().join("");
  }

  /** The text as decoded chunk by chunk (not joined). */
  endPieces(): string[] {
    const last = this.finish();
    if (last) this.parts.push(last);
    return this.parts.filter((part) => part.length > 0);
  }
}
