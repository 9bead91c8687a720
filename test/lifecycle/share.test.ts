import { createHash } from "node:crypto";
import { existsSync, linkSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ToolHostError } from "../../src/errors.js";
import { type ShareOptions, shareTool } from "../../src/lifecycle/share.js";
import { checkSharedIntegrity, inspectSharedTools } from "../../src/lifecycle/share-records.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

let data: TempDataDir;
let alice: string;
let validated: string[];
const common = (): string => join(data.dir, "common_tools");
const SUCCESS = (name: string): string => `Shared tool '${name}' to common_tools/. All animas can now use it after refresh_tools.`;
const ALLOW = JSON.stringify({ tool_creation: { personal: true, shared: true } });
/** A Python tool whose comment reads, to a JavaScript scanner, as a helper import. */
const PY_TOOL = [
  '# ported from the JavaScript edition: import { helper } from "./_helper.js"',
  "def get_tool_schemas():",
  '    return [{"name": "py_tool_run", "description": "d", "input_schema": {"type": "object", "properties": {}}}]',
  "",
  "def dispatch(name, args):",
  '    return "ran"',
  "",
].join("\n");

beforeEach(() => {
  data = makeDataDir();
  alice = data.anima("alice");
  validated = [];
});
afterEach(() => data.cleanup());

function share(toolName: unknown, extra: Partial<ShareOptions> = {}, anima = "alice"): Promise<string> {
  return shareTool({
    dataDir: data.dir,
    animaDir: join(data.dir, "animas", anima),
    anima,
    toolName,
    validate: async (path) => {
      validated.push(path);
      return [];
    },
    now: () => new Date("2026-03-01T12:00:00Z"),
    ...extra,
  });
}

async function refused(promise: Promise<unknown>, type: string, message?: RegExp): Promise<ToolHostError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, "expected a refusal").toBeInstanceOf(ToolHostError);
  expect((error as ToolHostError).type).toBe(type);
  if (message) expect((error as ToolHostError).message).toMatch(message);
  expect((error as ToolHostError).message).not.toContain(data.dir);
  return error as ToolHostError;
}

/** Resolves every caller once `count` callers have arrived: both racers pass all checks before either publishes. */
function barrier(count: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  return () => {
    arrived++;
    if (arrived === count) open();
    return gate;
  };
}

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

describe("share_tool: success", () => {
  it("copies the tool byte for byte, creates common_tools/, records who shared it and leaves no temporary files", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    const source = data.write("animas/alice/tools/my_tool.ts", simpleTool("my_tool"));
    expect(existsSync(common())).toBe(false);
    expect(await share("my_tool")).toBe(SUCCESS("my_tool"));
    expect(validated).toEqual([source]);
    expect(readFileSync(join(common(), "my_tool.ts"))).toEqual(readFileSync(source));
    expect(readdirSync(common()).sort()).toEqual([".my_tool.share.json", "my_tool.ts"]);
    expect(JSON.parse(readFileSync(join(common(), ".my_tool.share.json"), "utf8"))).toEqual({
      version: 1,
      tool: "my_tool",
      file: "my_tool.ts",
      sha256: sha256(simpleTool("my_tool")),
      bytes: Buffer.byteLength(simpleTool("my_tool")),
      shared_by: "alice",
      shared_at: "2026-03-01T12:00:00.000Z",
    });
    expect(await inspectSharedTools(data.dir)).toMatchObject([{ tool: "my_tool", file: "my_tool.ts", status: "ok", sharedBy: "alice" }]);
    expect(await checkSharedIntegrity(data.dir)).toEqual([]);
  });

  it("accepts the seed's permissions.md form and any tool extension", async () => {
    data.write("animas/alice/permissions.md", "## Tool creation\n- Personal tools: yes\n- Shared tools: yes\n");
    data.write("animas/alice/tools/js_tool.mjs", simpleTool("js_tool"));
    expect(await share("js_tool")).toBe(SUCCESS("js_tool"));
    expect(existsSync(join(common(), "js_tool.mjs"))).toBe(true);
  });

  it("copies a Python tool as it copies others, never reading it as JavaScript (a Python tool is one file)", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    const source = data.write("animas/alice/tools/py_tool.py", PY_TOOL);
    expect(await share("py_tool")).toBe(SUCCESS("py_tool"));
    expect(validated).toEqual([source]);
    expect(readFileSync(join(common(), "py_tool.py"), "utf8")).toBe(PY_TOOL);
    expect(await inspectSharedTools(data.dir)).toMatchObject([{ tool: "py_tool", file: "py_tool.py", status: "ok", sharedBy: "alice" }]);
  });

  it("refuses a personal tool defined by a TypeScript and a Python file alike, and names both", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    data.write("animas/alice/tools/twin.ts", simpleTool("twin"));
    data.write("animas/alice/tools/twin.py", PY_TOOL);
    await refused(share("twin"), "InvalidArguments", /^more than one file defines tool 'twin' \(tools\/twin\.ts, tools\/twin\.py\)$/);
    expect(existsSync(common())).toBe(false);
  });
});

