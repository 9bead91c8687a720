import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { createHost } from "../../src/host.js";
import { listAnimas, resolveAnima } from "../../src/registry/animas.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

let data: TempDataDir;
beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/.keep": "", "animas/.trash/old/tools/.keep": "" });
  // A folder whose name is not valid UTF-8 (0xff): Node reads it as "bad\uFFFD".
  mkdirSync(Buffer.concat([Buffer.from(join(data.dir, "animas", "bad")), Buffer.from([0xff])]));
  // control_character_names: a tab, a newline (a forged report line), an escape, DEL, a C1 control.
  for (const name of ["tab\there", "new\nline", "esc\u001b[31m", "del\u007f", "c1\u0085"])
    mkdirSync(join(data.dir, "animas", name, "tools"), { recursive: true });
  // security_suffixed_name: its audit trail would be alice's security trail.
  mkdirSync(join(data.dir, "animas", "alice.security", "tools"), { recursive: true });
});
afterAll(() => data.cleanup());

describe("Anima folders", () => {
  it("leave out hidden folders and names that are not valid UTF-8", async () => {
    expect(await listAnimas(data.dir)).toEqual(["alice"]);
    await expect(resolveAnima(data.dir, ".trash")).rejects.toBeInstanceOf(ToolHostError);
  });

  it("control_character_names, security_suffixed_name: a folder named with a control character, or ending in .security, is no Anima", async () => {
    expect(await listAnimas(data.dir)).toEqual(["alice"]);
    for (const name of ["tab\there", "new\nline", "esc\u001b[31m", "del\u007f", "c1\u0085", "alice.security"]) {
      await expect(resolveAnima(data.dir, name)).rejects.toBeInstanceOf(ToolHostError);
    }
    // Names in any other script stay Animas' names.
    mkdirSync(join(data.dir, "animas", "さくら", "tools"), { recursive: true });
    expect(await listAnimas(data.dir)).toEqual(["alice", "さくら"]);
    rmSync(join(data.dir, "animas", "さくら"), { recursive: true });
  });

  it("do not break the audit report of every Anima", async () => {
    const host = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
    try {
      expect((await host.auditReport()).map((report) => report.anima)).toEqual(["alice"]);
    } finally {
      await host.close();
    }
  });
});
