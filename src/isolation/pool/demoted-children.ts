import type { ChildLink } from "./child-link.js";
import { isLowered, lowerRunning } from "../os/low-priority.js";
import type { Rescheduler } from "../os/rescheduler.js";

/** A demoted child that has not ended by then after its shutdown request is killed, ms. */
const SHUTDOWN_KILL_AFTER_MS = 2_000;
/** Times a process is lowered at most (where chrt or taskset keeps failing, the host stops trying). */
const MAX_LOWERINGS = 3;

/**
 * Sandbox processes demoted in place (see SandboxPool): the host measured one busy with long calls only,
 * so it keeps answering the calls it has, at the low-priority process's scheduling for good, takes no
 * new request (its slot holds a fresh process), and is shut down once its last call has ended.
 *
 * Invariants:
 *  - The scheduling is set by the host from outside (low-priority.ts), never asked of the process, and
 *    checked again from /proc by `recheck` until the process ends.
 *  - A demoted process never gets a new request: its owner has already replaced it when it comes here.
 */
export class DemotedChildren {
  /** Each demoted child: how many times it was lowered, and its end once asked for. */
  private readonly children = new Map<ChildLink, { lowerings: number; ended?: Promise<void> }>();

  /** @param rescheduler runs chrt and taskset for the lowering (the pool's one shell) */
  constructor(private readonly rescheduler: Rescheduler) {}

  /** Takes `child` over; `hasCalls`: it still has requests in flight (else it is shut down at once). */
  add(child: ChildLink, hasCalls: boolean): void {
    const entry = { lowerings: 1 };
    this.children.set(child, entry);
    child.process.once("exit", () => this.children.delete(child));
    if (child.pid !== undefined) void lowerRunning(child.pid, this.rescheduler);
    if (!hasCalls) void this.end(child);
  }

  has(child: ChildLink): boolean {
    return this.children.has(child);
  }

  /** `child`'s last request in flight has ended. */
  drained(child: ChildLink): void {
    if (this.children.has(child)) void this.end(child);
  }

  /** Lowers again each process with a thread not at low priority (one started while it was being lowered). */
  recheck(): void {
    for (const [child, entry] of this.children) {
      if (child.pid === undefined || entry.lowerings >= MAX_LOWERINGS || isLowered(child.pid)) continue;
      entry.lowerings++;
      void lowerRunning(child.pid, this.rescheduler);
    }
  }

  /** Shuts every demoted process down; resolves once all have exited. */
  async stop(): Promise<void> {
    await Promise.all([...this.children.keys()].map((child) => this.end(child)));
  }

  /** Asks `child` to shut down (once), and kills it if it has not ended `SHUTDOWN_KILL_AFTER_MS` later. */
  private end(child: ChildLink): Promise<void> {
    const entry = this.children.get(child);
    if (!entry) return Promise.resolve();
    entry.ended ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill(), SHUTDOWN_KILL_AFTER_MS);
      child.process.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      if (child.connected) child.send({ type: "shutdown" });
    });
    return entry.ended;
  }
}
