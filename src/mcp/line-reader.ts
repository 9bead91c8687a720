/**
 * Splits MCP's stdio stream (one JSON-RPC message per line, revision 2025-11-25) into lines, holding at
 * most `maxLineBytes` of any one line. A longer line is not kept: its bytes are counted and dropped up to
 * its newline, and only its first and last few KiB are kept, so that the server can still answer it (the
 * id of a request sits at one end of the text in the clients' usual serialisations). The session goes on
 * with the next line.
 *
 * Cost: each byte is scanned once for a newline and copied at most once into its line (the SDK's own
 * stdio reader concatenated its whole buffer on every chunk, quadratic for a line of tens of MiB).
 */
export type ReadLine =
  | { kind: "line"; text: string }
  | {
      kind: "oversize";
      /** The line's whole length, bytes. */
      bytes: number;
      /** Its first and last `EDGE_BYTES` (fewer for a short line), as text. */
      head: string;
      tail: string;
    };

/** How much of each end of an oversize line is kept. */
export const EDGE_BYTES = 64 * 1024;

const NEWLINE = 0x0a;

export class BoundedLineReader {
  /** Pieces of the current line, while it is within the limit. */
  private parts: Buffer[] = [];
  private size = 0;
  /** Set while an oversize line is being dropped. */
  private dropping: { bytes: number; head: Buffer; tail: Buffer } | undefined;

  constructor(private readonly maxLineBytes: number) {}

  /** The lines `chunk` completes, in order. */
  push(chunk: Buffer): ReadLine[] {
    const lines: ReadLine[] = [];
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline < 0 ? chunk.length : newline;
      this.take(chunk.subarray(start, end));
      if (newline < 0) break;
      lines.push(this.endLine());
      start = newline + 1;
    }
    return lines;
  }

  /** Bytes of an unfinished line held now (at most `maxLineBytes`). */
  get pendingBytes(): number {
    return this.size;
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.dropping) {
      this.dropping.bytes += piece.length;
      if (this.dropping.head.length < EDGE_BYTES) this.dropping.head = firstBytes([this.dropping.head, piece], EDGE_BYTES);
      this.dropping.tail = lastBytes(Buffer.concat([this.dropping.tail, lastBytes(piece, EDGE_BYTES)]), EDGE_BYTES);
      return;
    }
    if (this.size + piece.length <= this.maxLineBytes) {
      this.parts.push(piece);
      this.size += piece.length;
      return;
    }
    // Over the limit: keep the ends, drop the rest until the newline.
    const pieces = [...this.parts, piece];
    this.dropping = { bytes: this.size + piece.length, head: firstBytes(pieces, EDGE_BYTES), tail: lastBytesOf(pieces, EDGE_BYTES) };
    this.parts = [];
    this.size = 0;
  }

  private endLine(): ReadLine {
    if (this.dropping) {
      const { bytes, head, tail } = this.dropping;
      this.dropping = undefined;
      return { kind: "oversize", bytes, head: head.toString("utf8"), tail: withoutCarriageReturn(tail.toString("utf8")) };
    }
    const text = (this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.size)).toString("utf8");
    this.parts = [];
    this.size = 0;
    return { kind: "line", text: withoutCarriageReturn(text) };
  }
}

/** The first `count` bytes of `pieces` joined, copying no more than that. */
function firstBytes(pieces: readonly Buffer[], count: number): Buffer {
  const taken: Buffer[] = [];
  let size = 0;
  for (const piece of pieces) {
    if (size >= count) break;
    const part = piece.subarray(0, count - size);
    taken.push(part);
    size += part.length;
  }
  return Buffer.concat(taken, size);
}

/** The last `count` bytes of `pieces` joined, copying no more than that. */
function lastBytesOf(pieces: readonly Buffer[], count: number): Buffer {
  const taken: Buffer[] = [];
  let size = 0;
  for (let i = pieces.length - 1; i >= 0 && size < count; i--) {
    const part = lastBytes(pieces[i] as Buffer, count - size);
    taken.unshift(part);
    size += part.length;
  }
  return Buffer.concat(taken, size);
}

function lastBytes(buffer: Buffer, count: number): Buffer {
  return buffer.length <= count ? buffer : buffer.subarray(buffer.length - count);
}

function withoutCarriageReturn(text: string): string {
  return text.endsWith("\r") ? text.slice(0, -1) : text;
}
