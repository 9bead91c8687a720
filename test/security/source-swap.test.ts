import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SourceFileRefused, readSourceFile, sourceFileSeam } from "../../src/source-file.js";
import { type Harness, assertNoLeak, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * A tool's sources are read by what was opened, not by the path that was checked (src/source-file.ts).
 * The red team won these races against a real host: a folder swapped for a link between the bundler's
 * check of an import and its read (the data dir's config.json bundled into eve's tool), the Python twin
 * (alice's .env read as eve's Python source), and a hard link to config.json bundled as a helper. Here
 * the swap is made deterministic: `sourceFileSeam.beforeOpen` runs right after the checks, right before
 * the open, which is the window the racing attacker aims for.
 */
const SECRET = "OPERATOR-CREDENTIAL-8675309";
const ENV_SECRET = "ALICE_TOKEN=alice-dotenv-271828";
const TOOL_OF = (schema: string) =>
  `export function get_tool_schemas() { return [{ name: "${schema}", description: "r", input_schema: { type: "object", properties: {} } }]; }\nexport function dispatch() { return "built"; }\n`;

describe("tool sources swapped under the host", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    sourceFileSeam.beforeOpen = undefined;
    await h?.close();
    h = undefined;
  });

  function setUp(): Harness {
    h = startHost({ mode: "process", timeoutMs: 3_000, loadTimeoutMs: 3_000, animas: ["eve", "alice"] });
    h.data.write("config.json", JSON.stringify({ credentials: { myapi: { type: "api_key", api_key: SECRET } } }));
    h.data.write("animas/alice/.env", `${ENV_SECRET}\n`);
    return h;
  }

  /** Nothing of the secrets anywhere: the result, the host's logs. */
  function expectNoSecret(host: Harness, result: unknown): void {
    const text = `${JSON.stringify(result)}\n${JSON.stringify(host.logs)}`;
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain("alice-dotenv");
  }

  it("swapped_folder: a folder swapped for a link to the data dir after the import's check is refused, not followed", async () => {
    const host = setUp();
    const tools = join(host.data.dir, "animas", "eve", "tools");
    host.install("eve", "swapped_folder");
    host.data.write("animas/eve/tools/sub/config.json", JSON.stringify({ decoy: true }));
    let swapped = 0;
    sourceFileSeam.beforeOpen = (path) => {
      if (!path.endsWith("/sub/config.json")) return;
      // The import was resolved to tools/sub/config.json, a file inside; now sub/ leads to the data dir.
      renameSync(join(tools, "sub"), join(tools, "sub.real"));
      symlinkSync("../../..", join(tools, "sub"));
      swapped++;
    };
    const result = await host.call("eve", "swapped_folder_leak");
    expect(swapped).toBe(1);
    expectError(
      result,
      "LoadError",
      /sub\/config\.json leaves the tool's folder: the file opened is outside it .*tools may import only files in their own folder/,
    );
    expectNoSecret(host, result);
    assertNoLeak(result, host.data);
    await expectHealthy(host, "eve");
    // Put back, the folder is read again (the refusal was not cached) and only the decoy is bundled.
    sourceFileSeam.beforeOpen = undefined;
    rmSync(join(tools, "sub"));
    renameSync(join(tools, "sub.real"), join(tools, "sub"));
    host.host?.refresh();
    expect(expectOk(await host.call("eve", "swapped_folder_leak"))).toBe('{"decoy":true}');
  });

  it("swapped_python_entry: a Python tool swapped for a link to another Anima's file after its check is refused", async () => {
    const host = setUp();
    const tools = join(host.data.dir, "animas", "eve", "tools");
    host.data.write("animas/eve/tools/swapped_entry.py", "x = 1\n");
    let swapped = 0;
    sourceFileSeam.beforeOpen = (path) => {
      if (!path.endsWith("/swapped_entry.py")) return;
      renameSync(join(tools, "swapped_entry.py"), join(tools, "swapped_entry.real"));
      symlinkSync("../../alice/.env", join(tools, "swapped_entry.py"));
      swapped++;
    };
    const result = await host.call("eve", "swapped_entry_run");
    expect(swapped).toBe(1);
    expectError(result, "LoadError", /swapped_entry\.py is a symbolic link \(or was replaced by one while it was read\); links are not followed/);
    expectNoSecret(host, result);
    assertNoLeak(result, host.data);
    await expectHealthy(host, "eve");
  });

  it("hard_link_helper: a hard link to config.json in the tool's folder is refused by name", async () => {
    const host = setUp();
    host.install("eve", "hard_link_helper");
    linkSync(join(host.data.dir, "config.json"), join(host.data.dir, "animas", "eve", "tools", "_cfg.json"));
    const result = await host.call("eve", "hard_link_helper_leak");
    expectError(
      result,
      "LoadError",
      /_cfg\.json has other hard links and is refused \(it could be another Anima's file\) \(copy the file into the tool's folder/,
    );
    expectNoSecret(host, result);
    assertNoLeak(result, host.data);
    await expectHealthy(host, "eve");
  });

  it("cached_input_fifo: a FIFO put in place of a cached bundle's input blocks neither the cache check nor the build", async () => {
    const host = setUp();
    host.data.write("animas/eve/tools/piped.ts", `import n from "./_helper.ts";\n${TOOL_OF("piped_run")}`.replace('"built"', "String(n)"));
    host.data.write("animas/eve/tools/_helper.ts", "export default 41;\n");
    expect(expectOk(await host.call("eve", "piped_run"))).toBe("41");
    const helper = join(host.data.dir, "animas", "eve", "tools", "_helper.ts");
    rmSync(helper);
    execFileSync("mkfifo", [helper]);
    host.host?.refresh();
    // The cache compares the changed input by content: a read that opened the FIFO would wait for a writer.
    expectError(await host.call("eve", "piped_run"), "LoadError", /"\.\/_helper\.ts" was not found/);
    await expectHealthy(host, "eve");
  }, 15_000);
});

describe("readSourceFile judges the descriptor it opened", () => {
  const root = mkdtempSync(join(tmpdir(), "awt-source-file-"));
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("a folder that is a link at read time (it was not when the path was checked) is refused: outside-folder", async () => {
    const folder = join(root, "tools");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(root, "config.json"), SECRET);
    const folderReal = realpathSync(folder);
    // The path a check approved as text, `tools/sub/config.json`; sub is now a link to the parent of tools.
    symlinkSync("..", join(folder, "sub"));
    const refused = await readSourceFile(join(folderReal, "sub", "config.json"), folderReal, 1024, "sub/config.json").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SourceFileRefused);
    expect(refused).toMatchObject({ reason: "outside-folder", type: "LoadError", fault: "tool" });
    expect(String((refused as Error).message)).not.toContain(SECRET);
    expect(String((refused as Error).message)).not.toContain(root);
  });
});
