/**
 * Work waiting, by who asked for it (an Anima's name; "" for a caller acting for none): taken in turn, the
 * next item of each asker in the order they first asked (round robin), so that one asker's many items never
 * hold another's one back. Bounded in all and per asker.
 *
 * Invariants: `length` is the sum of every asker's items; an asker with no items waiting holds no entry;
 * each asker's items come out in the order they went in.
 */
export class FairQueue<T> {
  /** Items by asker; the Map's order is the turn order (an asker served moves to its end). */
  private readonly byAsker = new Map<string, T[]>();
  private count = 0;

  constructor(
    /** Items waiting in all, at most. */
    readonly maxInAll: number,
    /** Items one asker may have waiting, at most. */
    readonly maxPerAsker: number,
  ) {}

  get length(): number {
    return this.count;
  }

  /** Items `asker` has waiting. */
  waitingOf(asker: string): number {
    return this.byAsker.get(asker)?.length ?? 0;
  }

  /** Adds `item` for `asker`; returns which bound refuses it (nothing added), or undefined when added. */
  push(asker: string, item: T): "all" | "asker" | undefined {
    if (this.count >= this.maxInAll) return "all";
    const items = this.byAsker.get(asker);
    if ((items?.length ?? 0) >= this.maxPerAsker) return "asker";
    if (items) items.push(item);
    else this.byAsker.set(asker, [item]);
    this.count++;
    return undefined;
  }

  /** The next item: the first asker's first, that asker then going last. */
  shift(): T | undefined {
    const first = this.byAsker.entries().next();
    if (first.done) return undefined;
    const [asker, items] = first.value;
    const item = items.shift() as T;
    this.count--;
    this.byAsker.delete(asker);
    if (items.length > 0) this.byAsker.set(asker, items);
    return item;
  }

  /** Every item waiting, removed. */
  drain(): T[] {
    const all = [...this.byAsker.values()].flat();
    this.byAsker.clear();
    this.count = 0;
    return all;
  }
}
