/**
 * A response body as it arrives, copied into blocks the host allocates itself (net-request.ts). What the
 * body holds is then the blocks and nothing else, whatever the chunks it came in: kept as they came, a
 * body sent a byte per read held a Buffer object and its allocation per byte (≈ 200 bytes each, all
 * uncounted), and a chunk may be a view that keeps a larger allocation alive. Copying a chunk costs a
 * memcpy; the chunk is garbage after.
 *
 * Invariants: `allocatedBytes` is the size of every block held; `allocatedWith(n)` is what it becomes
 * when `n` bytes are added, so the caller charges a block before it exists; blocks are allocated outside
 * Node's shared pool (`allocUnsafeSlow`), so a block keeps no other body's bytes alive, and only the
 * filled part of a block is ever read.
 */

/** Smallest block, bytes: a small body holds little more than itself. */
const FIRST_BLOCK_BYTES = 16 * 1024;
/** Largest block grown into when the size of the body is not known, bytes: few blocks, little slack. */
const MAX_GROWN_BLOCK_BYTES = 1024 * 1024;

export class BodyBlocks {
  private blocks: Buffer[] = [];
  /** Bytes filled in the last block. */
  private lastFilled = 0;
  /** Body bytes copied in. */
  bytes = 0;
  /** Bytes of every block held. */
  allocatedBytes = 0;

  /**
   * `capBytes`: the largest body (no block grows past it by more than one chunk); `declaredBytes`: the
   * size the server declared for the bytes as they arrive (Content-Length, undecoded bodies only): the
   * first block is made that large, so that a body of the declared size is one block, never joined.
   */
  constructor(
    private readonly capBytes: number,
    private readonly declaredBytes: number | undefined,
  ) {}

  /** What the blocks hold once `chunkBytes` more were added: charge it before `add`. */
  allocatedWith(chunkBytes: number): number {
    const room = this.room();
    return chunkBytes <= room ? this.allocatedBytes : this.allocatedBytes + this.nextBlockBytes(chunkBytes - room);
  }

  add(chunk: Buffer): void {
    const last = this.blocks.at(-1);
    const copied = last ? chunk.copy(last, this.lastFilled, 0, Math.min(this.room(), chunk.length)) : 0;
    this.lastFilled += copied;
    if (copied < chunk.length) {
      const block = Buffer.allocUnsafeSlow(this.nextBlockBytes(chunk.length - copied));
      this.blocks.push(block);
      this.allocatedBytes += block.length;
      this.lastFilled = chunk.copy(block, 0, copied);
    }
    this.bytes += chunk.length;
  }

  /** What joining holds at its height: the blocks and, when there are several, their joined copy. */
  get bytesWhileJoining(): number {
    return this.blocks.length > 1 ? this.allocatedBytes + this.bytes : this.allocatedBytes;
  }

  /**
   * The body in one buffer (a view of the only block, else a copy of all) and what that buffer holds;
   * the blocks are let go.
   */
  join(): { body: Buffer; heldBytes: number } {
    const blocks = this.blocks;
    this.blocks = [];
    if (blocks.length <= 1) {
      const only = blocks[0] ?? Buffer.alloc(0);
      return { body: only.subarray(0, this.bytes), heldBytes: only.length };
    }
    const body = Buffer.allocUnsafeSlow(this.bytes);
    let offset = 0;
    for (const [index, block] of blocks.entries()) offset += block.copy(body, offset, 0, index === blocks.length - 1 ? this.lastFilled : block.length);
    return { body, heldBytes: body.length };
  }

  /** Lets the blocks go (a body that failed). */
  clear(): void {
    this.blocks = [];
    this.allocatedBytes = 0;
  }

  private room(): number {
    const last = this.blocks.at(-1);
    return last ? last.length - this.lastFilled : 0;
  }

  private nextBlockBytes(neededBytes: number): number {
    const declared = this.declaredBytes;
    if (this.blocks.length === 0 && declared !== undefined && declared >= neededBytes && declared <= this.capBytes) return declared;
    // Grows with the body (16 KiB, then as much as it holds, up to 1 MiB), never past the cap: every
    // block but the last is full, so the cap's room not yet allocated is `capBytes - allocatedBytes`.
    const grown = Math.min(MAX_GROWN_BLOCK_BYTES, Math.max(FIRST_BLOCK_BYTES, this.allocatedBytes));
    return Math.max(neededBytes, Math.min(grown, this.capBytes - this.allocatedBytes));
  }
}
