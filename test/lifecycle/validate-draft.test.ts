import { mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { runLifecycleCommand } from "../../src/cli/lifecycle.js";
import { hostFromConfig } from "../../src/host.js";
import { type TestHost, simpleTool, useTestHost } from "../helpers/tools.js";

// `validate <file>` for drafts (files outside the tools folders): loaded for real in a scratch host and
// set against the installed tools of the calling Anima. Real loads: needs `npm run build`.

/** A complete draft declaring one schema (the checklist has nothing else to say about it). */
const draft = (schema: string): string => `export function get_tool_schemas() {
  return [{ name: ${JSON.stringify(schema)}, description: "Does b.", input_schema: { type: "object", properties: {} } }];
}
export function dispatch() { return "ok"; }
`;

const outside = mkdtempSync(join(tmpdir(), "awt-validate-draft-"));
afterAll(() => rmSync(outside, { recursive: true, force: true }));

let t: TestHost;
afterEach(() => t.close());

/** Runs `validate` as the CLI does, from `cwd` (default: the data dir), for `anima`. */
async function validate(argv: string[], anima: string | undefined, cwd = t.data.dir): Promise<{ code: number; lines: string[] }> {
  const stdout: string[] = [];
  const code = await runLifecycleCommand(
    t.host,
    "validate",
    argv,
    anima,
    false,
    { stdout: (text) => stdout.push(text), stderr: () => {} },
    cwd,
    hostFromConfig,
  );
  return { code, lines: stdout.join("\n").split("\n") };
}

describe("validate: a draft inside the data dir, outside any tools folder", () => {
  beforeEach(() => {
    t = useTestHost();
  });

  it("is loaded in the sandbox and checked completely: a schema without the tool's prefix fails (exit 6)", async () => {
    const path = t.data.write("animas/alice/scratch/draft.ts", draft("wrongprefix_b"));
    const bad = await validate(["scratch/draft.ts"], "alice", join(t.data.dir, "animas", "alice"));
    expect(bad.code).toBe(6);
    expect(bad.lines).toEqual([
      `${path}:2:13: error [schemas] schema "wrongprefix_b" must be named draft_<action> (the file is draft; e.g. draft_query)`,
      `${path}: 1 error, 0 warnings`,
    ]);
    t.data.write("animas/alice/scratch/draft.ts", draft("draft_b"));
    const good = await validate([path], "alice");
    expect(good).toEqual({ code: 0, lines: [`${path}: OK, no problems found (loaded in the sandbox)`] });
    expect(readdirSync(join(t.data.dir, "animas", "alice", "scratch"))).toEqual(["draft.ts"]); // nothing written beside it
  });

  it("--name sets the tool name it is checked as, and the schema prefix check follows it", async () => {
    const path = t.data.write("animas/alice/scratch/draft.ts", draft("notes_add"));
    expect((await validate([path], "alice")).lines[0]).toContain(':2:13: error [schemas] schema "notes_add" must be named draft_<action>');
    expect(await validate([path, "--name", "notes"], "alice")).toEqual({ code: 0, lines: [`${path}: OK, no problems found (loaded in the sandbox)`] });
    const renamed = await validate(["--name=other", path], "alice");
    expect(renamed.code).toBe(6);
    expect(renamed.lines[0]).toBe(`${path}:2:13: error [schemas] schema "notes_add" must be named other_<action> (the file is other; e.g. other_query)`);
    // A name that could not be a tool is an argument error (exit 2), whatever the file says.
    for (const name of ["list", "9lives", "_helper", "has-dash", ""]) {
      await expect(validate([path, "--name", name], "alice"), name).rejects.toMatchObject({ type: "InvalidArguments", exitCode: 2 });
    }
    await expect(validate([path, "--name"], "alice")).rejects.toMatchObject({ type: "InvalidArguments", message: "--name needs a tool name" });
    await expect(validate([path, "--nmae", "x"], "alice")).rejects.toMatchObject({ type: "InvalidArguments", message: "validate has no option --nmae" });
    await expect(validate([path, path], "alice")).rejects.toMatchObject({ type: "InvalidArguments", message: "validate checks one file at a time" });
  });

  it("an unknown Anima is an argument error, not a finding about the file", async () => {
    const path = t.data.write("drafts/draft.ts", draft("draft_b"));
    await expect(validate([path], "nobody")).rejects.toMatchObject({ type: "NotFound", message: 'unknown Anima "nobody"' });
  });
});

describe("validate: a draft set against the installed tools", () => {
  beforeEach(() => {
    t = useTestHost({ realCoreTools: true }); // core: text_stats, file_search, web_fetch
  });
  const outsideDraft = (file: string, source: string): string => {
    const path = join(outside, file);
    writeFileSync(path, source);
    return path;
  };

  it("named like a core tool: an error, and the draft itself is still loaded and checked", async () => {
    const path = outsideDraft("text_stats.ts", draft("text_stats_count"));
    const shadowed = await validate([path], "alice");
    expect(shadowed.code).toBe(6);
    expect(shadowed.lines).toEqual([
      `${path}: error [shadowing] a core tool named "text_stats" exists: a shared or personal tool of that name would be skipped; choose another name (rename the file, or check it with --name NAME)`,
      `${path}: 1 error, 0 warnings (loaded in the sandbox)`,
    ]);
    // Without an Anima the core tools are still there; with --name the clash follows the name.
    expect((await validate([path], undefined)).code).toBe(6);
    const renamed = await validate([t.data.write("drafts/fetcher.ts", draft("web_fetch_get")), "--name", "web_fetch"], undefined);
    expect(renamed.code).toBe(6);
    expect(renamed.lines[0]).toMatch(/error \[shadowing\] a core tool named "web_fetch" exists/);
    const broken = await validate([outsideDraft("file_search.ts", draft("wrong_x"))], "alice");
    expect(broken.lines.slice(0, 2)).toEqual([
      `${join(outside, "file_search.ts")}:2:13: error [schemas] schema "wrong_x" must be named file_search_<action> (the file is file_search; e.g. file_search_query)`,
      `${join(outside, "file_search.ts")}: error [shadowing] a core tool named "file_search" exists: a shared or personal tool of that name would be skipped; choose another name (rename the file, or check it with --name NAME)`,
    ]);
  });

  it("named like a personal tool of the calling Anima: installing would replace it (a warning; exit 0)", async () => {
    t.personal("notes.ts", draft("notes_run"));
    const path = outsideDraft("notes.ts", draft("notes_add"));
    expect(await validate([path], "alice")).toEqual({
      code: 0,
      lines: [
        `${path}: warning [shadowing] Anima "alice" already has a personal tool named "notes": installing this one as its personal tool would replace it`,
        `${path}: 0 errors, 1 warning (loaded in the sandbox)`,
      ],
    });
    // Another Anima's tools, and no Anima at all, see no such tool.
    t.data.anima("bob");
    expect((await validate([path], "bob")).lines).toEqual([`${path}: OK, no problems found (loaded in the sandbox)`]);
    expect((await validate([path], undefined)).lines).toEqual([`${path}: OK, no problems found (loaded in the sandbox)`]);
    // The file in the tools folder itself is checked where it is, not as a draft that would replace itself.
    expect((await validate(["animas/alice/tools/notes.ts"], "alice")).lines).toEqual([
      `${join(t.data.dir, "animas/alice/tools/notes.ts")}: OK, no problems found (loaded in the sandbox)`,
    ]);
    // Also when it is reached through a link to the data dir (named then as the host names it).
    const link = join(outside, "data-link");
    symlinkSync(t.data.dir, link);
    expect((await validate([join(link, "animas/alice/tools/notes.ts")], "alice")).lines).toEqual([
      `${join(t.data.dir, "animas/alice/tools/notes.ts")}: OK, no problems found (loaded in the sandbox)`,
    ]);
  });

  it("named like a shared tool: a personal tool would override it; also behind a personal tool of that name", async () => {
    t.shared("weather.ts", simpleTool("weather"));
    const path = outsideDraft("weather.ts", draft("weather_today"));
    const overrides = `${path}: warning [shadowing] a shared tool named "weather" exists: as a personal tool of "alice" this one would override it for "alice" (personal tools take precedence over shared ones), and share would refuse it (it never overwrites)`;
    expect(await validate([path], "alice")).toEqual({ code: 0, lines: [overrides, `${path}: 0 errors, 1 warning (loaded in the sandbox)`] });
    expect((await validate([path], undefined)).lines[0]).toBe(
      `${path}: warning [shadowing] a shared tool named "weather" exists: share would refuse this one (it never overwrites), and as a personal tool it would override the shared one for its Anima`,
    );
    t.personal("weather.ts", simpleTool("weather"));
    t.host.refresh();
    expect((await validate([path], "alice")).lines).toEqual([
      `${path}: warning [shadowing] Anima "alice" already has a personal tool named "weather": installing this one as its personal tool would replace it`,
      overrides,
      `${path}: 0 errors, 2 warnings (loaded in the sandbox)`,
    ]);
  });

  it("schema names that would collide with an installed tool's, either way round", async () => {
    t.personal("image_gen.ts", simpleTool("image_gen"));
    // The draft "image" declares image_gen_run, which is image_gen's action "run".
    const image = outsideDraft("image.ts", draft("image_gen_run"));
    const mine = await validate([image], "alice");
    expect(mine.code).toBe(6);
    expect(mine.lines[0]).toBe(
      `${image}: error [collisions] schema "image_gen_run" belongs to the personal tool "image_gen" (it is its action "run"): installed, this tool would not load; rename the schema, or the tool`,
    );
    // The installed "audio" declares audio_gen_run (its action "gen_run"): a new tool "audio_gen" would take it.
    t.shared(
      "audio.ts",
      `export function get_tool_schemas() { return [{ name: "audio_gen_run", description: "x" }]; }\nexport function dispatch() { return 1; }\n`,
    );
    t.host.refresh();
    const theirs = await validate([outsideDraft("audio_gen.ts", draft("audio_gen_play"))], "alice");
    expect(theirs.code).toBe(6);
    expect(theirs.lines[0]).toMatch(
      /error \[collisions\] the shared tool "audio" declares "audio_gen_run", which would belong to this tool: installing it would make "audio" fail to load; choose another name$/,
    );
  });

  it("schema names that would collide, by precedence: a core tool's stay its own, a shared tool's give way to the draft (share refuses)", async () => {
    t.core("text_stats.ts", simpleTool("text_stats", ["top_words"]));
    t.shared("image_gen.ts", simpleTool("image_gen"));
    t.host.refresh();
    const top = await validate([outsideDraft("text_stats_top.ts", draft("text_stats_top_x"))], "alice");
    expect(top.code).toBe(6);
    expect(top.lines[0]).toMatch(
      /error \[collisions\] the core tool "text_stats" declares "text_stats_top_words", which would belong to this tool: the core tool takes precedence, so installed, this tool would be unavailable \(and share would refuse it\); choose another name$/,
    );
    const image = await validate([outsideDraft("image.ts", draft("image_gen_run"))], "alice");
    expect(image.code).toBe(6);
    expect(image.lines[0]).toMatch(
      /error \[collisions\] schema "image_gen_run" belongs to the shared tool "image_gen" \(it is its action "run"\): as a personal tool this one takes precedence and "image_gen" would be unavailable to its Anima, and share would refuse it; rename the schema, or the tool$/,
    );
  });
});
