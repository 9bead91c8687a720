/**
 * What a worker (or a service) remembers of the notices it could not write (notices.ts `deliverNotices`):
 * the kind of failure each Anima's notices last met, so that it warns once when an Anima's notices start
 * failing, or fail in another way, not once per job and maintenance pass (one Anima whose notice folder is
 * a link made ≈ 200 warnings a pass). A notice written for the Anima ends her failure: the next one warns
 * again. Holds one entry per Anima at most, and only while her notices fail.
 */
export class NoticeFailures {
  private readonly last = new Map<string, string>();

  /** Records that a notice of `anima` failed with `kind`; true when that is news, to be logged. */
  failed(anima: string, kind: string): boolean {
    if (this.last.get(anima) === kind) return false;
    this.last.set(anima, kind);
    return true;
  }

  /** A notice of `anima` was written: whatever failed before is over. */
  written(anima: string): void {
    this.last.delete(anima);
  }
}

/**
 * The kind of a failure to write a notice, alike for every job it hits: the error's code (`EACCES`,
 * `ENOSPC`) or type (`SandboxViolation`), not its message, which may name the job's own temp file.
 */
export function failureKind(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  const type = (error as { type?: unknown } | null)?.type;
  if (typeof type === "string") return `${type}: ${(error as Error).message}`;
  return error instanceof Error ? error.name : typeof error;
}
