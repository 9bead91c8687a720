import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatRefresh, type RefreshReport } from "../../src/lifecycle/management.js";
import { MAX_SKIPPED_FILES_NAMED, skippedFilesLines } from "../../src/lifecycle/skipped-files.js";
import { PYTHON_SKIP_REASON } from "../../src/registry/discovery.js";
import { CLI_MODES, type CliRunner, cliRunner } from "../helpers/cli-modes.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

// Python tools in a tools folder (an AnimaWorks data dir holds many) are not run by this host: `list`
// and `refresh` say which were skipped and why (issue #35 item 8), a call does not warn about them.

const ECHO = `
export function get_tool_schemas() { return [{ name: "echo_say", description: "echo" }]; }
export function dispatch() { return "said"; }
`;
const SKIPPED = `Skipped (${PYTHON_SKIP_REASON}): common_tools/web_search.py, tools/fetch_news.py`;

describe.each(CLI_MODES)("Python tool files (%s)", (mode) => {
  let data: TempDataDir;
  let runner: CliRunner;
  beforeAll(async () => {
    data = makeDataDir({
      "animas/alice/tools/echo.mjs": ECHO,
      "animas/alice/tools/fetch_news.py": "def dispatch(name, args):\n    return 'news'\n",
      "animas/alice/tools/__init__.py": "",
      "animas/alice/tools/_helpers.py": "",
      "common_tools/web_search.py": "def dispatch(name, args):\n    return 'found'\n",
    });
    runner = await cliRunner(mode, data.dir);
  });
  afterAll(async () => {
    await runner.close();
    data.cleanup();
  });
  const cli = (...argv: string[]) => runner.run(["--data-dir", data.dir, "--anima", "alice", ...argv]);

  it("are named, with why, in a closing line of list", async () => {
    const run = await cli("list");
    expect(run.code).toBe(0);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toMatch(/^echo /);
    expect(lines.at(-1)).toBe(SKIPPED);
    expect(run.stderr).toBe("");
    const json = JSON.parse((await cli("list", "--json")).stdout) as { skippedFiles: unknown };
    expect(json.skippedFiles).toEqual([
      { file: `${data.dir}/common_tools/web_search.py`, origin: "shared", reason: PYTHON_SKIP_REASON },
      { file: `${data.dir}/animas/alice/tools/fetch_news.py`, origin: "personal", reason: PYTHON_SKIP_REASON },
    ]);
  });

  it("are named in refresh's answer, and refresh still succeeds", async () => {
    const run = await cli("refresh");
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n").at(-1)).toBe(SKIPPED);
    const json = JSON.parse((await cli("refresh", "--json")).stdout) as { skippedFiles: unknown };
    expect(json.skippedFiles).toEqual([
      { file: "common_tools/web_search.py", reason: PYTHON_SKIP_REASON },
      { file: "tools/fetch_news.py", reason: PYTHON_SKIP_REASON },
    ]);
  });

  it("are not warned about on a call", async () => {
    const run = await cli("echo", "say");
    expect(run).toMatchObject({ code: 0, stdout: "said", stderr: "" });
  });
});

describe("the closing line", () => {
  it("names at most a bounded number of files, and counts the rest", () => {
    const entries = Array.from({ length: MAX_SKIPPED_FILES_NAMED + 3 }, (_, i) => ({ file: `tools/t${i}.py`, reason: PYTHON_SKIP_REASON }));
    const [line, ...rest] = skippedFilesLines(entries);
    expect(rest).toEqual([]);
    expect(line).toMatch(new RegExp(`^Skipped \\(${PYTHON_SKIP_REASON}\\): tools/t0\\.py, .*, tools/t${MAX_SKIPPED_FILES_NAMED - 1}\\.py and 3 more$`));
    expect(skippedFilesLines([])).toEqual([]);
  });

  it("ends refresh's text (what MCP refresh_tools answers too), after a tool-less data dir's", () => {
    const report: RefreshReport = {
      anima: "alice",
      loaded: [],
      changed: [],
      removed: [],
      failed: [],
      skipped: [],
      skippedFiles: [{ file: "tools/fetch_news.py", reason: PYTHON_SKIP_REASON }],
      tools: [],
    };
    expect(formatRefresh(report)).toBe(`No personal or common tools found.\nSkipped (${PYTHON_SKIP_REASON}): tools/fetch_news.py`);
  });
});
