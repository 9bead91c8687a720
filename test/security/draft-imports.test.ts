import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { hostFromConfig } from "../../src/host.js";
import { scratchLoader } from "../../src/lifecycle/load-check.js";
import { type LoadCheck, validateToolFile } from "../../src/lifecycle/validate.js";
import { sourceFileSeam } from "../../src/source-file.js";

/**
 * `validate` of a draft copies the draft and its imports into a scratch tools folder and loads them
 * there (lifecycle/load-check.ts). The copy once checked paths as text and then copied by path, which
 * follows links: a draft in eve's scratch folder importing `./c.json` (a link to the data dir's
 * config.json) had the secret copied in as an ordinary file, bundled, and thrown back by its top level.
 * Every file of the copy is now read by `readSourceFile` and written from those bytes.
 */
const SECRET = "OPERATOR-CREDENTIAL-DRAFT-1618033";
const LEAKING_TOP_LEVEL = (specifier: string) => `import cfg from "${specifier}";\nthrow new Error("LEAK " + JSON.stringify(cfg));\n`;
const GOOD_DRAFT = `export function get_tool_schemas() {
  return [{ name: "good_run", description: "Runs.", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() { return "ok"; }
`;

const dataDir = mkdtempSync(join(tmpdir(), "awt-draft-imports-"));
const scratch = join(dataDir, "animas", "eve", "scratch");
writeFileSync(join(dataDir, "config.json"), JSON.stringify({ credentials: { myapi: { type: "api_key", api_key: SECRET } } }));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const load = scratchLoader({ hostFactory: hostFromConfig, coreToolsDir: null, tempDir: dataDir });

function draft(files: Record<string, string>): void {
  rmSync(scratch, { recursive: true, force: true });
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(scratch, name, ".."), { recursive: true });
    writeFileSync(join(scratch, name), text);
  }
}

/** The validator still works after the refusal: a good draft beside it loads. */
async function expectNextDraftLoads(): Promise<void> {
  writeFileSync(join(scratch, "good.ts"), GOOD_DRAFT);
  expect(await load(join(scratch, "good.ts"))).toEqual({ ok: true, problems: [], schemas: ["good_run"] });
}

function expectNoSecret(result: LoadCheck): void {
  expect(JSON.stringify(result)).not.toContain(SECRET);
  expect(JSON.stringify(result)).not.toContain(dataDir);
}

describe("validate of a draft: its imports are read as the bundler reads sources", () => {
  afterEach(() => {
    sourceFileSeam.beforeOpen = undefined;
  });

  it("draft_import_symlink: an import that is a link to the data dir's config.json is refused, not copied", async () => {
    draft({ "draft.ts": LEAKING_TOP_LEVEL("./c.json") });
    symlinkSync("../../../config.json", join(scratch, "c.json"));
    const result = await load(join(scratch, "draft.ts"));
    expect(result).toEqual({
      ok: false,
      problems: [
        "c.json leaves the tool's folder: the file opened is outside it (a link, or a folder on its way replaced by a link); tools may import only files in their own folder (keep the tool's files themselves in its folder, not links to them)",
      ],
    });
    expectNoSecret(result);
    await expectNextDraftLoads();
  });

  it("draft_import_link_inside: a helper that is a link to another file of the folder loads, as the bundler loads it", async () => {
    draft({
      "lib/real.ts": "export const answer = 42;\n",
      "good.ts": `import { answer } from "./helper";\n${GOOD_DRAFT.replace('return "ok"', "return String(answer)")}`,
    });
    symlinkSync("lib/real.ts", join(scratch, "helper.ts"));
    expect(await load(join(scratch, "good.ts"))).toEqual({ ok: true, problems: [], schemas: ["good_run"] });
  });

  it("draft_swapped_folder: a folder swapped for a link after the import was found is refused as leaving the folder", async () => {
    draft({ "draft.ts": LEAKING_TOP_LEVEL("./sub/config.json"), "sub/config.json": "{}" });
    sourceFileSeam.beforeOpen = (path) => {
      if (!path.endsWith("/sub/config.json")) return;
      renameSync(join(scratch, "sub"), join(scratch, "sub.real"));
      symlinkSync("../../..", join(scratch, "sub"));
    };
    const result = await load(join(scratch, "draft.ts"));
    expect(result.ok).toBe(false);
    expect(result.problems).toEqual([expect.stringMatching(/^sub\/config\.json leaves the tool's folder: the file opened is outside it/)]);
    expectNoSecret(result);
    sourceFileSeam.beforeOpen = undefined;
    await expectNextDraftLoads();
  });

  it("draft_import_fifo: a FIFO swapped in for an import after it was found neither blocks nor is read", async () => {
    draft({ "draft.ts": LEAKING_TOP_LEVEL("./pipe.ts"), "pipe.ts": "export default 1;\n" });
    let swapped = 0;
    sourceFileSeam.beforeOpen = (path) => {
      if (!path.endsWith("/pipe.ts")) return;
      unlinkSync(path);
      execFileSync("mkfifo", [path]);
      swapped++;
    };
    // A copy that opened the FIFO would wait for a writer until the test's timeout.
    const result = await load(join(scratch, "draft.ts"));
    expect(swapped).toBe(1);
    expect(result).toEqual({ ok: false, problems: ["pipe.ts is not a regular file (it is a FIFO) (put a regular file there)"] });
    sourceFileSeam.beforeOpen = undefined;
    await expectNextDraftLoads();
  }, 15_000);

  it("validate_hard_link: a tool file that is a hard link to config.json is refused by validate without being quoted", async () => {
    draft({});
    mkdirSync(scratch, { recursive: true });
    writeFileSync(join(dataDir, "keys.ts"), `export const api_key = "${SECRET}";\n`);
    linkSync(join(dataDir, "keys.ts"), join(scratch, "keys.ts"));
    const refused = await validateToolFile(join(scratch, "keys.ts")).catch((error: unknown) => error);
    expect(refused).toMatchObject({ type: "InvalidArguments", message: expect.stringMatching(/^keys\.ts has other hard links and is refused/) });
    expect(JSON.stringify(refused) + String(refused)).not.toContain(SECRET.slice(0, 12));
    await expectNextDraftLoads();
  });
});
