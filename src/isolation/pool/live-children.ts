import type { ChildLink } from "./child-link.js";

/** How long closing waits for a killed process to be reaped before it gives up on it, ms (see `endAll`). */
export const END_WAIT_MS = 5_000;

/**
 * Every sandbox process a pool started and has not seen end, whoever holds it now: a spare starting or
 * ready, a slot's child, a retiring one finishing its calls, a demoted one, one refused and killed. A
 * process is added the moment it is spawned, before it has said anything, so that closing the pool
 * ends the processes still starting and those being retired, not only the ones the slots hold
 * (sandbox-pool.ts). The pool's own orderly stop comes first; this is what makes it certain.
 *
 * Invariant: a process leaves only once the host has reaped it (its 'exit'), so `endAll` kills only
 * pids that are still the host's children (ChildLink.kill, process-lifetime.ts).
 */
export class LiveChildren {
  private readonly links = new Set<ChildLink>();

  /** Tracks `link` until its process exits. */
  add(link: ChildLink): void {
    if (link.exited || this.links.has(link)) return;
    this.links.add(link);
    link.process.once("exit", () => this.links.delete(link));
  }

  get size(): number {
    return this.links.size;
  }

  pids(): number[] {
    return [...this.links].flatMap((link) => link.pid ?? []);
  }

  /**
   * Kills every process still alive, with its whole tree, and resolves once each has exited. A process
   * that SIGKILL does not end within `END_WAIT_MS` (stuck in the kernel) is left to the kernel rather
   * than hold the host's shutdown for good.
   */
  async endAll(): Promise<void> {
    await Promise.all(
      [...this.links].map(
        (link) =>
          new Promise<void>((resolve) => {
            if (link.exited) return resolve();
            const timer = setTimeout(resolve, END_WAIT_MS).unref();
            link.process.once("exit", () => {
              clearTimeout(timer);
              resolve();
            });
            link.kill();
          }),
      ),
    );
  }
}
