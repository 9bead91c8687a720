import { basename, resolve } from "node:path";
import { ToolHostError } from "../errors.js";
import type { HostFactory, ToolHost } from "../host-api.js";
import { formatRefresh, managementOf } from "../lifecycle/management.js";
import type { ValidateOptions } from "../lifecycle/validate.js";
import { hostLoader, installedPathOf, installedToolsCheck, runValidate, scratchLoader, toolNameProblem, validationJson } from "../lifecycle/index.js";
import { scanArgs } from "./options.js";
import type { Output } from "./output.js";

/**
 * `refresh`, `share <tool>` and `validate <file>` (docs/design.md §5; the seed's refresh_tools / share_tool
 * and Validation Checklist).
 */
export const LIFECYCLE_USAGE = {
  refresh:
    "Usage: animaworks-tool refresh [--anima NAME] [--json]\nRescans, rebuilds and revalidates every tool; reports what was loaded, changed, removed or failed.",
  share:
    "Usage: animaworks-tool share <tool> --anima NAME [--json]\nCopies a personal tool to common_tools/ (needs the shared-tool permission; never overwrites).",
  validate: [
    "Usage: animaworks-tool validate <file> [--name NAME] [--anima NAME] [--json]",
    "Checks a tool file against the tool-creator checklist and loads it in the sandbox. A file in a tools folder",
    "of the data dir is checked where it is; any other file is a draft, checked as tool NAME (default: its file",
    "name) and against the core, shared and personal tools of the Anima (core and shared without one).",
    "Every finding is reported in one run, each with the line of the file it is about (--json: as data).",
    "Exit codes: 0 no errors (warnings allowed), 2 no such file or bad arguments, 6 errors found.",
  ].join("\n"),
} as const;

/**
 * Runs `refresh`, `share` or `validate`. `hostFactory` makes the throwaway hosts that load drafts (the
 * CLI's entry hands down the composition root's `hostFromConfig`).
 */
export async function runLifecycleCommand(
  host: ToolHost,
  command: "refresh" | "share" | "validate",
  argv: string[],
  anima: string | undefined,
  json: boolean,
  out: Output,
  cwd: string,
  hostFactory: HostFactory,
): Promise<number> {
  const operand = argv.find((token) => !token.startsWith("-"));
  switch (command) {
    case "refresh": {
      const report = await managementOf(host).refresh(anima);
      out.stdout(json ? JSON.stringify({ status: "ok", ...report }, null, 2) : formatRefresh(report));
      return report.failed.length > 0 ? 6 : 0;
    }
    case "share": {
      if (!operand) throw new ToolHostError("InvalidArguments", "share needs a tool name", LIFECYCLE_USAGE.share);
      if (anima === undefined) throw new ToolHostError("InvalidArguments", "no Anima selected", "pass --anima NAME or set ANIMAWORKS_ANIMA_DIR");
      const text = await managementOf(host).share(anima, operand);
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
        options = { load: hostLoader(host), ...(anima !== undefined ? { anima } : {}) };
      } else {
        // A draft: loaded on its own (a core tool of its name must not hide it), then set against what
        // is installed. An unknown Anima is an argument error, not a finding about the file.
        if (anima !== undefined) await host.discoveryProblems(anima);
        options = {
          // A long-running host (the daemon) loads drafts in sandbox processes too: a hostile draft must
          // not be able to leave a stuck isolate thread in a process that serves other calls.
          load: scratchLoader({ hostFactory, coreToolsDir: null, isolation: host.config.isolation, ...(anima !== undefined ? { anima } : {}) }),
          ...(anima !== undefined ? { anima } : {}),
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
  for (const token of scanArgs(argv, { "--name": "value" })) {
    if (token.kind === "option") {
      name = token.value;
      if (name === undefined || name === "") throw new ToolHostError("InvalidArguments", "--name needs a tool name", usage);
      const problem = toolNameProblem(name);
      if (problem !== undefined)
        throw new ToolHostError(
          "InvalidArguments",
          `--name: ${problem}`,
          'give a name of letters, digits and "_", starting with a letter, that is not a command',
        );
    } else if (token.kind === "end") {
      const rest = argv.slice(token.index + 1);
      if (file === undefined && rest.length > 0) file = rest.shift();
      if (rest.length > 0) throw new ToolHostError("InvalidArguments", "validate checks one file at a time", usage);
      break;
    } else if (token.kind === "unknown") {
      throw new ToolHostError("InvalidArguments", `validate has no option ${token.text}`, usage);
    } else if (file === undefined) {
      file = token.text;
    } else {
      throw new ToolHostError("InvalidArguments", "validate checks one file at a time", usage);
    }
  }
  if (file === undefined) throw new ToolHostError("InvalidArguments", "validate needs a file", usage);
  return { file, name };
}