describe("share_tool: checks, in order", () => {
  it.each([["my-tool"], ["1tool"], ["../x"], [""], [42], ["a b"]])("refuses the name %j before anything else", async (name) => {
    await refused(share(name), "InvalidArguments");
  });

  it("gives the reference's message and suggestion for an invalid identifier", async () => {
    const error = await refused(share("my-tool"), "InvalidArguments", /^Invalid tool name 'my-tool'\. Must be a valid identifier$/);
    expect(error.hint).toBe("Use only letters, digits, and underscores");
  });

  it("refuses names that could never be tools: a leading _, a CLI command, more than 64 characters", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    for (const name of ["_helper", "list", "a".repeat(65)]) {
      data.write(`animas/alice/tools/${name}.ts`, simpleTool(name));
      await refused(share(name), "InvalidArguments");
    }
    expect(existsSync(common())).toBe(false);
  });

  it("reports a missing source before the missing permission (docs/animaworks-reference.md checklist 41)", async () => {
    const error = await refused(share("ghost"), "NotFound", /^Tool file not found: tools\/ghost\.ts/);
    expect(error.hint).toBe("Check tool name with refresh_tools first");
    rmSync(join(alice, "tools"), { recursive: true });
    await refused(share("ghost"), "NotFound");
  });

  it("without the shared permission (the default), refuses with the reference's text and writes nothing", async () => {
    data.write("animas/alice/tools/my_tool.ts", simpleTool("my_tool"));
    const error = await refused(share("my_tool"), "PermissionDenied", /^Shared tool creation is not permitted\.$/);
    // Only the operator can grant it (#35 item 4); without a permissions file, AnimaWorks' own format.
    expect([error.fault, error.hint]).toEqual(["host", 'an operator can create the Anima\'s permissions.json with {"tool_creation": {"shared": true}}']);
    data.write("animas/alice/permissions.md", "## Tool creation\n- Shared tools: no\n");
    const byMarkdown = await refused(share("my_tool"), "PermissionDenied", /^Shared tool creation is not permitted\.$/);
    expect([byMarkdown.fault, byMarkdown.hint]).toEqual([
      "host",
      'an operator can add "- Shared tools: yes" under "## Tool creation" in the Anima\'s permissions.md',
    ]);
    // AnimaWorks rewrites permissions.md into permissions.json: then only permissions.json is in force, and
    // the hint never sends the operator to edit a permissions.md that has no effect (#35 item 8).
    data.write("animas/alice/permissions.json", JSON.stringify({ tool_creation: { personal: true, shared: false } }));
    const byJson = await refused(share("my_tool"), "PermissionDenied", /^Shared tool creation is not permitted\.$/);
    expect([byJson.fault, byJson.hint]).toEqual(["host", 'an operator can set "tool_creation": {"shared": true} in the Anima\'s permissions.json']);
    expect(validated).toEqual([]); // permission is checked before validation
    expect(existsSync(common())).toBe(false);
  });

  it("a broken permissions.json fails closed", async () => {
    data.write("animas/alice/permissions.json", '{"tool_creation": {"shared": "yes"}}');
    data.write("animas/alice/tools/my_tool.ts", simpleTool("my_tool"));
    await refused(share("my_tool"), "PermissionDenied", /permissions\.json is invalid/);
    expect(existsSync(common())).toBe(false);
  });

  it("refuses a tool that imports helper files", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    data.write("animas/alice/tools/_strings.ts", "export const shout = (s: string) => s.toUpperCase();");
    data.write("animas/alice/tools/helped.ts", `import { shout } from "./_strings";\n${simpleTool("helped")}`);
    const error = await refused(
      share("helped"),
      "InvalidArguments",
      /imports helper files \("\.\/_strings" \(line 1\)\); only single-file tools can be shared/,
    );
    expect(error.hint).toContain("inline the helpers");
    expect(validated).toEqual([]);
  });

  it("refuses a tool that does not validate, listing the problems, and writes nothing", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    data.write("animas/alice/tools/my_tool.ts", simpleTool("my_tool"));
    const validate = async () => ["[secrets] line 3: a GitHub token is written in the file", "[load] no handler for my_tool_x"];
    await refused(
      share("my_tool", { validate }),
      "LoadError",
      /^Tool 'my_tool' did not pass validation: \[secrets\] line 3: .*; \[load\] no handler for my_tool_x$/,
    );
    await refused(share("my_tool", { validate: () => Promise.reject(new Error("sandbox unavailable")) }), "LoadError", /sandbox unavailable/);
    // A host too busy to check the tool (its checks' queue full) is no verdict on the tool: Busy, try again.
    const busy = new ToolHostError("Busy", "64 tool sources are waiting to be checked already", "try again in a few seconds");
    expect((await refused(share("my_tool", { validate: () => Promise.reject(busy) }), "Busy")).fault).toBe("host");
    expect((await refused(share("my_tool", { validate }), "LoadError")).fault).toBe("tool"); // its author fixes the tool
    expect(existsSync(common())).toBe(false);
  });

  it("refuses when the source changes while it is being validated (the bytes shared are the bytes checked)", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    const source = data.write("animas/alice/tools/my_tool.ts", simpleTool("my_tool"));
    const validate = async () => {
      writeFileSync(source, `${simpleTool("my_tool")}\n// swapped after the check`);
      return [];
    };
    const error = await refused(share("my_tool", { validate }), "ExecutionError", /changed while it was being shared/);
    expect(error.fault).toBe("caller"); // no tool involved: share it again (#35 item 4)
    expect(existsSync(join(common(), "my_tool.ts"))).toBe(false);
  });

  it("does not read a source that is a link (to another Anima's tool) or has other hard links", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    const bobs = data.write("animas/bob/tools/bobs.ts", simpleTool("bobs"));
    symlinkSync(bobs, join(alice, "tools", "bobs.ts"));
    // The caller's own folder holds the link: its management call is refused, no tool was involved (#35 item 4).
    expect((await refused(share("bobs"), "SandboxViolation")).fault).toBe("caller");
    linkSync(bobs, join(alice, "tools", "hard.ts"));
    await refused(share("hard"), "SandboxViolation", /hard links/);
    expect(existsSync(common())).toBe(false);
  });
});

