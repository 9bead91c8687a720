/**
 * A map bounded by the size of its values (in a unit the caller picks: bytes, characters), least recently
 * used dropped first. For caches kept per bundle (bundle text in sandbox processes and job workers, V8 code
 * cache): their size is what costs memory, not their count.
 * `get` makes an entry the most recent; an entry larger than the whole bound is not kept.
 */
export class ByteLru<V> {
  private readonly entries = new Map<string, { value: V; bytes: number }>();
  private total = 0;

  constructor(private readonly maxBytes: number) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  set(key: string, value: V, bytes: number): void {
    this.delete(key);
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { value, bytes });
    this.total += bytes;
    while (this.total > this.maxBytes) this.delete(this.entries.keys().next().value as string);
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.total -= entry.bytes;
  }

  get bytes(): number {
    return this.total;
  }

  get size(): number {
    return this.entries.size;
  }
}
