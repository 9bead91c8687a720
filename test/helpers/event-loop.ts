/**
 * The turns the event loop gets while `work` runs (a self-renewing setImmediate runs once a turn): how a
 * test shows that work gives a long-running host's other callers their turns, without timing anything.
 */
export async function turnsDuring<T>(work: () => Promise<T>): Promise<{ result: T; turns: number }> {
  let turns = 0;
  let ticker: NodeJS.Immediate | undefined;
  const tick = () => {
    turns++;
    ticker = setImmediate(tick);
  };
  ticker = setImmediate(tick);
  try {
    const result = await work();
    return { result, turns };
  } finally {
    clearImmediate(ticker);
  }
}
