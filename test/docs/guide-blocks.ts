import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/tools.js";

/**
 * The code blocks of the tool-creator guide (docs/tool-creator.md), each with the marker the guide puts
 * before it: an HTML comment on the last non-blank line above the fence. Markers:
 *   <!-- tool: NAME -->        a complete tool, installed as NAME.ts, checked, loaded and called
 *   <!-- fragment -->          part of a tool or a command pattern: type-checked or read, not run
 *   <!-- cli -->               commands run, in order, against a data dir that holds the guide's tools
 *   <!-- permissions.json -->, <!-- permissions.md -->, <!-- config.json -->   parsed by the host's readers
 */
export const GUIDE_PATH = join(REPO_ROOT, "docs", "tool-creator.md");

export interface GuideBlock {
  /** The fence's language word (`ts`, `bash`, `json`…), "" when none. */
  lang: string;
  code: string;
  /** The marker's text (`tool: my_tool`, `fragment`…), undefined when the block has none. */
  marker: string | undefined;
  /** 1-based line of the opening fence in the guide. */
  line: number;
}

/** Languages whose blocks must carry a marker: code that could drift from the host. */
export const CHECKED_LANGUAGES = new Set(["ts", "typescript", "js", "javascript", "python", "bash", "sh", "shell", "json", "jsonc", "markdown", "md"]);

export function readGuide(): string {
  return readFileSync(GUIDE_PATH, "utf8");
}

export function guideBlocks(text: string): GuideBlock[] {
  const lines = text.split("\n");
  const blocks: GuideBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(\S*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const fence = open[1] as string;
    const end = lines.findIndex((line, j) => j > i && line.startsWith(fence) && line.trim() === fence);
    if (end === -1) throw new Error(`the guide's code block at line ${i + 1} is never closed`);
    let above = i - 1;
    while (above >= 0 && (lines[above] as string).trim() === "") above--;
    const marker = /^<!--\s*(.*?)\s*-->$/.exec((lines[above] ?? "").trim())?.[1];
    blocks.push({ lang: (open[2] as string).toLowerCase(), code: lines.slice(i + 1, end).join("\n"), marker, line: i + 1 });
    i = end;
  }
  return blocks;
}

/** The tool name of a `python-tool: NAME` marker (a Python tool of the guide), else undefined. */
export function pythonToolNameOf(block: GuideBlock): string | undefined {
  return /^python-tool:\s*([a-z][a-z0-9_]*)$/.exec(block.marker ?? "")?.[1];
}

/** The tool name of a `tool: NAME` marker, else undefined. */
export function toolNameOf(block: GuideBlock): string | undefined {
  return /^tool:\s*([A-Za-z][A-Za-z0-9_]*)$/.exec(block.marker ?? "")?.[1];
}

/**
 * The words of one shell command line as a POSIX shell would pass them for the simple lines the guide
 * shows: single and double quotes, `$VAR` / `${VAR}` expanded from `env` (not inside single quotes), and
 * a `#` comment after whitespace. Anything fancier (pipes, substitutions) is refused, so a guide line the
 * test cannot run faithfully fails loudly instead of being run differently.
 */
export function shellWords(line: string, env: Record<string, string>): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let i = 0;
  const expand = (): string => {
    const match = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/.exec(line.slice(i));
    if (!match) throw new Error(`cannot run "${line}": a "$" that is not a variable`);
    i += match[0].length;
    const name = (match[1] ?? match[2]) as string;
    if (env[name] === undefined) throw new Error(`cannot run "${line}": $${name} is not set`);
    return env[name];
  };
  while (i < line.length) {
    const c = line[i] as string;
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
      i++;
    } else if (c === "#" && word === undefined) {
      break;
    } else if (c === "'") {
      const close = line.indexOf("'", i + 1);
      if (close === -1) throw new Error(`cannot run "${line}": unclosed quote`);
      word = (word ?? "") + line.slice(i + 1, close);
      i = close + 1;
    } else if (c === '"') {
      word ??= "";
      i++;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === "$") word += expand();
        else if (line[i] === "\\" || line[i] === "`") throw new Error(`cannot run "${line}": escapes and substitutions are not supported`);
        else word += line[i++];
      }
      if (i >= line.length) throw new Error(`cannot run "${line}": unclosed quote`);
      i++;
    } else if (c === "$") {
      word = (word ?? "") + expand();
    } else if ("|&;<>()`\\".includes(c)) {
      throw new Error(`cannot run "${line}": "${c}" is not supported`);
    } else {
      word = (word ?? "") + c;
      i++;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** The command lines of a shell block: blank lines and whole-line comments left out. */
export function commandLines(block: GuideBlock): string[] {
  return block.code
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}
