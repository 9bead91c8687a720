import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import type { LogRecord } from "../../src/host-options.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { JobService } from "../../src/jobs/service.js";
import { parseOperatorFile } from "../../src/operator-config.js";
import { parsePermissionsJson, parsePermissionsMarkdown } from "../../src/policy/permissions.js";
import { RESERVED_NAMES } from "../../src/registry/discovery.js";
import { TOOL_API_EXPORTS } from "../../src/contract/tool-api.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { REPO_ROOT } from "../helpers/tools.js";
import { typeCheckTools } from "../helpers/tool-typecheck.js";
import { CHECKED_LANGUAGES, type GuideBlock, commandLines, guideBlocks, pythonToolNameOf, readGuide, shellWords, toolNameOf } from "./guide-blocks.js";

/*
 * The tool-creator guide (docs/tool-creator.md, installed by `init` as the skill Animas learn from) must
 * never drift from the host: every code block in it is marked (see guide-blocks.ts) and checked here.
 * Its tools are type-checked against @animaworks/tool, validated with no finding, loaded and called
 * (the API template against a server on 127.0.0.1, allowed in the data dir's config.json, with its key
 * in config.json's credentials), run as a background job that is cancelled; its commands are run; its
 * permission and configuration files are read by the host's own readers.
 */
const GUIDE = readGuide();
const BLOCKS = guideBlocks(GUIDE);
const KNOWN_MARKERS = /^(tool: [A-Za-z][A-Za-z0-9_]*|python-tool: [a-z][a-z0-9_]*|fragment|cli|permissions\.json|permissions\.md|config\.json)$/;
/** The template's service address, which the test points at its own server. */
const API_BASE_LINE = 'const API_BASE = "https://api.example.com";';
const API_KEY = "guide-test-key-7f3a";

const where = (block: GuideBlock): string => `docs/tool-creator.md:${block.line}`;
const toolBlocks = (): GuideBlock[] => BLOCKS.filter((block) => toolNameOf(block) !== undefined);
const blocksMarked = (marker: string): GuideBlock[] => BLOCKS.filter((block) => block.marker === marker);
const toolSource = (name: string): string => {
  const block = toolBlocks().find((b) => toolNameOf(b) === name);
  if (!block) throw new Error(`the guide has no tool block "${name}"`);
  return block.code;
};

