import { describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { runAuditEvents } from "../../src/cli/audit-events.js";
import type { ToolHost } from "../../src/host-api.js";
import { makeDataDir, waitFor } from "../helpers/data-dir.js";

/**
 * The producer side of the reply bound (src/endpoint/reply-writer.ts): `audit events`, the CLI's largest
 * output, hands its records a chunk at a time and waits on `drained()` between chunks, so a running host
 * queues a bounded part of it for a client that does not read.
 */
describe("audit events respects its caller's backpressure", () => {
  it("no-read-audit: each chunk waits until the caller has room; a caller that went away stops the export", async () => {
    const records = Array.from({ length: 5_000 }, (_, i) => ({ kind: "call", seq: i, note: "n".repeat(100) })) as unknown as AuditRecord[];
    const data = makeDataDir(); // an empty audit folder: the trails' check (after the read) finds nothing wrong
    const audit = { readWith: async <T>(_query: unknown, use: (held: AuditRecord[]) => Promise<T>) => use(records) };
    const host = { audit, config: { auditDir: data.dir } } as unknown as ToolHost;
    const events: string[] = [];
    let release: (() => void) | undefined;
    const out = {
      stdout: () => void events.push("chunk"),
      stderr: () => undefined,
      drained: () => (events.push("drained?"), new Promise<void>((resolve) => (release = resolve))),
    };
    // Left waiting for room that never comes: what a client that never reads leaves behind (until it is cut).
    void runAuditEvents(host, [], undefined, out);
    await waitFor(() => events.length > 0);
    await new Promise<void>((resolve) => setImmediate(resolve));
    // One chunk, then it waits for room: nothing more is produced until the caller drains.
    expect(events).toEqual(["chunk", "drained?"]);
    release?.();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(events).toEqual(["chunk", "drained?", "chunk", "drained?"]);
    // The caller goes away: drained rejects and the export stops there.
    const gone = { ...out, drained: () => (events.push("gone"), Promise.reject(new Error("the client went away"))) };
    events.length = 0;
    await expect(runAuditEvents(host, [], undefined, gone)).rejects.toThrow("the client went away");
    expect(events).toEqual(["chunk", "gone"]);
    data.cleanup();
  });
});
