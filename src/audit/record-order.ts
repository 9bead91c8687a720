import type { AuditRecord } from "./audit-log.js";

/**
 * The order `read` gives records in (jsonl-audit-log.ts): oldest first across every trail read.
 *
 * Each trail is written in order, but a trail's records are not always in time order: another process's
 * batch stamped earlier can be appended after this one's, an `audit_gap` record is stamped when the gap is
 * written, and clocks step back. So the order is defined over the records of the trails read, one trail
 * after the other (their *places*):
 *  - by `ts` (ISO timestamps sort as text);
 *  - within one millisecond, each call's records together, a call where its first record of that
 *    millisecond is (a record of no call is a group of its own), and within a call start, uses, end (its
 *    denials are in the security trail), each rank in place order. Otherwise records keep their places: a
 *    trail keeps its order but where it interleaves calls in one millisecond.
 *
 * Invariant: the order of a call's records depends on that call's records alone, never on other records
 * read beside them (an order that let each call's start go before its uses, while other calls' records
 * kept their trails' order, made a call's use and its denial swap places with what stood near them). So
 * `audit events --call ID`, which parses only the lines holding the id, lists a call's records in the order
 * the whole log lists them.
 *
 * `RecordRuns` gives that order without sorting all records in one piece: it keeps, while the trails are
 * read, where each run of records already in time order starts (usually one per trail), merges the runs
 * by time, and orders each millisecond's records as above, with the event loop given a turn every
 * `MERGED_PER_TURN` records.
 */

/** Records merged between two turns of the event loop: ≈ 1–3 ms. */
const MERGED_PER_TURN = 20_000;

function rankInInstant(record: AuditRecord): number {
  return record.kind === "call_start" ? 0 : record.kind === "call" ? 2 : 1;
}

/** Records as read, trail after trail, split into runs that are in time order. */
export class RecordRuns {
  private readonly records: AuditRecord[] = [];
  /** Where each run starts in `records`. */
  private readonly starts: number[] = [];
  private trailStarted = true;

  /** Records pushed so far. */
  get size(): number {
    return this.records.length;
  }

  /** The records pushed next are another trail's: a run of their own, whatever their times. */
  startTrail(): void {
    this.trailStarted = true;
  }

  push(record: AuditRecord): void {
    const last = this.records.at(-1);
    if (this.trailStarted || last === undefined || last.ts > record.ts) this.starts.push(this.records.length);
    this.trailStarted = false;
    this.records.push(record);
  }

  /** Every record pushed, in the order above; `turn` gives the event loop a turn. */
  async merged(turn: () => Promise<void>): Promise<AuditRecord[]> {
    const records = this.records;
    const next = [...this.starts];
    const ends = [...this.starts.slice(1), records.length];
    const tsAt = (run: number) => (records[next[run] as number] as AuditRecord).ts;
    const heap = new RunHeap((i, j) => tsAt(i) < tsAt(j));
    for (let run = 0; run < next.length; run++) heap.push(run);
    const out: AuditRecord[] = [];
    let sinceTurn = 0;
    while (heap.size > 0) {
      // Every run whose next record is of the earliest time left gives that instant's records.
      const ts = tsAt(heap.peek());
      const places: number[] = [];
      const runs: number[] = [];
      while (heap.size > 0 && tsAt(heap.peek()) === ts) runs.push(heap.pop());
      for (const run of runs) {
        let at = next[run] as number;
        const end = ends[run] as number;
        while (at < end && (records[at] as AuditRecord).ts === ts) places.push(at++);
        next[run] = at;
        if (at < end) heap.push(run);
      }
      for (const place of orderInstant(records, places, runs.length > 1)) out.push(records[place] as AuditRecord);
      sinceTurn += places.length;
      if (sinceTurn >= MERGED_PER_TURN) {
        sinceTurn = 0;
        await turn();
      }
    }
    return out;
  }
}

/**
 * The places of one millisecond's records, in the order above. `mixed`: they come from several runs (else
 * they are in place order already). Linear when they are in that order already (most instants).
 */
function orderInstant(records: readonly AuditRecord[], places: number[], mixed: boolean): number[] {
  if (places.length < 2) return places;
  if (mixed) places.sort((a, b) => a - b);
  // Each record's group: the place of its call's first record here (its own place for a record of no call).
  const firstOfCall = new Map<string, number>();
  const group = new Map<number, number>();
  let ordered = true;
  let previous: { group: number; rank: number } | undefined;
  for (const place of places) {
    const record = records[place] as AuditRecord;
    const call = "callId" in record && typeof record.callId === "string" ? record.callId : undefined;
    let first = place;
    if (call !== undefined) {
      const seen = firstOfCall.get(call);
      if (seen === undefined) firstOfCall.set(call, place);
      else first = seen;
    }
    group.set(place, first);
    const rank = rankInInstant(record);
    if (previous && (first < previous.group || (first === previous.group && rank < previous.rank))) ordered = false;
    previous = { group: first, rank };
  }
  if (ordered) return places;
  return places.sort(
    (a, b) =>
      (group.get(a) as number) - (group.get(b) as number) || rankInInstant(records[a] as AuditRecord) - rankInInstant(records[b] as AuditRecord) || a - b,
  );
}

/** A binary heap of run numbers, `before` first. */
class RunHeap {
  private readonly items: number[] = [];
  constructor(private readonly before: (a: number, b: number) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): number {
    return this.items[0] as number;
  }

  push(item: number): void {
    const items = this.items;
    items.push(item);
    for (let at = items.length - 1; at > 0;) {
      const parent = (at - 1) >> 1;
      if (!this.before(items[at] as number, items[parent] as number)) return;
      [items[at], items[parent]] = [items[parent] as number, items[at] as number];
      at = parent;
    }
  }

  pop(): number {
    const items = this.items;
    const top = items[0] as number;
    const last = items.pop() as number;
    if (items.length === 0) return top;
    items[0] = last;
    for (let at = 0; ;) {
      const left = 2 * at + 1;
      if (left >= items.length) break;
      const child = left + 1 < items.length && this.before(items[left + 1] as number, items[left] as number) ? left + 1 : left;
      if (!this.before(items[child] as number, items[at] as number)) break;
      [items[at], items[child]] = [items[child] as number, items[at] as number];
      at = child;
    }
    return top;
  }
}