describe("share_tool: never overwrites", () => {
  beforeEach(() => {
    data.write("animas/alice/permissions.json", ALLOW);
    data.write("animas/alice/tools/my_tool.ts", simpleTool("my_tool"));
  });

  it.each(["my_tool.ts", "my_tool.js", "my_tool.mts", "my_tool.mjs", "my_tool.py"])("an existing common_tools/%s is left untouched", async (existing) => {
    data.write(`common_tools/${existing}`, "// someone else's tool");
    const error = await refused(
      share("my_tool"),
      "InvalidArguments",
      new RegExp(`^A shared tool named 'my_tool' already exists \\(common_tools/${existing.replace(".", "\\.")}\\)$`),
    );
    expect(error.hint).toBe("Choose a different name or remove the existing tool");
    expect(readFileSync(join(common(), existing), "utf8")).toBe("// someone else's tool");
    expect(readdirSync(common())).toEqual([existing]);
  });

  it("a recorded share without its file (interrupted, or in progress) also holds the name", async () => {
    data.write("common_tools/.my_tool.share.json", "{}");
    await refused(share("my_tool"), "InvalidArguments", /another share is in progress, or one was interrupted/);
    expect(readdirSync(common())).toEqual([".my_tool.share.json"]);
  });

  it("of concurrent shares of one name (any extensions), exactly one wins and its bytes are what is shared", async () => {
    const animas = ["carol", "dave", "erin"];
    for (const anima of animas) data.write(`animas/${anima}/permissions.json`, ALLOW);
    for (let round = 0; round < 8; round++) {
      const name = `race_${round}`;
      const extensions = round % 2 === 0 ? [".ts", ".ts", ".ts"] : [".ts", ".js", ".mjs"];
      animas.forEach((anima, i) => data.write(`animas/${anima}/tools/${name}${extensions[i]}`, `${simpleTool(name)}// by ${anima}\n`));
      const beforePublish = barrier(animas.length);
      const results = await Promise.allSettled(animas.map((anima) => share(name, { beforePublish }, anima)));
      const winners = results.flatMap((result, i) => (result.status === "fulfilled" ? [animas[i] as string] : []));
      expect(winners).toHaveLength(1);
      for (const result of results) {
        if (result.status === "rejected") expect((result.reason as ToolHostError).message).toMatch(/already exists/);
      }
      const files = readdirSync(common()).filter((file) => file.startsWith(`${name}.`));
      expect(files).toHaveLength(1);
      expect(readFileSync(join(common(), files[0] as string), "utf8")).toContain(`// by ${winners[0]}`);
      expect(JSON.parse(readFileSync(join(common(), `.${name}.share.json`), "utf8")).shared_by).toBe(winners[0]);
    }
    expect(readdirSync(common()).filter((file) => file.endsWith(".tmp"))).toEqual([]);
    expect(await checkSharedIntegrity(data.dir)).toEqual([]);
  });
});

