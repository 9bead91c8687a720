import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { recordReloads, shareReloadEvent } from "../audit/reloads.js";
import { ToolHostError } from "../errors.js";
import type { ToolHost, ToolInfo } from "../host.js";
import type { ValidateOptions } from "../lifecycle/validate.js";
import {
  errorsForShare,
  hostLoader,
  installedPathOf,
  installedToolsCheck,
  runValidate,
  scratchLoader,
  shareTool,
  toolNameProblem,
  validationJson,
} from "../lifecycle/index.js";
import type { Output } from "./output.js";

/**
 * `refresh`, `share <tool>` and `validate <file>` (design.md §5; the seed's refresh_tools / share_tool
 * and Validation Checklist).
 */
export const LIFECYCLE_USAGE = {
  refresh: "Usage: animaworks-tool refresh [--anima NAME] [--json]\nRescans, rebuilds and revalidates every tool; reports what was loaded, changed, removed or failed.",
  share: "Usage: animaworks-tool share <tool> --anima NAME [--json]\nCopies a personal tool to common_tools/ (needs the shared-tool permission; never overwrites).",
  validate: [
    "Usage: animaworks-tool validate <file> [--name NAME] [--anima NAME] [--json]",
    "Checks a tool file against the tool-creator checklist and loads it in the sandbox. A file in a tools folder",
    "of the data dir is checked where it is; any other file is a draft, checked as tool NAME (default: its file",
    "name) and against the core, shared and personal tools of the Anima (core and shared without one).",
    "Every finding is reported in one run, each with the line of the file it is about (--json: as data).",
    "Exit codes: 0 no errors (warnings allowed), 2 no such file or bad arguments, 6 errors found.",
  ].join("\n"),
} as const;

export interface RefreshReport {
  anima: string | undefined;
  loaded: string[];
  changed: string[];
  removed: string[];
  failed: Array<{ name: string; error: string; hint?: string }>;
  /** Files not loaded as tools (named like a core tool, a reserved name…), with the reason. */
  skipped: Array<{ name: string; reason: string }>;
  tools: string[];
}

/** Each refresh remembers the version of every tool it saw, so the next one can say what changed. */
function snapshotPath(host: ToolHost, anima: string | undefined): string {
  return join(host.config.dataDir, "cache", "animaworks-tool", `refresh-${anima === undefined ? "_" : encodeURIComponent(anima)}.json`);
}

export async function refreshTools(host: ToolHost, anima: string | undefined): Promise<RefreshReport> {
  host.refresh();
  const listing = await host.list(anima);
  const file = snapshotPath(host, anima);
  const before = (await readFile(file, "utf8").then((t) => JSON.parse(t) as Record<string, string>).catch(() => ({}))) as Record<string, string>;
  const now: Record<string, string> = {};
  const report: RefreshReport = { anima, loaded: [], changed: [], removed: [], failed: [], skipped: listing.problems.map((p) => ({ name: p.name, reason: p.message })), tools: [] };
  for (const tool of listing.tools) {
    const version = versionOf(tool);
    now[tool.name] = version;
    if (tool.status === "error") {
      report.failed.push({ name: tool.name, error: tool.error?.message ?? "load error", ...(tool.error?.hint ? { hint: tool.error.hint } : {}) });
      continue;
    }
    report.tools.push(tool.name);
    if (!(tool.name in before)) report.loaded.push(tool.name);
    else if (before[tool.name] !== version) report.changed.push(tool.name);
  }
  for (const name of Object.keys(before)) if (!(name in now)) report.removed.push(name);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(`${file}.tmp`, JSON.stringify(now));
  await rename(`${file}.tmp`, file);
  // The audit log's record of the reload, against what it last recorded (not this report's memory: a
  // watcher may have recorded the change already). A failure to record never fails the refresh.
  await recordReloads({ dataDir: host.config.dataDir, audit: host.audit, listing, trigger: "refresh" }).catch(() => {});
  return report;
}

function versionOf(tool: ToolInfo): string {
  return tool.status === "error" ? `error:${tool.error?.message ?? ""}` : `${tool.origin}:${JSON.stringify(tool.schemas)}:${tool.bundleHash ?? ""}`;
}

