import { monotonicMs } from "../../clock.js";
import type { ChildLink } from "./child-link.js";

/** Losses of a slot's process counted together, ms. */
export const CRASH_WINDOW_MS = 10_000;
/** Losses within `CRASH_WINDOW_MS` after which each restart waits `RESTART_BACKOFF_MS`. */
export const MAX_CRASHES_IN_WINDOW = 5;
export const RESTART_BACKOFF_MS = 1_000;
/** A retiring child still answering calls that has not ended itself by then is killed, ms. */
export const RETIRE_KILL_AFTER_MS = 5_000;

/**
 * When one slot of a cordon's pool (child-handle.ts) starts the process that replaces the one it lost,
 * and what becomes of the processes it left. A slot loses its process when it crashes, says it is
 * retiring (a process that lost an isolate's thread), breaks the protocol, or is demoted in place.
 *
 * A sandbox process is an adversary as a whole, and "retiring" is its own word: a process that says it
 * after hoarding memory, on every call, once got a replacement at once each time and lived on 5 s, six
 * processes alive under a cap of two, ≈ 2 GB. So:
 *  - Every loss but a demotion (the host's own decision) counts in the crash window: past
 *    `MAX_CRASHES_IN_WINDOW` in `CRASH_WINDOW_MS`, each restart waits `RESTART_BACKOFF_MS`, and the
 *    first such loss is reported (the security trail's record of a process that keeps ending itself).
 *  - A retiring process is killed as soon as it has no request in flight (an honest one ends itself
 *    then anyway), and after `RETIRE_KILL_AFTER_MS` at the latest.
 *  - The processes a slot left (retiring, killed and not yet reaped, demoted) live on for a while, and
 *    count toward the pool's cap on processes (sandbox-pool.ts). The replacement waits while two of the
 *    slot's retiring or killed processes are alive, or one while the pool is at its cap (each is gone
 *    within `RETIRE_KILL_AFTER_MS`): a cordon whose processes keep ending waits for them, with its own
 *    calls, and never pushes the pool past its cap by them. A demoted process finishes its calls (up to
 *    their deadlines) and is not waited for; a slot demotes in place only when it has left no process
 *    still alive, so each slot has at most one demoted process beside its own.
 */
export class SlotRestarts {
  private crashes: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** A replacement is due, and waits for room (`startIfRoom`). */
  private due = false;
  /** Processes this slot left that have not exited yet (demoted ones too). */
  private readonly leaving = new Set<ChildLink>();
  /** The demoted ones among them (not waited for: see the class). */
  private readonly demoted = new Set<ChildLink>();
  /** The retiring ones among them, killed when their last request ends. */
  private readonly retiring = new Set<ChildLink>();

  constructor(
    private readonly owner: {
      readonly closing: boolean;
      /** At least as many processes alive (or due to start) as the pool may have. */
      atProcessCap(): boolean;
      /** Told once when the restarts start to wait (see the class). */
      onBackoff(message: string): void;
    },
    /** Starts the slot's next process. */
    private readonly start: () => void,
  ) {}

  /** `child`, no longer the slot's, lives on until it exits; `demoted`: it was demoted in place. */
  left(child: ChildLink, demoted = false): void {
    if (child.exited || this.leaving.has(child)) return;
    this.leaving.add(child);
    if (demoted) this.demoted.add(child);
    child.process.once("exit", () => {
      this.leaving.delete(child);
      this.demoted.delete(child);
      this.retiring.delete(child);
      this.startIfRoom();
    });
  }

  /** `child` said it is retiring (it has left the slot); `hasCalls`: it still has requests in flight. */
  retired(child: ChildLink, hasCalls: boolean): void {
    this.left(child);
    if (!hasCalls) return child.kill();
    this.retiring.add(child);
    const killTimer = setTimeout(() => child.kill(), RETIRE_KILL_AFTER_MS);
    child.process.once("exit", () => clearTimeout(killTimer));
  }

  /** `child`'s last request in flight has ended. */
  drained(child: ChildLink): void {
    if (this.retiring.has(child)) child.kill();
  }

  /** Whether the slot may demote its running child in place now (it then leaves, and a replacement starts at once). */
  get mayDemote(): boolean {
    return this.leaving.size === 0 && !this.due && this.timer === undefined;
  }

  /** The slot lost its process (`what`: how, for the report): its replacement starts after the backoff, once there is room. */
  lost(what: string): void {
    if (this.owner.closing) return;
    const now = monotonicMs();
    this.crashes = [...this.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    const waitMs = this.crashes.length > MAX_CRASHES_IN_WINDOW ? RESTART_BACKOFF_MS : 0;
    if (this.crashes.length === MAX_CRASHES_IN_WINDOW + 1) {
      this.owner.onBackoff(
        `lost its process ${this.crashes.length} times in ${CRASH_WINDOW_MS} ms (the last ${what}); each restart now waits ${RESTART_BACKOFF_MS} ms`,
      );
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.due = true;
      this.startIfRoom();
    }, waitMs);
  }

  /**
   * Nothing more starts (the pool or its cordon closes); resolves once the processes this slot left have
   * exited, each killed after `graceMs` (an evicted cordon's next owner waits for that: sandbox-pool.ts).
   * Demoted ones are ended by their own shutdown (demoted-children.ts), which the slot's stop waits for.
   */
  stop(graceMs: number): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.due = false;
    const left = [...this.leaving].filter((child) => !child.exited && !this.demoted.has(child));
    if (left.length === 0) return Promise.resolve();
    const killTimer = setTimeout(() => left.forEach((child) => child.kill()), graceMs);
    return Promise.all(left.map((child) => new Promise((resolve) => child.process.once("exit", resolve)))).then(() => clearTimeout(killTimer));
  }

  private startIfRoom(): void {
    if (!this.due || this.owner.closing) return;
    const waitedFor = this.leaving.size - this.demoted.size;
    if (waitedFor >= 2 || (waitedFor >= 1 && this.owner.atProcessCap())) return; // an exit calls again
    this.due = false;
    this.start();
  }
}