describe("the guide's code blocks are all accounted for", () => {
  it("marks every code block as a tool, a fragment, commands, or a file the host reads", () => {
    const unmarked = BLOCKS.filter((b) => CHECKED_LANGUAGES.has(b.lang) && (b.marker === undefined || !KNOWN_MARKERS.test(b.marker)));
    expect(unmarked.map((b) => `${where(b)} (${b.lang}): ${b.marker ?? "no marker"}`)).toEqual([]);
    // A block in a language this test does not know would escape every check.
    const unknown = BLOCKS.filter((b) => !CHECKED_LANGUAGES.has(b.lang) && b.lang !== "text");
    expect(unknown.map((b) => `${where(b)}: \`\`\`${b.lang}`)).toEqual([]);
  });

  it("is a skill file: front matter naming tool-creator, with a description", () => {
    expect(GUIDE).toMatch(/^---\nname: tool-creator\ndescription: >-\n( {2}\S.*\n)+---\n\n# tool-creator\n/);
  });

  it("has the single-schema and multi-schema templates as tools, each a TypeScript block named once", () => {
    const names = toolBlocks().map((b) => toolNameOf(b));
    expect(names).toEqual(["my_tool", "myapi"]);
    for (const block of toolBlocks()) expect(["ts", "typescript"], where(block)).toContain(block.lang);
    expect(toolSource("myapi").split(API_BASE_LINE)).toHaveLength(2);
  });
});

describe("the TypeScript blocks type-check against the published types", () => {
  it("compiles every ts block, tools and fragments, in strict mode", () => {
    const data = makeDataDir();
    try {
      const files = BLOCKS.filter((b) => b.lang === "ts" || b.lang === "typescript").map((block) => {
        const file = join(data.dir, `${toolNameOf(block) ?? `fragment_${block.line}`}.ts`);
        writeFileSync(file, block.code);
        return { file, block };
      });
      const problems = typeCheckTools(files.map((f) => f.file)).map((d) => {
        const block = files.find((f) => f.file === d.file?.fileName)?.block;
        const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
        return `${block ? `docs/tool-creator.md:${block.line + line}` : (d.file?.fileName ?? "")}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
      });
      expect(problems).toEqual([]);
    } finally {
      data.cleanup();
    }
  });
});

describe("the guide's tools in a data dir", () => {
  let data: TempDataDir;
  let server: http.Server;
  let host: ToolHost;
  let animaDir: string;
  const logs: LogRecord[] = [];
  const requests: Array<{ method: string; path: string; auth: string | undefined }> = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      requests.push({ method: req.method ?? "", path: url.pathname, auth: req.headers.authorization });
      if (req.headers.authorization !== `Bearer ${API_KEY}`) return void res.writeHead(401).end("{}");
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      req.on("end", () => {
        const json = (value: unknown) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(value));
        if (url.pathname === "/search") {
          const page = Number(url.searchParams.get("page"));
          const count = Math.min(Number(url.searchParams.get("limit")), 2);
          const results = Array.from({ length: count }, (_, i) => ({ id: `${page}-${i}`, title: `${url.searchParams.get("q")} #${i}` }));
          // A page takes a while, so that a job can be cancelled between pages.
          return void setTimeout(() => json({ results }), 15);
        }
        if (url.pathname === "/data" && req.method === "POST") return void json({ received: (JSON.parse(body) as { data: string }).data });
        res.writeHead(404).end("{}");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const permissions = blocksMarked("permissions.json")[0] as GuideBlock;
    data = makeDataDir({
      "config.json": JSON.stringify({ credentials: { myapi: { api_key: API_KEY } }, animaworks_tool: { allow_internal_hosts: ["127.0.0.1"] } }),
      // The Anima may create and share tools, with the guide's own permissions file.
      "animas/alice/permissions.json": permissions.code,
    });
    animaDir = data.anima("alice");
    for (const block of toolBlocks()) {
      const name = toolNameOf(block) as string;
      data.write(`animas/alice/tools/${name}.ts`, block.code.replace(API_BASE_LINE, `const API_BASE = "${base}";`));
    }
    for (const block of BLOCKS.filter((b) => pythonToolNameOf(b) !== undefined)) {
      data.write(`animas/alice/tools/${pythonToolNameOf(block) as string}.py`, block.code);
    }
    data.write("animas/alice/drafts/my_tool.ts", toolSource("my_tool"));
    host = createHost({ dataDir: data.dir, isolation: "in-process", onLog: (record) => logs.push(record), logLevel: "debug" });
  });
  afterAll(async () => {
    await host?.close();
    await new Promise((resolve) => server?.close(resolve));
    data?.cleanup();
  });

  const cli = async (argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const out = { stdout: [] as string[], stderr: [] as string[] };
    const code = await main(
      argv,
      { stdout: (t) => out.stdout.push(t), stderr: (t) => out.stderr.push(t) },
      { env: { ANIMAWORKS_ANIMA_DIR: animaDir }, cwd: animaDir },
    );
    return { code, stdout: out.stdout.join("\n"), stderr: out.stderr.join("\n") };
  };

  it.each(["my_tool", "myapi"])("validates %s with no error and no warning, loaded in the sandbox", async (name) => {
    const run = await cli(["validate", join(animaDir, "tools", `${name}.ts`), "--json"]);
    const report = JSON.parse(run.stdout) as { errors: number; warnings: number; loaded: boolean; findings: unknown[] };
    expect(report.findings).toEqual([]);
    expect(report).toMatchObject({ errors: 0, warnings: 0, loaded: true });
    expect(run.code).toBe(0);
  });

  it("has a Python tool that validates with no finding and answers through dispatch, its log line in the call's log", async () => {
    const python = BLOCKS.filter((b) => pythonToolNameOf(b) !== undefined);
    expect(python.map((b) => [pythonToolNameOf(b), b.lang])).toEqual([["text_tally", "python"]]);
    const run = await cli(["validate", join(animaDir, "tools", "text_tally.py"), "--json"]);
    expect(JSON.parse(run.stdout)).toMatchObject({ errors: 0, warnings: 0, loaded: true, findings: [] });
    const counted = await host.call("alice", "text_tally_count", { text: "one two\nthree" }, { structured: true });
    expect(counted).toMatchObject({ status: "ok", structured: { words: 3, lines: 2 } });
    expect(logs.some((record) => record.message === "counting 13 characters")).toBe(true);
  }, 120_000);

  it("calls the single-schema template, whose result matches its output_schema", async () => {
    const result = await host.call("alice", "my_tool_action", { param1: "hello", param2: 3 }, { structured: true });
    expect(result).toMatchObject({ status: "ok", structured: { result: "Processed hello with 3", length: 5 } });
    // Without param2 the code applies the default itself: the host does not fill in schema defaults.
    expect(await host.call("alice", "my_tool_action", { param1: "x" }, { structured: true })).toMatchObject({ structured: { result: "Processed x with 10" } });
    const refused = await host.call("alice", "my_tool_action", { param2: 3 });
    expect(refused).toMatchObject({ status: "error", error_type: "InvalidArguments", fault: "caller" });
  });

  it("calls the API template with the key from config.json and every request under its timeout", async () => {
    requests.length = 0;
    const query = await host.call("alice", "myapi_query", { query: "cats", limit: 5 }, { structured: true });
    expect(query).toMatchObject({
      status: "ok",
      structured: {
        count: 2,
        results: [
          { id: "1-0", title: "cats #0" },
          { id: "1-1", title: "cats #1" },
        ],
      },
    });
    expect(await host.call("alice", "myapi_post", { data: "note" }, { structured: true })).toMatchObject({ status: "ok", structured: { received: "note" } });
    const exported = await host.call("alice", "myapi_export", { query: "dogs", pages: 3 }, { structured: true });
    expect(exported).toMatchObject({ status: "ok", structured: { query: "dogs", pages_done: 3, complete: true } });
    expect(requests.every((r) => r.auth === `Bearer ${API_KEY}`)).toBe(true);
    expect(requests.map((r) => `${r.method} ${r.path}`)).toEqual(["GET /search", "POST /data", "GET /search", "GET /search", "GET /search"]);
  });

  it("refuses a blank query as the caller's mistake (InvalidInput), before any request", async () => {
    requests.length = 0;
    const blank = await host.call("alice", "myapi_query", { query: "  " });
    expect(blank).toMatchObject({ status: "error", error_type: "InvalidArguments", fault: "caller", message: "query must not be blank" });
    expect(requests).toEqual([]);
  });

  it("runs the long action as a background job that reports progress and stops when cancelled", async () => {
    const service = new JobService({ host, worker: { pollIntervalMs: 20, heartbeatIntervalMs: 100, idleCheckIntervalMs: 20, cancelGraceMs: 5_000 } });
    const stop = new AbortController();
    const worker = service.runWorker({ signal: stop.signal });
    try {
      const { job } = await service.submit("alice", "myapi_export", { query: "birds", pages: 1_000 });
      await waitFor(async () => ((await service.get("alice", job.id)).progress?.fraction ?? 0) > 0, 20_000);
      expect((await service.get("alice", job.id)).progress?.message).toMatch(/^page \d+ of 1000$/);
      await service.cancel("alice", job.id);
      const done = await service.wait("alice", job.id, { timeoutMs: 20_000, pollIntervalMs: 20 });
      expect(done.status).toBe("cancelled");
      // The tool saw isCancelled() and ended by itself (a forced stop would not have logged this).
      expect(logs.some((record) => /export of "birds" cancelled after \d+ of 1000 pages/.test(record.message))).toBe(true);
    } finally {
      stop.abort();
      await worker;
      await service.close();
    }
  });

  it("runs every command the guide shows, in order, as the Anima", async () => {
    const runs = blocksMarked("cli").flatMap((block) => commandLines(block).map((line) => ({ block, line })));
    expect(runs.length).toBeGreaterThan(0);
    for (const { block, line } of runs) {
      const [command, ...argv] = shellWords(line, { ANIMAWORKS_ANIMA_DIR: animaDir });
      expect(command, `${where(block)}: ${line}`).toBe("animaworks-tool");
      const run = await cli(argv);
      // stderr may carry the tools' own log lines (logger.info…), nothing else.
      const other = run.stderr.split("\n").filter((l) => l !== "" && !/^\[(debug|info)\] animaworks\.tools /.test(l));
      expect({ line, code: run.code, other }, `${where(block)}: ${line}\n${run.stdout}\n${run.stderr}`).toEqual({ line, code: 0, other: [] });
    }
  });
});

describe("the guide's files and facts, read by the host", () => {
  it("shows a permissions.json that grants personal and shared tool creation", () => {
    const blocks = blocksMarked("permissions.json");
    expect(blocks).toHaveLength(1);
    expect(parsePermissionsJson((blocks[0] as GuideBlock).code).toolCreation).toEqual({ personal: true, shared: true });
  });

  it("shows a permissions.md that this host and AnimaWorks' own migration both read as granting both", () => {
    const blocks = blocksMarked("permissions.md");
    expect(blocks).toHaveLength(1);
    const text = (blocks[0] as GuideBlock).code;
    expect(parsePermissionsMarkdown(text).toolCreation).toEqual({ personal: true, shared: true });
    // AnimaWorks (docs/animaworks-reference.md §1.4): the text must contain "Tool Creation" exactly, and
    // each line be `- personal|shared: <word>`; otherwise its migration silently keeps its defaults.
    expect(text).toContain("Tool Creation");
    const animaworksLine = /^[-*]?\s*(personal|shared)\s*:\s*(ok|yes|enabled|true)$/i;
    const granted = text.split("\n").flatMap((line) => animaworksLine.exec(line.trim())?.[1]?.toLowerCase() ?? []);
    expect(new Set(granted)).toEqual(new Set(["personal", "shared"]));
  });

  it("shows a config.json that the operator configuration reader accepts", () => {
    const blocks = blocksMarked("config.json");
    expect(blocks).toHaveLength(1);
    const file = parseOperatorFile("config.json", (blocks[0] as GuideBlock).code);
    expect(file.settings).toEqual({ allowedEnvironment: ["MYAPI_KEY"] });
    expect(JSON.parse((blocks[0] as GuideBlock).code)).toMatchObject({ credentials: { myapi: { api_key: expect.any(String) } } });
  });

  it("shows only command lines in its command patterns", () => {
    for (const block of BLOCKS.filter((b) => b.marker === "fragment" && ["bash", "sh", "shell"].includes(b.lang))) {
      for (const line of commandLines(block)) expect(line, where(block)).toMatch(/^animaworks-tool /);
    }
  });

  it("lists every value of @animaworks/tool, and only those, in its table of imports", () => {
    const table = GUIDE.slice(GUIDE.indexOf("| Import | What it does |"), GUIDE.indexOf("## Bash Invocation"));
    // First cells of the body rows; the row of types names no run-time value.
    const rows = table.split("\n").filter((row) => row.startsWith("| ") && !/^\| (---|Import|types) /.test(row));
    const firstCells = rows.map((row) => row.slice(2, row.indexOf(" | ")));
    const named = new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`(?:fs\.)?([A-Za-z_]+)/g)].map((m) => m[1] as string)));
    // fs's methods are listed as fs.readFile, writeFile…: the module exports `fs` itself.
    for (const method of ["writeFile", "appendFile", "readdir", "stat", "exists", "mkdir", "rm", "rename"]) named.delete(method);
    if (named.delete("readFile")) named.add("fs");
    expect(named).toEqual(new Set(TOOL_API_EXPORTS));
  });

  it("names exactly the command names that cannot be tool names", () => {
    const sentence = /Command names \(([^)]*)\) cannot be tool names/.exec(GUIDE.replace(/\s+/g, " "))?.[1] ?? "";
    const named = [...sentence.matchAll(/`([a-z]+)`/g)].map((m) => m[1]);
    expect(new Set(named)).toEqual(RESERVED_NAMES);
  });

  it("lists every check validate runs, and no other, in its checklist", () => {
    const source = ts.createSourceFile("findings.ts", readFileSync(join(REPO_ROOT, "src", "lifecycle", "findings.ts"), "utf8"), ts.ScriptTarget.ES2022);
    const alias = source.statements.find((s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === "CheckName");
    const checks = alias && ts.isUnionTypeNode(alias.type) ? alias.type.types.map((t) => (t as ts.LiteralTypeNode).literal.getText(source).slice(1, -1)) : [];
    const checklist = GUIDE.slice(GUIDE.indexOf("## Validation Checklist"), GUIDE.indexOf("## Security Guidelines"));
    const listed = [...checklist.matchAll(/`\[([a-z-]+)\]`/g)].map((m) => m[1]);
    expect(checks.length).toBeGreaterThan(10);
    expect(new Set(listed)).toEqual(new Set(checks));
  });
});
