/**
 * Monotonic milliseconds, for deadlines and durations.
 *
 * `process.hrtime` rather than `performance.now()`: the `performance` global loads ten of Node's
 * internal modules on first use, which a one-shot CLI call (Node without its start-up snapshot, as
 * isolated-vm needs) pays for with ≈ 5 ms. Values are comparable only within one process.
 */
export function monotonicMs(): number {
  const [seconds, nanoseconds] = process.hrtime();
  return seconds * 1_000 + nanoseconds / 1_000_000;
}
