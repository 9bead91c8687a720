import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";
import { JobCalls } from "../../src/capabilities/job-calls.js";
import { CapabilityService } from "../../src/capabilities/service.js";
import { CAPABILITY_NAMES } from "../../src/contract/isolate.js";
import type { CredentialSources } from "../../src/credentials/store.js";
import { UndecodedText } from "../../src/isolation/wire/bulk-channel.js";
import type { CallContext } from "../../src/isolation/wire/messages.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * The capability service dispatches over the contract's capabilities (src/contract/isolate.ts): each
 * name to the capability that takes its positional arguments; a name the contract does not declare is
 * refused, and audited.
 */
let data: TempDataDir;
let context: CallContext;
let audit: MemoryAuditLog;
let service: CapabilityService;

beforeEach(() => {
  data = makeDataDir();
  context = { anima: "alice", animaDir: data.anima("alice"), tool: "probe" };
  audit = new MemoryAuditLog();
  service = new CapabilityService({ credentials: {} as CredentialSources, audit, log: () => {} });
});
afterEach(() => data.cleanup());

const invoke = (name: string, args: unknown[], ctx: CallContext = context) => service.invoke(ctx, name, JSON.stringify(args));

describe("capability service: dispatch over the contract's capabilities", () => {
  it.each([
    ["a name the contract does not declare", "fs.chmod"],
    ["an fs-like name", "fs.constructor"],
    ["a job name the contract does not declare", "job.kill"],
    ["a prototype key", "__proto__"],
    ["an empty name", ""],
  ])("refuses %s as InvalidArguments, audited as an error", async (_label, name) => {
    const reply = await invoke(name, ["notes.txt"]);
    expect(reply).toEqual({ ok: false, error: { type: "InvalidArguments", fault: "tool", message: `unknown capability ${name}` } });
    const records = await audit.read();
    expect(records).toEqual([
      expect.objectContaining({
        kind: "capability",
        anima: "alice",
        tool: "probe",
        operation: name,
        outcome: "error",
        reason: `InvalidArguments: unknown capability ${name}`,
      }),
    ]);
  });

  it("refuses arguments that are not a JSON array, before looking at the name", async () => {
    expect(await service.invoke(context, "fs.stat", "{")).toEqual({
      ok: false,
      error: { type: "InvalidArguments", fault: "tool", message: "fs.stat: the arguments are not valid JSON" },
    });
    expect(await service.invoke(context, "fs.stat", '{"0":"."}')).toEqual({
      ok: false,
      error: { type: "InvalidArguments", fault: "tool", message: "fs.stat: malformed call" },
    });
  });

  it("runs each fs capability with its positional arguments, in the calling Anima's directory", async () => {
    const dir = context.animaDir;
    expect(await invoke("fs.writeFile", ["a.txt", "aGk=", "base64"])).toEqual({ ok: true, value: null });
    expect(await invoke("fs.appendFile", ["a.txt", "!", "utf8"])).toEqual({ ok: true, value: null });
    const read = await invoke("fs.readFile", ["a.txt", "utf8"]);
    expect(read.ok && read.value instanceof UndecodedText ? read.value.decode() : read).toBe("hi!");
    expect(await invoke("fs.exists", ["a.txt"])).toEqual({ ok: true, value: true });
    expect(await invoke("fs.stat", ["a.txt"])).toEqual({ ok: true, value: expect.objectContaining({ type: "file", size: 3 }) });
    expect(await invoke("fs.mkdir", ["d/e", true])).toEqual({ ok: true, value: null });
    expect(await invoke("fs.rename", ["a.txt", "d/b.txt"])).toEqual({ ok: true, value: null });
    const listing = await invoke("fs.readdir", ["d"]);
    expect(listing.ok && (listing.value as Array<{ name: string }>).map((entry) => entry.name).sort()).toEqual(["b.txt", "e"]);
    expect(await invoke("fs.rm", ["d", true])).toEqual({ ok: true, value: null });
    expect(await invoke("fs.exists", ["d"])).toEqual({ ok: true, value: false });
    // Confined to the Anima's directory: the arguments are the tool's, checked by the capability.
    writeFileSync(join(data.anima("bob"), "secret.txt"), "no");
    expect(await invoke("fs.readFile", ["../bob/secret.txt", "utf8"])).toMatchObject({ ok: false, error: { type: "SandboxViolation" } });
    expect(await invoke("fs.exists", ["secret.txt"])).toEqual({ ok: true, value: false });
    expect(dir).toBe(context.animaDir);
  });

  it("answers job capabilities outside a job: progress does nothing, nothing is cancelled", async () => {
    expect(await invoke("job.progress", [0.5, "half"])).toEqual({ ok: true, value: null });
    expect(await invoke("job.cancelled", [])).toEqual({ ok: true, value: false });
    expect(await audit.read()).toEqual([]); // recorded on the job, not in the audit trail
  });

  it("reaches the calling job only, through the host's context", async () => {
    const jobs = new JobCalls();
    const progress: Array<[number, string]> = [];
    let cancelled = false;
    jobs.register("job-1", "alice", { reportProgress: (fraction, message) => progress.push([fraction, message]), cancelled: () => cancelled });
    service = new CapabilityService({ credentials: {} as CredentialSources, audit, log: () => {}, jobs });
    const inJob = { ...context, jobId: "job-1" };
    expect(await invoke("job.progress", [0.25, "quarter"], inJob)).toEqual({ ok: true, value: null });
    expect(await invoke("job.progress", [2, "too far"], inJob)).toMatchObject({ ok: false, error: { type: "InvalidArguments" } });
    cancelled = true;
    expect(await invoke("job.cancelled", [], inJob)).toEqual({ ok: true, value: true });
    expect(await invoke("job.cancelled", [], { ...context, anima: "bob", jobId: "job-1" })).toEqual({ ok: true, value: false });
    expect(progress).toEqual([[0.25, "quarter"]]);
  });

  it("refuses fetch in a host without a network", async () => {
    expect(await invoke("fetch", ["https://example.com/", { responseType: "text" }])).toEqual({
      ok: false,
      error: { type: "PermissionDenied", fault: "host", message: "fetch is not available in this host" },
    });
  });

  it("knows every capability the contract declares", async () => {
    // None of them is refused as unknown (their arguments are wrong here, which the capability says).
    for (const name of CAPABILITY_NAMES) {
      const reply = await invoke(name, []);
      expect(reply.ok ? "" : reply.error.message, name).not.toBe(`unknown capability ${name}`);
    }
  });
});
