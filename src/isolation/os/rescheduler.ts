import { type ChildProcess, spawn } from "node:child_process";

/**
 * Runs chrt and taskset on running processes for the host through one long-lived shell, so that
 * lowering a sandbox process in place (low-priority.ts) never holds the host's event loop. Node's
 * spawn returns only once its child has exec'd: 9–29 ms a spawn on the 2-core VM this was measured on,
 * more as the host's RSS grows. Lowering one sandbox tree (bwrap, its init, node) took six of them,
 * 75–128 ms during which no Anima's call was answered. The shell forks them instead, on its own thread.
 *
 * Invariants:
 *  - The shell reads only what this class writes: a sequence number, a process id and a CPU list, each
 *    checked here (digits; digits and commas). It runs with an empty environment; chrt and taskset are
 *    named by absolute path.
 *  - It never keeps the host alive (its handles are unref'd), and ends when its stdin closes (`stop`,
 *    or the host's exit).
 *  - Every request settles: when the shell has run its commands, or after `RESCHEDULE_TIMEOUT_MS`.
 *    A shell that died is started again by the next request.
 */

/** How long a request waits for the shell, ms. */
const RESCHEDULE_TIMEOUT_MS = 2_000;

// $1: chrt or "", $2: taskset or "". Each line: sequence number, pid, CPU list ("-" for none).
const SCRIPT = `chrt=$1; taskset=$2
while read -r seq pid cpus; do
  if [ -n "$chrt" ]; then "$chrt" --all-tasks --idle -p 0 "$pid" >/dev/null 2>&1; fi
  if [ -n "$taskset" ] && [ "$cpus" != - ]; then "$taskset" --all-tasks -p --cpu-list "$cpus" "$pid" >/dev/null 2>&1; fi
  echo "$seq"
done`;

export class Rescheduler {
  private shell: ChildProcess | undefined;
  private nextSeq = 1;
  private readonly waiting = new Map<number, () => void>();
  private stopped = false;

  /**
   * @param chrt absolute path of chrt, or undefined where there is none (no SCHED_IDLE then)
   * @param taskset absolute path of taskset, or undefined
   */
  constructor(
    private readonly chrt: string | undefined,
    private readonly taskset: string | undefined,
  ) {}

  /** Whether there is anything to run (chrt or taskset exists). */
  get usable(): boolean {
    return this.chrt !== undefined || this.taskset !== undefined;
  }

  /** Starts the shell now (it costs a spawn; better when the host starts than when it is needed). */
  prepare(): void {
    if (this.usable && !this.stopped) this.shellUp();
  }

  /**
   * Puts every thread of process `pid` under SCHED_IDLE (chrt) and, with `cpuList`, on those CPUs only
   * (taskset). Resolves once the shell has run both, or after the timeout; never rejects.
   */
  lower(pid: number, cpuList: string | undefined): Promise<void> {
    if (!Number.isSafeInteger(pid) || pid <= 0) throw new RangeError(`not a process id: ${pid}`);
    if (cpuList !== undefined && !/^\d+(,\d+)*$/.test(cpuList)) throw new RangeError(`not a CPU list: ${cpuList}`);
    if (!this.usable || this.stopped) return Promise.resolve();
    const shell = this.shellUp();
    const seq = this.nextSeq++;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(settle, RESCHEDULE_TIMEOUT_MS);
      timer.unref();
      const waiting = this.waiting;
      function settle(): void {
        clearTimeout(timer);
        waiting.delete(seq);
        resolve();
      }
      this.waiting.set(seq, settle);
      shell.stdin?.write(`${seq} ${pid} ${cpuList ?? "-"}\n`);
    });
  }

  /** Ends the shell; later requests resolve at once. */
  stop(): void {
    this.stopped = true;
    this.shell?.stdin?.end();
    this.shell = undefined;
    for (const settle of [...this.waiting.values()]) settle();
  }

  private shellUp(): ChildProcess {
    if (this.shell && this.shell.exitCode === null && this.shell.signalCode === null) return this.shell;
    const shell = spawn("/bin/sh", ["-c", SCRIPT, "sh", this.chrt ?? "", this.taskset ?? ""], { env: {}, stdio: ["pipe", "pipe", "ignore"] });
    this.shell = shell;
    shell.unref();
    for (const stream of [shell.stdin, shell.stdout]) {
      stream?.on("error", () => {
        // the shell went away: its waiters settle on their timeouts, the next request starts another
      });
      (stream as unknown as { unref?: () => void } | null)?.unref?.();
    }
    let buffered = "";
    shell.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) this.waiting.get(Number(line))?.();
    });
    shell.on("exit", () => {
      if (this.shell === shell) this.shell = undefined;
    });
    shell.on("error", () => {
      // 'exit' follows when it started; when /bin/sh is missing, waiters settle on their timeouts
    });
    return shell;
  }
}
