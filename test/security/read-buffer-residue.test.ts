import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { HOSTILE_DIR, expectOk } from "./harness.js";

/**
 * Reused read buffers (bulk-channel.ts ReadBufferPool) never show one read's bytes to another: eve keeps
 * reads of a file that fills 62 % of a buffer (kept as a view of it, not copied) in flight while alice
 * reads her secret, which fills whole buffers, over the same sandbox process's bulk pipe and as inline
 * answers. Every text eve gets is her own file exactly; every text alice gets is hers.
 */
const ALICE_READS = `
import { fs } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "secret_read", description: "reads the secret", input_schema: { type: "object", properties: {} } }]; }
export async function dispatch() {
  let bad = 0;
  for (let round = 0; round < 10; round++) {
    const texts = await Promise.all(Array.from({ length: 8 }, () => fs.readFile("secret.txt")));
    for (const text of texts) if (text.length !== 3 * 256 * 1024 || text.replace(/S/g, "").length > 0) bad++;
  }
  return { bad };
}`;

for (const isolation of ["process", "in-process"] as const) {
  describe(`read buffer residue (${isolation} isolation)`, () => {
    let data: TempDataDir | undefined;
    let host: ToolHost | undefined;
    afterEach(async () => {
      await host?.close();
      data?.cleanup();
    });

    it("read_buffer_residue: no read sees another read's bytes, and both Animas get their own files whole", async () => {
      data = makeDataDir({
        "animas/eve/tools/read_buffer_residue.ts": readFileSync(join(HOSTILE_DIR, "read_buffer_residue.ts"), "utf8"),
        "animas/eve/mine.txt": "e".repeat(160 * 1024),
        "animas/alice/tools/secret.ts": ALICE_READS,
        "animas/alice/secret.txt": "S".repeat(3 * 256 * 1024),
      });
      host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "no-core-tools"), isolation, sandboxProcesses: 1, timeoutMs: 20_000 });
      const [eve, alice] = await Promise.all([host.call("eve", "read_buffer_residue_run", { rounds: 10 }), host.call("alice", "secret_read", {})]);
      expect(JSON.parse(expectOk(eve))).toEqual({ reads: 160, foreign: 0, sample: "" });
      expect(JSON.parse(expectOk(alice))).toEqual({ bad: 0 });
      // And the host keeps serving.
      expectOk(await host.call("eve", "read_buffer_residue_run", { rounds: 1 }));
    }, 30_000);
  });
}
