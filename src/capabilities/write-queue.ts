/**
 * One queue per Anima directory (per process) for the fs operations that change what it holds: each runs
 * alone, in the order called, while reads go on concurrently.
 *
 * Why serialise rather than re-check: the quota is kept by deltas computed from what an operation saw
 * before it changed anything (writeFile credits the size of the file it replaces), and fs.rename's depth
 * check walks the folder it moves. Another change in between falsifies both: a rename of the file a
 * writeFile was about to replace kept its old bytes under a new name after they had been credited back
 * (10 MB stored against 1 MiB in ten racing pairs), and a folder moved into the one being measured would
 * pass the depth limit. Re-checking each at its last step (the replaced file's inode right before the
 * rename over it, the depth again after the move) would still leave a window between check and act,
 * which the kernel gives no way to close by name; one writer at a time leaves none, costs nothing to
 * reads, and only makes one Anima's own writes wait for each other.
 *
 * Invariant: an operation run here never waits for another one of the same directory (that would
 * deadlock); the map holds an entry only while some operation is queued or running.
 */
const tails = new Map<string, Promise<void>>();

export async function serialised<T>(dir: string, operation: () => Promise<T>): Promise<T> {
  const previous = tails.get(dir) ?? Promise.resolve();
  let release = (): void => {};
  const done = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => done);
  tails.set(dir, tail);
  await previous;
  try {
    return await operation();
  } finally {
    release();
    if (tails.get(dir) === tail) tails.delete(dir);
  }
}
