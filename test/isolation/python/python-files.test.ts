import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../../src/host.js";
import { type TempDataDir, makeDataDir } from "../../helpers/data-dir.js";
import { okOutput } from "../../helpers/tools.js";

/**
 * A Python tool's files: `pathlib`, `open` and `os` on paths under the `anima_dir` the host passed are the
 * Anima's own files, through the host's file capability (in a sandbox process, under bubblewrap); a path
 * that leaves that folder (`anima_dir/../bob/…`) is the interpreter's own empty file system, so nothing of
 * another Anima's is reached.
 */
const NOTES = `from __future__ import annotations

import os
from pathlib import Path


def get_tool_schemas() -> list[dict]:
    text = {"type": "object", "properties": {"title": {"type": "string"}, "text": {"type": "string"}}}
    return [
        {"name": "notes_save", "description": "Saves a note", "input_schema": text},
        {"name": "notes_list", "description": "Lists the notes", "input_schema": text},
        {"name": "notes_tidy", "description": "Renames and removes", "input_schema": text},
        {"name": "notes_peek", "description": "Reads another Anima's file", "input_schema": text},
        {"name": "notes_env", "description": "Its ANIMAWORKS_ANIMA_DIR", "input_schema": text},
        {"name": "notes_update", "description": "Opens a note for update", "input_schema": text},
    ]


def dispatch(name, args):
    root = Path(args.pop("anima_dir"))
    notes = root / "notes"
    if name == "notes_save":
        notes.mkdir(parents=True, exist_ok=True)
        (notes / f"{args['title']}.txt").write_text(args["text"], encoding="utf-8")
        with open(notes / "index.log", "a", encoding="utf-8") as log:
            log.write(args["title"] + "\\n")
        return {"saved": args["title"]}
    if name == "notes_list":
        return {
            "files": sorted(path.name for path in notes.iterdir()),
            "listdir": sorted(os.listdir(notes)),
            "index": (notes / "index.log").read_text().splitlines(),
            "first": (notes / "a.txt").read_bytes().decode(),
            "missing": (notes / "nope.txt").exists(),
            "is_dir": notes.is_dir(),
            "is_file": os.path.isfile(notes / "a.txt"),
            "size": os.stat(notes / "a.txt").st_size,
        }
    if name == "notes_tidy":
        os.replace(notes / "a.txt", notes / "renamed.txt")
        os.remove(notes / "b.txt")
        return sorted(os.listdir(notes))
    if name == "notes_update":
        try:
            with open(notes / "renamed.txt", "r+") as f:
                f.write("overwritten")
            return "opened"
        except OSError as error:
            return str(error)
    if name == "notes_env":
        return {"env": os.environ.get("ANIMAWORKS_ANIMA_DIR")}
    if name == "notes_peek":
        try:
            return (root / ".." / "bob" / "secret.txt").read_text()
        except OSError as error:
            return type(error).__name__
    raise ValueError(name)


def cli_main(argv):
    # AnimaWorks runs cli_main with ANIMAWORKS_ANIMA_DIR set; its files are the Anima's here too.
    print((Path(os.environ["ANIMAWORKS_ANIMA_DIR"]) / "notes" / argv[0]).read_text())
`;

let data: TempDataDir;
let host: ToolHost;
beforeAll(() => {
  data = makeDataDir({ "animas/alice/tools/notes.py": NOTES, "animas/bob/secret.txt": "bob's secret 91d4" });
  host = createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core-tools"), loadTimeoutMs: 60_000, timeoutMs: 60_000, onLog: () => {} });
});
afterAll(async () => {
  await host?.close();
  data?.cleanup();
});

describe("a Python tool's files", () => {
  it("writes, appends, lists, reads, stats, renames and removes the Anima's own files", async () => {
    expect(JSON.parse(okOutput(await host.call("alice", "notes_save", { title: "a", text: "first note ✓" })))).toEqual({ saved: "a" });
    expect(JSON.parse(okOutput(await host.call("alice", "notes_save", { title: "b", text: "second" })))).toEqual({ saved: "b" });
    const notes = join(data.dir, "animas", "alice", "notes");
    expect(readFileSync(join(notes, "a.txt"), "utf8")).toBe("first note ✓");
    expect(readFileSync(join(notes, "index.log"), "utf8")).toBe("a\nb\n");
    expect(JSON.parse(okOutput(await host.call("alice", "notes_list", {})))).toEqual({
      files: ["a.txt", "b.txt", "index.log"],
      listdir: ["a.txt", "b.txt", "index.log"],
      index: ["a", "b"],
      first: "first note ✓",
      missing: false,
      is_dir: true,
      is_file: true,
      size: Buffer.byteLength("first note ✓"),
    });
    expect(JSON.parse(okOutput(await host.call("alice", "notes_tidy", {})))).toEqual(["index.log", "renamed.txt"]);
    expect(existsSync(join(notes, "b.txt"))).toBe(false);
  }, 120_000);

  it("gives cli_main the Anima's folder as ANIMAWORKS_ANIMA_DIR, and its files there", async () => {
    expect(okOutput(await host.callCli("alice", "notes", ["renamed.txt"]))).toBe("first note ✓\n");
    // Set for the cli_main call only: a dispatch call after it finds no such variable.
    expect(JSON.parse(okOutput(await host.call("alice", "notes_env", {})))).toEqual({ env: null });
  }, 120_000);

  it("refuses a read-and-write mode on the Anima's files with an OSError that says what works", async () => {
    expect(okOutput(await host.call("alice", "notes_update", {}))).toBe("open(): mode 'r+' is not supported for the Anima's files; read, write or append");
    expect(readFileSync(join(data.dir, "animas", "alice", "notes", "renamed.txt"), "utf8")).toBe("first note ✓");
  }, 120_000);

  it("reaches nothing of another Anima's through anima_dir/..", async () => {
    const result = await host.call("alice", "notes_peek", {});
    expect(okOutput(result)).toBe("FileNotFoundError");
    expect(JSON.stringify(result)).not.toContain("91d4");
  }, 120_000);
});
