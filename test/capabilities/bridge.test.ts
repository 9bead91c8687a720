import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LogRecord } from "../../src/host-options.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { auditText } from "../helpers/audit-files.js";

const TOOL = readFileSync(join(import.meta.dirname, "..", "fixtures", "capabilities", "notes_fs.ts"), "utf8");
const BOB_SECRET = "bob-private-value-123456";

for (const isolation of ["in-process", "process"] as const) {
  describe(`capabilities through the sandbox (${isolation})`, () => {
    let data: TempDataDir;
    let host: ToolHost;
    const logs: LogRecord[] = [];

    beforeAll(() => {
      data = makeDataDir({
        "common_tools/notes_fs.ts": TOOL,
        "animas/bob/diary.txt": BOB_SECRET,
        "config.json": JSON.stringify({ credentials: { shared_api: { api_key: "shared-key-abcdef" } } }),
        "shared/credentials.json": JSON.stringify({ TOKEN__bob: BOB_SECRET, TOKEN__alice: "alice-own-token-xyz" }),
      });
      data.anima("alice");
      data.anima("bob");
      host = createHost({ dataDir: data.dir, isolation, sandboxProcesses: 1, timeoutMs: 5_000, onLog: (r) => logs.push(r) });
    });
    afterAll(async () => {
      await host.close();
      data.cleanup();
    });

    it("reads and writes the calling Anima's own files, text and bytes", async () => {
      const written = await host.call("alice", "notes_fs_write", { path: "notes/a.txt", text: "hello" });
      expect(written.status).toBe("ok");
      expect(readFileSync(join(data.dir, "animas", "alice", "notes", "a.txt"), "utf8")).toBe("hello");
      expect(await host.call("alice", "notes_fs_read", { path: "notes/a.txt" })).toMatchObject({ status: "ok", output: "hello" });
      const bytes = await host.call("alice", "notes_fs_bytes", { path: "b.bin" });
      expect(JSON.parse((bytes as { output: string }).output)).toEqual([0, 1, 2, 250, 251, 255]);
    });

    it("binds a shared tool to the Anima that calls it, not to anyone else", async () => {
      // bob's own call sees bob's file; alice's call of the same shared tool cannot
      expect(await host.call("bob", "notes_fs_read", { path: "diary.txt" })).toMatchObject({ status: "ok", output: BOB_SECRET });
      const escaped = await host.call("alice", "notes_fs_read", { path: "../bob/diary.txt" });
      expect(escaped).toMatchObject({ status: "error", error_type: "SandboxViolation" });
      expect(JSON.stringify(escaped)).not.toContain(BOB_SECRET);
      expect(JSON.stringify(escaped)).not.toContain(data.dir);
    });

    it("lets a tool catch a denial, which keeps its type", async () => {
      const probe = await host.call("alice", "notes_fs_probe", { path: join(data.dir, "animas", "bob", "diary.txt") });
      expect(probe.status).toBe("ok");
      expect(JSON.parse((probe as { output: string }).output).caught).toBe("SandboxViolation");
    });

    it("refuses writes to the host's files with PermissionDenied", async () => {
      const result = await host.call("alice", "notes_fs_write", { path: "permissions.json", text: '{"tool_creation":{"shared":true}}' });
      expect(result).toMatchObject({ status: "error", error_type: "PermissionDenied" });
    });

    it("resolves credentials for the caller only", async () => {
      expect(await host.call("alice", "notes_fs_secret", { name: "shared_api" })).toMatchObject({ status: "ok", output: "got 17 chars" });
      expect(await host.call("alice", "notes_fs_secret", { name: "x", env: "TOKEN__alice" })).toMatchObject({ status: "ok", output: "got 19 chars" });
      const stolen = await host.call("alice", "notes_fs_secret", { name: "x", env: "TOKEN__bob" });
      expect(stolen).toMatchObject({ status: "error", error_type: "PermissionDenied" });
      const missing = await host.call("alice", "notes_fs_secret", { name: "nothing" });
      expect(missing).toMatchObject({ status: "error", error_type: "ToolConfigError" });
      expect((missing as { message: string }).message).toBe(
        "Tool 'notes_fs' requires credential 'nothing'. Set it in: config.json credentials.nothing.api_key",
      );
      expect(JSON.stringify(logs)).not.toContain(BOB_SECRET);
    });

    it("audits calls, capability uses, denials and credential lookups without values", async () => {
      await host.audit.flush();
      const records = await host.audit.read({ anima: "alice" });
      const kinds = new Set(records.map((r) => r.kind));
      expect(kinds).toEqual(new Set(["call_start", "call", "capability", "credential", "policy_change"]));
      expect(records.some((r) => r.kind === "capability" && r.outcome === "denied" && r.reason?.startsWith("SandboxViolation"))).toBe(true);
      // A denial names what was refused: the other Anima's variable, not the credential name the tool passed first.
      expect(records.some((r) => r.kind === "credential" && r.outcome === "denied" && r.name === "TOKEN__bob")).toBe(true);
      expect(records.some((r) => r.kind === "credential" && r.outcome === "ok" && r.source === "config.json")).toBe(true);
      const text = auditText(host.config.auditDir);
      expect(text).not.toContain("shared-key-abcdef");
      expect(text).not.toContain(BOB_SECRET);
      expect(text).not.toContain("alice-own-token-xyz");
    });
  });
}