export function formatRefresh(report: RefreshReport): string {
  const lines: string[] = [];
  for (const name of report.loaded) lines.push(`loaded   ${name}`);
  for (const name of report.changed) lines.push(`changed  ${name}`);
  for (const name of report.removed) lines.push(`removed  ${name}`);
  for (const failure of report.failed) lines.push(`failed   ${failure.name}: ${failure.error}${failure.hint ? ` (fix: ${failure.hint})` : ""}`);
  for (const skip of report.skipped) lines.push(`skipped  ${skip.name}: ${skip.reason}`);
  if (report.tools.length === 0) lines.push("No personal or common tools found.");
  else lines.push(`Refreshed tools (${report.tools.length} discovered): ${report.tools.join(", ")}`, "These tools are now available for use.");
  return lines.join("\n");
}

export async function runLifecycleCommand(host: ToolHost, command: "refresh" | "share" | "validate", argv: string[], anima: string | undefined, json: boolean, out: Output, cwd: string): Promise<number> {
  const operand = argv.find((token) => !token.startsWith("-"));
  switch (command) {
    case "refresh": {
      const report = await refreshTools(host, anima);
      out.stdout(json ? JSON.stringify({ status: "ok", ...report }, null, 2) : formatRefresh(report));
      return report.failed.length > 0 ? 6 : 0;
    }
    case "share": {
      if (!operand) throw new ToolHostError("InvalidArguments", "share needs a tool name", LIFECYCLE_USAGE.share);
      if (anima === undefined) throw new ToolHostError("InvalidArguments", "no Anima selected", "pass --anima NAME or set ANIMAWORKS_ANIMA_DIR");
      const animaDir = join(host.config.dataDir, "animas", anima);
      const text = await shareTool({
        dataDir: host.config.dataDir,
        animaDir,
        anima,
        toolName: operand,
        validate: errorsForShare({ load: hostLoader(host) }),
        onShared: (tool) => host.audit.append(shareReloadEvent(anima, tool)),
      });
      out.stdout(json ? JSON.stringify({ status: "ok", message: text }) : text);
      return 0;
    }
    case "validate": {
      const { file, name } = validateArguments(argv);
      let path = resolve(cwd, file);
      const installedPath = await installedPathOf(host.config.dataDir, path);
      const ownName = basename(path).replace(/\.[^.]*$/, "");
      let options: ValidateOptions;
      if (installedPath !== undefined && (name === undefined || name === ownName)) {
        // Installed (or about to be): checked in its folder, beside the tools it will be loaded with.
        path = installedPath;
        options = { load: hostLoader(host) };
      } else {
        // A draft: loaded on its own (a core tool of its name must not hide it), then set against what
        // is installed. An unknown Anima is an argument error, not a finding about the file.
        if (anima !== undefined) await host.discoveryProblems(anima);
        options = {
          // A long-running host (the daemon) loads drafts in sandbox processes too: a hostile draft must
          // not be able to leave a stuck isolate thread in a process that serves other calls.
          load: scratchLoader({ coreToolsDir: null, isolation: host.config.isolation }),
          installed: installedToolsCheck(host, anima),
          ...(name !== undefined ? { name } : {}),
        };
      }
      const result = await runValidate(path, options);
      out.stdout(json ? JSON.stringify(validationJson(result)) : result.text);
      return result.exitCode;
    }
  }
}

/** `validate <file> [--name NAME]`: exactly one file; an unknown option is refused rather than ignored. */
function validateArguments(argv: string[]): { file: string; name: string | undefined } {
  let file: string | undefined;
  let name: string | undefined;
  const usage = LIFECYCLE_USAGE.validate;
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (token === "--name" || token.startsWith("--name=")) {
      name = token === "--name" ? argv[++i] : token.slice("--name=".length);
      if (name === undefined || name === "") throw new ToolHostError("InvalidArguments", "--name needs a tool name", usage);
      const problem = toolNameProblem(name);
      if (problem !== undefined) throw new ToolHostError("InvalidArguments", `--name: ${problem}`, "give a name of letters, digits and \"_\", starting with a letter, that is not a command");
    } else if (token === "--") {
      const rest = argv.slice(i + 1);
      if (file === undefined && rest.length > 0) file = rest.shift();
      if (rest.length > 0) throw new ToolHostError("InvalidArguments", "validate checks one file at a time", usage);
      break;
    } else if (token.startsWith("-") && token !== "-") {
      throw new ToolHostError("InvalidArguments", `validate has no option ${token}`, usage);
    } else if (file === undefined) {
      file = token;
    } else {
      throw new ToolHostError("InvalidArguments", "validate checks one file at a time", usage);
    }
  }
  if (file === undefined) throw new ToolHostError("InvalidArguments", "validate needs a file", usage);
  return { file, name };
}
