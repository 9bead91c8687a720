import { lstat, mkdir, readFile, readdir, stat, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { processEnvironment } from "../config.js";
import { HOST_DEFAULTS } from "../host-defaults.js";
import { ToolHostError, systemFileError } from "../errors.js";
import { CONFIG_SECTION, SETTINGS, type SettingSpec } from "../operator-config.js";
import { PROJECT_ROOT } from "../project-root.js";
import { isAnimaName } from "../registry/animas.js";
import { readRegularFile } from "../regular-file.js";
import { type GlobalOptions, resolveIdentity } from "./invocation.js";
import type { Output } from "./output.js";

/**
 * `animaworks-tool init [DIR] [--anima NAME]`: makes a data dir that works, or completes an existing
 * AnimaWorks one. It adds only what is missing and never replaces a file: every file is created with
 * O_EXCL (`wx`), so a file that appeared meanwhile is kept, not overwritten. What it adds:
 *
 *  - the layout: `animas/`, `common_tools/`, `common_skills/`;
 *  - the tool-creator skill, `common_skills/tool-creator/SKILL.md` (this install's docs/tool-creator.md),
 *    where AnimaWorks' Animas read their skills;
 *  - `config.json` with a `credentials` map and an `animaworks_tool` section that holds one note per
 *    operator setting (`"//timeout_ms": "…"`; the reader ignores keys starting with `//`), when there is
 *    no config.json. An existing one is never rewritten, whatever it lacks: init says what may be added;
 *  - an Anima folder with `tools/` and a `permissions.json`: the one named by `--anima` (or
 *    `$ANIMAWORKS_ANIMA_DIR`), else `example` when the data dir has no Anima yet. The permissions file is
 *    written only when the Anima has neither `permissions.json` nor `permissions.md`.
 */
export const INIT_USAGE = `Usage: animaworks-tool init [DIR] [--anima NAME] [--json]
Makes DIR a working AnimaWorks data dir for animaworks-tool, or completes an existing one: adds the
folders animas/, common_tools/, common_skills/, the tool-creator skill (common_skills/tool-creator/SKILL.md),
a config.json with a commented "${CONFIG_SECTION}" section (only when there is none), and an Anima with
tools/ and permissions.json (NAME, else "example" when DIR has no Anima). It never overwrites a file.
DIR defaults to the data dir the other commands use (--data-dir, $ANIMAWORKS_DATA_DIR, ~/.animaworks).`;

/** The Anima init makes when the data dir has none and no name is given. */
export const EXAMPLE_ANIMA = "example";

/** Where the skill is installed in the data dir, and where this install keeps it. */
export const SKILL_PATH = join("common_skills", "tool-creator", "SKILL.md");
export const SKILL_SOURCE = join(PROJECT_ROOT, "docs", "tool-creator.md");

/** What init did with one path (relative to the data dir; folders end in `/`). */
export interface InitStep {
  path: string;
  outcome: "created" | "kept";
  /** Why it matters, or what the operator may do about a kept file. */
  note?: string;
}

export interface InitReport {
  dataDir: string;
  steps: InitStep[];
  /** The Anima init made or completed, if any. */
  anima: string | undefined;
}

export async function runInit(positionals: string[], options: GlobalOptions, out: Output, env = processEnvironment(), cwd = process.cwd()): Promise<number> {
  if (options.help) return (out.stdout(INIT_USAGE), 0);
  if (positionals.length > 1) throw new ToolHostError("InvalidArguments", `unexpected argument "${positionals[1]}"`, INIT_USAGE.split("\n")[0]);
  if (options.demo)
    throw new ToolHostError("InvalidArguments", "init does not change the bundled demo data dir", "give the data dir to make: animaworks-tool init DIR");
  const given = positionals[0] ?? options.dataDir;
  if (given !== undefined && given.trim() === "")
    throw new ToolHostError("InvalidArguments", "the data dir is empty", "give a folder, e.g. animaworks-tool init ~/.animaworks");
  const identity = resolveIdentity({ ...options, dataDir: given }, env, cwd, PROJECT_ROOT);
  const report = await initDataDir(resolve(cwd, identity.dataDir), identity.anima);
  if (options.json) out.stdout(JSON.stringify({ status: "ok", data_dir: report.dataDir, anima: report.anima ?? null, steps: report.steps }, null, 2));
  else out.stdout(formatInit(report));
  return 0;
}

/** Makes or completes the data dir `dataDir`; `anima`: the Anima to make or complete (see the module comment). */
export async function initDataDir(dataDir: string, anima: string | undefined): Promise<InitReport> {
  if (anima !== undefined && !isAnimaName(anima)) {
    throw new ToolHostError("InvalidArguments", `"${anima}" is not a usable Anima name`, "an Anima is a folder of animas/: no '/', not starting with '.'");
  }
  const skill = await readSkill();
  const steps: InitStep[] = [];
  // The data dir itself is made with its parents: init is the one command asked to make a data dir.
  const root = await ensureDir(dataDir, ".", dataDir, true);
  if (root === "created") steps.push({ path: "./", outcome: "created" });
  for (const folder of ["animas", "common_tools", "common_skills"])
    steps.push({ path: `${folder}/`, outcome: await ensureDir(join(dataDir, folder), folder, dataDir) });

  await ensureDir(join(dataDir, "common_skills", "tool-creator"), "common_skills/tool-creator", dataDir);
  const installed = await createFile(dataDir, SKILL_PATH, skill);
  if (installed.outcome === "kept") installed.note = await skillNote(join(dataDir, SKILL_PATH), skill);
  steps.push({ path: SKILL_PATH, ...installed });

  const config = await createFile(dataDir, "config.json", operatorConfigText());
  if (config.outcome === "kept") config.note = await configNote(join(dataDir, "config.json"));
  steps.push({ path: "config.json", ...config });

  const who = anima ?? ((await hasAnima(join(dataDir, "animas"))) ? undefined : EXAMPLE_ANIMA);
  if (who !== undefined) {
    const dir = join("animas", who);
    steps.push({ path: `${dir}/`, outcome: await ensureDir(join(dataDir, dir), dir, dataDir) });
    steps.push({ path: `${dir}/tools/`, outcome: await ensureDir(join(dataDir, dir, "tools"), `${dir}/tools`, dataDir) });
    const md = join(dataDir, dir, "permissions.md");
    if (await exists(md)) steps.push({ path: `${dir}/permissions.md`, outcome: "kept", note: "its permissions stay in force; no permissions.json was added" });
    else steps.push({ path: `${dir}/permissions.json`, ...(await createFile(dataDir, join(dir, "permissions.json"), PERMISSIONS_TEXT)) });
  }
  return { dataDir, steps, anima: who };
}

/** The permissions of an Anima init makes: AnimaWorks' defaults (personal tools yes, sharing no), written out. */
export const PERMISSIONS_TEXT = `${JSON.stringify(
  { version: 1, tool_creation: { personal: true, shared: false }, sandbox: { network: "public" } },
  null,
  2,
)}\n`;

/**
 * A new config.json: an empty credentials map (where getCredential looks first) and the host's section
 * with a note per setting, generated from `SETTINGS` so that it never lists a setting the host lacks.
 */
export function operatorConfigText(): string {
  const notes: Record<string, string> = {
    "//": `Settings of the animaworks-tool host (README "Operator configuration"). Each is optional and off here: to set one, add its key without "//", e.g. "timeout_ms": 60000. A setting's ANIMAWORKS_* variable overrides it for one run; \`animaworks-tool audit\` shows the settings in force.`,
  };
  for (const spec of SETTINGS) notes[`//${spec.key}`] = settingNote(spec);
  return `${JSON.stringify({ credentials: {}, [CONFIG_SECTION]: notes }, null, 2)}\n`;
}

function settingNote(spec: SettingSpec): string {
  const fallback = defaultOf(spec);
  const parts = [spec.description];
  // Some descriptions name their default already ("(default: all)").
  if (fallback !== undefined && !/\(default\b/i.test(spec.description)) parts.push(`default: ${fallback}`);
  if (spec.env !== undefined) parts.push(`variable: ${spec.env}`);
  return parts.join("; ");
}

/** The default of a setting as the operator would write it in the file, where it is one value. */
function defaultOf(spec: SettingSpec): string | undefined {
  if (spec.key === "daemon_idle_seconds") return String(HOST_DEFAULTS.daemonIdleTimeoutMs / 1000);
  if (spec.key === "fs_limits") {
    // FsLimits is an interface of numbers: its entries, with the file's snake_case keys.
    const limits = HOST_DEFAULTS.fsLimits as unknown as Record<string, number>;
    const snake = Object.keys(limits).map((key) => [key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), limits[key]]);
    return JSON.stringify(Object.fromEntries(snake));
  }
  const value = (HOST_DEFAULTS as Record<string, unknown>)[spec.field];
  // Defaults that depend on another setting or on the machine, in words.
  if (spec.key === "spare_sandbox_processes")
    return `${HOST_DEFAULTS.spareSandboxProcesses("anima")} (${HOST_DEFAULTS.spareSandboxProcesses("all")} when cordons is "all")`;
  if (spec.key === "warm_isolates_mb")
    return `one sixth of the machine's memory, from ${HOST_DEFAULTS.warmIsolatesMb(0)} to ${HOST_DEFAULTS.warmIsolatesMb(Number.MAX_SAFE_INTEGER)}`;
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "no limit";
  if (typeof value === "string" || typeof value === "boolean") return JSON.stringify(value);
  if (spec.schema["type"] === "array") return "none";
  return undefined;
}

/**
 * Largest existing file init reads to describe it, bytes. Read only if regular and without blocking: a
 * FIFO or device named config.json must not hang init.
 */
const MAX_READ_BYTES = 4 * 1024 * 1024;

/** What to tell the operator about a config.json that init left as it is. */
async function configNote(path: string): Promise<string | undefined> {
  let config: unknown;
  try {
    config = JSON.parse((await readRegularFile(path, MAX_READ_BYTES)).toString("utf8"));
  } catch {
    return "it is not readable JSON; the host reports what is wrong when it starts";
  }
  const hasSection = typeof config === "object" && config !== null && Object.hasOwn(config, CONFIG_SECTION);
  if (hasSection) return undefined;
  return `it has no "${CONFIG_SECTION}" section, so the host uses its defaults; to change a setting, add one, e.g. "${CONFIG_SECTION}": {"timeout_ms": 60000} (README "Operator configuration" lists them)`;
}

/** What to tell the operator about a skill file that init left as it is: nothing when it is this host's guide. */
async function skillNote(path: string, skill: string): Promise<string | undefined> {
  const text = await readRegularFile(path, MAX_READ_BYTES)
    .then((bytes) => bytes.toString("utf8"))
    .catch(() => undefined);
  if (text === skill) return undefined;
  // AnimaWorks' own init installs its Python edition of the skill here.
  return "it is not this host's guide (AnimaWorks installs its Python edition there); to give the Animas this host's, move it aside and run init again";
}

async function readSkill(): Promise<string> {
  try {
    return await readFile(SKILL_SOURCE, "utf8");
  } catch (error) {
    throw new ToolHostError(
      "ToolConfigError",
      `this install of animaworks-tool has no tool-creator skill to install (${SKILL_SOURCE}: ${(error as NodeJS.ErrnoException).code ?? "unreadable"})`,
      "reinstall animaworks-tool (the package ships docs/tool-creator.md)",
      "host",
    );
  }
}

/**
 * Makes the folder `path` (shown as `shown`) unless it exists; a file in its place, or on the way to it,
 * is an error. A link to a folder counts as the folder (an operator may keep common_skills elsewhere).
 */
async function ensureDir(path: string, shown: string, dataDir: string, withParents = false): Promise<InitStep["outcome"]> {
  const before = await stat(path).catch((error: NodeJS.ErrnoException) => error);
  if (!(before instanceof Error)) {
    if (before.isDirectory()) return "kept";
    throw notAFolder(path, shown, dataDir);
  }
  try {
    await mkdir(path, { recursive: withParents });
    return "created";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Made meanwhile by someone else: kept, as if it had been there.
    if (code === "EEXIST" && (await stat(path).catch(() => undefined))?.isDirectory()) return "kept";
    if (code === "EEXIST" || code === "ENOTDIR") throw notAFolder(path, shown, dataDir);
    throw fileSystemError(error, path);
  }
}

function notAFolder(path: string, shown: string, dataDir: string): ToolHostError {
  return shown === "."
    ? new ToolHostError(
        "InvalidArguments",
        `${dataDir} is not a folder (a file is there or on the way to it)`,
        "give a folder, or a path to create, as the data dir",
      )
    : new ToolHostError("InvalidArguments", `${path} is in the way: the data dir needs a folder there`, "move it aside, then run init again");
}

/** Creates `relative` in the data dir with `content` unless something is already there (never overwrites). */
async function createFile(dataDir: string, relative: string, content: string): Promise<Pick<InitStep, "outcome" | "note">> {
  const path = join(dataDir, relative);
  try {
    // wx: O_CREAT|O_EXCL. A file (or a link, even a dangling one) that is there stays as it is.
    await writeFile(path, content, { flag: "wx", mode: relative === "config.json" ? 0o600 : 0o644 });
    return { outcome: "created" };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return { outcome: "kept" };
    throw fileSystemError(error, path);
  }
}

function fileSystemError(error: unknown, path: string): ToolHostError {
  return (
    systemFileError(error, path) ??
    new ToolHostError(
      "ExecutionError",
      `cannot write ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      "check the folder, then run init again",
      "host",
    )
  );
}

async function hasAnima(animasDir: string): Promise<boolean> {
  const entries = await readdir(animasDir, { withFileTypes: true }).catch(() => []);
  return entries.some((entry) => entry.isDirectory() && !entry.name.startsWith("."));
}

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}

/** The report: what was created, what was kept (with notes), and the next steps. */
export function formatInit(report: InitReport): string {
  const created = report.steps.filter((step) => step.outcome === "created");
  const lines = [created.length === 0 ? `${report.dataDir} has everything init adds; nothing was changed.` : `Initialised the data dir ${report.dataDir}:`];
  for (const step of report.steps) lines.push(`  ${step.outcome === "created" ? "created" : "kept   "}  ${step.path}${step.note ? `  (${step.note})` : ""}`);
  const anima = report.anima ?? "NAME";
  lines.push(
    "",
    "Next:",
    `  animaworks-tool --data-dir ${shellWord(report.dataDir)} --anima ${anima} list`,
    `  write a tool as ${join("animas", anima, "tools", "<name>.ts")} (the skill ${SKILL_PATH} shows how), then:`,
    `  animaworks-tool --data-dir ${shellWord(report.dataDir)} --anima ${anima} refresh`,
  );
  return lines.join("\n");
}

function shellWord(text: string): string {
  return /^[A-Za-z0-9_./~:@%+-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}
