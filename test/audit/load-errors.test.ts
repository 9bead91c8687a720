import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/audit/audit-log.js";
import { MemoryAuditLog } from "../../src/audit/memory-audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { MAX_LOAD_ERROR_MARKERS, loadErrorMarkerDir, recordLoadError } from "../../src/audit/load-errors.js";
import { createHost } from "../../src/host.js";
import { cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/** Declares a schema that does not belong to it: never loads. `n` makes each version (and its message) differ. */
const BROKEN = (n: number) => `export function get_tool_schemas() { return [{ name: "wrong_${n}", description: "x" }]; }\n`;

let data: TempDataDir;

beforeEach(() => {
  data = makeDataDir({ "animas/alice/tools/broken.ts": BROKEN(1), "core-tools/.keep": "" });
});
afterEach(() => data.cleanup());

/** One host per "process": its own registry, caches in memory and audit writer, over the shared data dir. */
async function loadInFreshHost(): Promise<void> {
  const host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), isolation: "in-process", onLog: () => {} });
  try {
    const result = await host.call("alice", "broken_run", {});
    expect(result).toMatchObject({ status: "error", error_type: "LoadError" });
  } finally {
    await host.close();
  }
}

async function loadErrors(): Promise<AuditRecord[]> {
  const audit = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
  try {
    return (await audit.read()).filter((record) => record.kind === "load_error");
  } finally {
    await audit.close();
  }
}

describe("load_error records", () => {
  it("are written once per broken tool version, however many processes load it", async () => {
    await loadInFreshHost();
    await loadInFreshHost();
    expect(await loadErrors()).toMatchObject([
      { kind: "load_error", anima: "alice", tool: "broken", origin: "personal", message: expect.stringContaining("wrong_1") },
    ]);

    // A new version, broken differently, is a new failure to record (once).
    data.write("animas/alice/tools/broken.ts", BROKEN(2));
    await loadInFreshHost();
    await loadInFreshHost();
    const records = await loadErrors();
    expect(records).toHaveLength(2);
    expect(records[1]).toMatchObject({ tool: "broken", message: expect.stringContaining("wrong_2") });
  });

  it("are written once by one-shot CLI calls of a broken tool", async () => {
    const runner = await cliRunner("in-process", data.dir);
    for (let i = 0; i < 3; i++) {
      const run = await runner.run(["--data-dir", data.dir, "--anima", "alice", "broken", "run"]);
      expect(run.code).toBe(6);
    }
    await runner.close();
    expect((await loadErrors()).filter((record) => "tool" in record && record.tool === "broken")).toHaveLength(1);
  });

  it("a tool that does not even build is told apart by its source", async () => {
    data.write("animas/alice/tools/broken.ts", "export function (\n");
    await loadInFreshHost();
    await loadInFreshHost();
    expect(await loadErrors()).toHaveLength(1);
    data.write("animas/alice/tools/broken.ts", "export function ( \n");
    await loadInFreshHost();
    expect(await loadErrors()).toHaveLength(2);
  });

  it("keeps its markers bounded", async () => {
    const audit = new MemoryAuditLog();
    const total = MAX_LOAD_ERROR_MARKERS + 20;
    for (let i = 0; i < total; i++) {
      recordLoadError(
        data.dir,
        audit,
        { kind: "load_error", anima: "alice", tool: `t${i}`, origin: "personal", message: "boom" },
        { path: "/nowhere", bundleHash: "h" },
      );
    }
    expect(readdirSync(loadErrorMarkerDir(data.dir)).length).toBeLessThanOrEqual(MAX_LOAD_ERROR_MARKERS);
    // The newest are still known: recording one again writes nothing.
    recordLoadError(
      data.dir,
      audit,
      { kind: "load_error", anima: "alice", tool: `t${total - 1}`, origin: "personal", message: "boom" },
      { path: "/nowhere", bundleHash: "h" },
    );
    expect(await audit.read()).toHaveLength(total);
  });
});