describe("shared tool integrity", () => {
  it("is empty without common_tools/", async () => {
    expect(await checkSharedIntegrity(data.dir)).toEqual([]);
  });

  it("detects a modified shared tool, one copied in without a record, a removed one and a broken record", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    for (const name of ["kept", "edited", "removed", "garbled"]) {
      data.write(`animas/alice/tools/${name}.ts`, simpleTool(name));
      await share(name);
    }
    writeFileSync(join(common(), "edited.ts"), `${simpleTool("edited")}\n// injected later`);
    rmSync(join(common(), "removed.ts"));
    writeFileSync(join(common(), ".garbled.share.json"), "{ nope");
    data.write("common_tools/dropped_in.js", simpleTool("dropped_in"));
    expect(await checkSharedIntegrity(data.dir)).toEqual([
      {
        tool: "dropped_in",
        file: "dropped_in.js",
        status: "unrecorded",
        actualSha256: sha256(simpleTool("dropped_in")),
        detail: "not shared through share_tool: no record of who shared it",
      },
      {
        tool: "edited",
        file: "edited.ts",
        status: "modified",
        sharedBy: "alice",
        sharedAt: "2026-03-01T12:00:00.000Z",
        recordedSha256: sha256(simpleTool("edited")),
        actualSha256: sha256(`${simpleTool("edited")}\n// injected later`),
        detail: "the content changed after it was shared",
      },
      { tool: "garbled", file: "garbled.ts", status: "invalid-record", actualSha256: sha256(simpleTool("garbled")), detail: "not valid JSON" },
      expect.objectContaining({ tool: "removed", file: undefined, status: "missing", sharedBy: "alice" }),
    ]);
    expect((await inspectSharedTools(data.dir)).find((status) => status.tool === "kept")?.status).toBe("ok");
  });

  it("reports a shared tool replaced by a link as unreadable instead of following it", async () => {
    data.write("animas/alice/permissions.json", ALLOW);
    data.write("animas/alice/tools/linked.ts", simpleTool("linked"));
    await share("linked");
    rmSync(join(common(), "linked.ts"));
    mkdirSync(join(data.dir, "elsewhere"));
    writeFileSync(join(data.dir, "elsewhere", "x.ts"), simpleTool("linked"));
    symlinkSync(join(data.dir, "elsewhere", "x.ts"), join(common(), "linked.ts"));
    expect(await checkSharedIntegrity(data.dir)).toMatchObject([{ tool: "linked", status: "unreadable" }]);
  });
});
