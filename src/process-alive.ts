/**
 * True when a process with this pid exists (EPERM: it exists but belongs to someone else). A module of its
 * own, with no imports: the host's start-up path uses it (audit/host-status.ts), which must not load the
 * job workers' modules (child_process, crypto) on a one-shot CLI call.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
