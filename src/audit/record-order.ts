import type { AuditRecord } from "./audit-log.js";

/**
 * The order `read` gives records in (jsonl-audit-log.ts): oldest first across every trail read.
 *
 * Each trail is written in order, but a trail's records are not always in time order: another process's
 * batch stamped earlier can be appended after this one's, an `audit_gap` record is stamped when the gap is
 * written, and clocks step back. So the order is defined as it always was: the records of the trails read,
 * one after the other, stably sorted by `compareOldestFirst`. `RecordRuns` gives that order without sorting
 * them all in one piece: it keeps, while the trails are read, where each run of records already in order
 * starts (usually one run per trail), and merges the runs, the earlier run first among equals: the same
 * order as the stable sort, with the event loop given a turn every `MERGED_PER_TURN` records.
 */

/** Records merged between two turns of the event loop: ≈ 1–3 ms. */
const MERGED_PER_TURN = 20_000;

/**
 * Oldest first (ISO timestamps sort as text). Within one millisecond, records of one call that sit in
 * different trails (its denials are in the security trail) go start, uses, end; otherwise records are equal.
 */
export function compareOldestFirst(a: AuditRecord, b: AuditRecord): number {
  return a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : sameCall(a, b) ? rankInInstant(a) - rankInInstant(b) : 0;
}

function sameCall(a: AuditRecord, b: AuditRecord): boolean {
  return "callId" in a && "callId" in b && a.callId !== undefined && a.callId === b.callId;
}

function rankInInstant(record: AuditRecord): number {
  return record.kind === "call_start" ? 0 : record.kind === "call" ? 2 : 1;
}

/** Records as read, trail after trail, split into runs that are in order. */
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
    if (this.trailStarted || last === undefined || compareOldestFirst(last, record) > 0) this.starts.push(this.records.length);
    this.trailStarted = false;
    this.records.push(record);
  }

  /** Every record pushed, oldest first; `turn` gives the event loop a turn. */
  async merged(turn: () => Promise<void>): Promise<AuditRecord[]> {
    const records = this.records;
    if (this.starts.length <= 1) return records;
    const next = [...this.starts];
    const ends = [...this.starts.slice(1), records.length];
    const tsAt = (run: number) => (records[next[run] as number] as AuditRecord).ts;
    // The runs by their next record's time, the earlier run first among equal times.
    const heap = new RunHeap((i, j) => {
      const [a, b] = [tsAt(i), tsAt(j)];
      return a < b || (!(a > b) && i < j);
    });
    for (let run = 0; run < next.length; run++) heap.push(run);
    const out: AuditRecord[] = [];
    let sinceTurn = 0;
    while (heap.size > 0) {
      // Every run whose next record is of the earliest time left: that instant's records, run by run.
      const ts = tsAt(heap.peek());
      const instant: number[] = [];
      while (heap.size > 0 && sameTime(tsAt(heap.peek()), ts)) instant.push(heap.pop());
      instant.sort((a, b) => a - b);
      const ending = instant.map((run) => {
        let at = next[run] as number;
        while (at < (ends[run] as number) && sameTime((records[at] as AuditRecord).ts, ts)) at++;
        return at;
      });
      sinceTurn += mergeInstant(records, instant, next, ending, out);
      for (const run of instant) if ((next[run] as number) < (ends[run] as number)) heap.push(run);
      if (sinceTurn >= MERGED_PER_TURN) {
        sinceTurn = 0;
        await turn();
      }
    }
    return out;
  }
}

function sameTime(a: string, b: string): boolean {
  return !(a < b) && !(a > b);
}

/**
 * Appends to `out` the records of one instant: of each run in `runs` (in order), those from `next[run]`
 * to `ending[i]`, advancing `next`. Each run's own order holds; among the runs, the earliest whose next
 * record may go next goes: one that no record of the same call left in another run must precede (a
 * call's start, then its uses, then its end), the earliest run otherwise. This is the order of the stable
 * sort by `compareOldestFirst` wherever that comparison orders the instant's records consistently; where
 * it does not (records of several calls in one millisecond, spread over trails), the sort's order was an
 * accident of how it compared, and a call's records still go start, uses, end here. Returns the count.
 */
function mergeInstant(records: readonly AuditRecord[], runs: readonly number[], next: number[], ending: readonly number[], out: AuditRecord[]): number {
  const callOf = (record: AuditRecord) => ("callId" in record ? record.callId : undefined);
  let count = 0;
  for (const [i, run] of runs.entries()) count += (ending[i] as number) - (next[run] as number);
  if (runs.length === 1) {
    const run = runs[0] as number;
    for (let at = next[run] as number; at < (ending[0] as number); at++) out.push(records[at] as AuditRecord);
    next[run] = ending[0] as number;
    return count;
  }
  // Records of each call left, by rank (start, uses, end).
  const left = new Map<string, [number, number, number]>();
  for (const [i, run] of runs.entries()) {
    for (let at = next[run] as number; at < (ending[i] as number); at++) {
      const record = records[at] as AuditRecord;
      const call = callOf(record);
      if (call === undefined) continue;
      let ranks = left.get(call);
      if (ranks === undefined) left.set(call, (ranks = [0, 0, 0]));
      ranks[rankInInstant(record)] = (ranks[rankInInstant(record)] as number) + 1;
    }
  }
  const mustWait = (record: AuditRecord): boolean => {
    const ranks = callOf(record) === undefined ? undefined : left.get(callOf(record) as string);
    if (ranks === undefined) return false;
    for (let rank = rankInInstant(record) - 1; rank >= 0; rank--) if ((ranks[rank] as number) > 0) return true;
    return false;
  };
  // Runs before `first` have given all their records of this instant: a record is found without looking
  // at them again (many runs sharing one millisecond, each giving one record, made this quadratic).
  const spent = (i: number): boolean => (next[runs[i] as number] as number) >= (ending[i] as number);
  let first = 0;
  for (let taken = 0; taken < count; taken++) {
    while (spent(first)) first++;
    let chosen = first; // when every call waits on another (records out of place): the earliest run
    for (let i = first; i < runs.length; i++) {
      if (spent(i)) continue;
      if (!mustWait(records[next[runs[i] as number] as number] as AuditRecord)) {
        chosen = i;
        break;
      }
    }
    const run = runs[chosen] as number;
    const record = records[next[run] as number] as AuditRecord;
    next[run] = (next[run] as number) + 1;
    out.push(record);
    const call = callOf(record);
    const ranks = call === undefined ? undefined : left.get(call);
    if (ranks !== undefined) ranks[rankInInstant(record)] = (ranks[rankInInstant(record)] as number) - 1;
  }
  return count;
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
