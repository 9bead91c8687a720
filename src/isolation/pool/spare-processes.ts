import { ChildLink, type ProcessGuard } from "./child-link.js";
import type { LiveChildren } from "./live-children.js";
import type { SandboxChildSpec } from "./child-spawn.js";
import { decodeFromSandbox } from "../wire/decode.js";

/**
 * Blank sandbox processes, started and ready before any cordon needs them, so that the first call of a
 * new Anima (whose cordon has no process yet) does not wait for a process to start.
 *
 * Invariants:
 *  - A spare has run no tool and served no request: it is handed to one cordon's slot (`take`), which
 *    keeps it for its whole life. A spare is never handed back.
 *  - A spare that says anything but its one `ready`, or breaks its channel, is killed and reported.
 *  - A spare that ends before it was ready is not replaced at once (a launch that keeps failing must not
 *    become a loop of starts): the next `take` or `fill` starts another.
 */
/** How long after a spare is taken its replacement starts, ms (see `take`). */
export const SPARE_REFILL_DELAY_MS = 300;

export class SpareProcesses {
  private readonly ready: ChildLink[] = [];
  private readonly starting = new Set<ChildLink>();
  private closed = false;

  /**
   * @param count spares kept ready
   * @param spec how each is started (the spec of a normal-priority cordon process)
   * @param mayStart whether another process may start now (the pool's cap on live processes)
   */
  constructor(
    private readonly count: number,
    private readonly spec: SandboxChildSpec,
    private readonly mayStart: () => boolean,
    private readonly onStderr: (message: string) => void,
    private readonly onViolation: (message: string) => void,
    private readonly guard: ProcessGuard | undefined,
    /** The pool's record of every process it started (live-children.ts): closing ends those still starting. */
    private readonly live: LiveChildren,
  ) {}

  /** Live spare processes, ready or starting. */
  get size(): number {
    return this.ready.length + this.starting.size;
  }

  /** Spares started and ready to be taken. */
  get readyCount(): number {
    return this.ready.length;
  }

  pids(): number[] {
    return [...this.ready, ...this.starting].map((link) => link.pid).filter((pid): pid is number => pid !== undefined);
  }

  /** Starts spares up to `count`, as far as the pool's cap allows. */
  fill(): void {
    while (!this.closed && this.size < this.count && this.mayStart()) this.startOne();
  }

  /**
   * A spare, now the caller's (its messages go to the handlers it rebinds): a ready one, else one still
   * starting (its `ready` then goes to the caller; it has run nothing either way), or undefined. Taking
   * one that is starting rather than starting another beside it keeps the pool within its cap.
   */
  take(): { link: ChildLink; ready: boolean } | undefined {
    let link = this.ready.shift();
    while (link && !link.connected) link = this.ready.shift();
    let ready = link !== undefined;
    if (!link) {
      link = [...this.starting].find((starting) => starting.connected);
      if (link) this.starting.delete(link);
      ready = false;
    }
    // The next spare starts a moment later: its start (a process, a warm-up isolate) would otherwise
    // take a core from the very call that took this one, on a machine with few.
    clearTimeout(this.refill);
    this.refill = setTimeout(() => this.fill(), SPARE_REFILL_DELAY_MS).unref();
    return link && { link, ready };
  }

  private refill: NodeJS.Timeout | undefined;

  /** Ends every spare (killed at once: none has served anything); the pool waits for them through `live`. */
  close(): void {
    this.closed = true;
    clearTimeout(this.refill);
    for (const link of [...this.ready, ...this.starting]) link.kill();
    this.ready.length = 0;
    this.starting.clear();
  }

  private startOne(): void {
    const link = new ChildLink(
      this.spec,
      {
        onMessage: (self, raw) => {
          const message = decodeFromSandbox(raw);
          if (message?.type === "ready" && this.starting.delete(self)) {
            this.ready.push(self);
            return;
          }
          this.refuse(self, message?.type === "ready" ? "said it was ready twice" : "sent a message before it served anything");
        },
        onBroken: (self, reason) => this.refuse(self, reason),
      },
      this.onStderr,
      this.guard,
    );
    this.starting.add(link);
    this.live.add(link);
    link.process.once("exit", () => this.drop(link));
  }

  /** Forgets `link` (ended, or refused); true when it was still a spare (not yet adopted). */
  private drop(link: ChildLink): boolean {
    const index = this.ready.indexOf(link);
    if (index >= 0) this.ready.splice(index, 1);
    return this.starting.delete(link) || index >= 0;
  }

  private refuse(link: ChildLink, what: string): void {
    if (!this.drop(link)) return; // adopted: its slot judges it now
    try {
      this.onViolation(`spare sandbox process ${link.pid ?? "?"} ${what}; it was stopped`);
    } catch {
      // reporting must not stop the kill
    }
    link.kill();
  }
}
