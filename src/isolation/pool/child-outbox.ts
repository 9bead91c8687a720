import type { ToSandbox } from "../wire/messages.js";
import type { ChildLink } from "./child-link.js";

/**
 * What a sandbox process slot (child-handle.ts) sends its child, batched: messages sent in the same
 * event-loop iteration share one IPC write, so pipelined calls cost one syscall, not many.
 * (`setImmediate`, not a microtask: answers arrive one task each, and a call started from an answer
 * would otherwise go out alone.)
 */
export class ChildOutbox {
  private messages: ToSandbox[] = [];
  private child: ChildLink | undefined;

  /** Queues `message` for `child`; what was queued for another child is sent first. */
  enqueue(child: ChildLink, message: ToSandbox): void {
    if (this.child !== child) {
      this.flush();
      this.child = child;
    }
    this.messages.push(message);
    if (this.messages.length === 1) setImmediate(() => this.flush());
  }

  private flush(): void {
    const child = this.child;
    const messages = this.messages;
    this.messages = [];
    if (!child?.connected || messages.length === 0) return;
    child.channel.send(messages);
  }
}
