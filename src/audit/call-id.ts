/**
 * Call ids: unique on this machine without a syscall or node:crypto (which a one-shot CLI call would pay
 * ≈ 15 ms to load): the time in ms, this process's id and a counter, plus a random tail so a reused pid
 * within one millisecond of a predecessor's last call still differs. Not secret, and not meant to be.
 */
let counter = 0;

export function newCallId(): string {
  counter = (counter + 1) % 0x100000;
  const tail = Math.floor(Math.random() * 0x100000);
  return `${Date.now().toString(36)}-${process.pid.toString(36)}-${counter.toString(36)}${tail.toString(36).padStart(4, "0")}`;
}
