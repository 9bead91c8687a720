import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * The library (`import "animaworks-tool"`: dist/src/index.js) must never load the CLI: neither its
 * modules (dist/src/cli/), nor its bundles (dist/cli/), nor the start-up stand-ins the CLI bundle uses for
 * node:fs/promises and node:child_process (dist/cli-shims/, scripts/bundle-cli.mjs), nor the launcher
 * (bin/). A library process that loaded them would run CLI code, or Node's real modules through
 * stand-ins made for a one-shot CLI call. Checked in a process of its own that uses the library broadly
 * (fixtures/library-user.mjs), with a loader hook recording every module loaded.
 */
const FIXTURES = join(PROJECT_ROOT, "test", "architecture", "fixtures");
const FORBIDDEN = [/\/dist\/src\/cli\//, /\/src\/cli\//, /\/dist\/cli\//, /\/dist\/cli-shims\//, /\/bin\/animaworks-tool/];

const NOTE_TOOL = `
export function get_tool_schemas() {
  return [{ name: "note_echo", description: "Echo text", input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
}
export function dispatch(name, args) { return "note:" + args.text; }
`;

let data: TempDataDir;
beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/note.ts": NOTE_TOOL });
});
afterAll(() => data.cleanup());

describe("the library", () => {
  it("never loads the CLI, its bundles or its start-up stand-ins", async () => {
    const loaded = join(data.dir, "loaded-modules.txt");
    await promisify(execFile)(
      process.execPath,
      ["--no-node-snapshot", "--import", join(FIXTURES, "record-loads.mjs"), join(FIXTURES, "library-user.mjs"), data.dir, loaded],
      { cwd: PROJECT_ROOT, env: { ...process.env, AWT_LOADED_MODULES: loaded }, timeout: 60_000 },
    );
    const urls = readFileSync(loaded, "utf8").split("\n").filter(Boolean);
    // It did load the library and what was used of it: the host, the management service, the MCP server.
    for (const module of ["dist/src/index.js", "dist/src/host.js", "dist/src/composition.js", "dist/src/lifecycle/management.js", "dist/src/mcp/server.js"]) {
      expect(
        urls.some((url) => url.endsWith(`/${module}`)),
        module,
      ).toBe(true);
    }
    expect(urls.filter((url) => FORBIDDEN.some((pattern) => pattern.test(url)))).toEqual([]);
  }, 90_000);
});
