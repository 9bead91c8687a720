import type { SchemaInfo, ToolInfo, ToolListing } from "../host-api.js";
import { flagName, positionalParameters, typesOf } from "./flags.js";

/** Help text generated from schemas, at three levels: all tools, one tool, one action. */

export const MANAGEMENT_COMMANDS: ReadonlyArray<[string, string]> = [
  ["list", "list the tools this Anima can use, with their actions"],
  ["describe <tool>", "show a tool's actions and full JSON Schemas"],
  ["refresh", "rescan, rebuild and revalidate tools; report loaded/changed/removed/failed"],
  ["share <tool>", "copy a personal tool to common_tools/ (shared-tool permission)"],
  ["validate <file>", "check a tool file or draft: checklist, sandbox load, clashes with installed tools"],
  ["mcp", "serve this Anima's tools over MCP on stdio"],
  ["submit <tool> …", "queue a background job and print its id (submit --help)"],
  ["jobs <command>", "this Anima's background jobs: list, show, wait, cancel, result"],
  ["serve", "run the background job worker until stopped (serve --help)"],
  ["audit", "each Anima's sandbox policy and what its tools attempted (--since 12h, --json, --html FILE)"],
  ["audit verify|events|policy-history", "check the trail's hash chains; stream the records (JSONL/CSV); policy changes"],
  ["daemon <command>", "the host that serves CLI calls in the background: start, stop, status"],
  ["init [DIR]", "make a data dir, or add what one lacks (never overwrites); installs the tool-creator skill"],
  ["help [<tool>]", "this help, or a tool's"],
];

const GLOBAL_OPTIONS = `Options:
  --anima NAME          act for this Anima (default: $ANIMAWORKS_ANIMA_DIR)
  --data-dir DIR        the AnimaWorks data dir (default: $ANIMAWORKS_DATA_DIR, else the one holding
                        $ANIMAWORKS_ANIMA_DIR, else ~/.animaworks)
  --args-json JSON      pass all arguments as one JSON object
  --args-file F|-       read the arguments object from a file, or stdin with -
  -j, --json            print a JSON envelope instead of plain text
  --demo                use the bundled demo data dir (examples/demo-data, Anima "demo")
  --os-sandbox MODE     bubblewrap around sandbox processes: auto, required, off
                        (default: $ANIMAWORKS_OS_SANDBOX, else config.json, else auto; "required" also runs
                        one-shot calls in one)
  --jobs-url URL        background jobs in PostgreSQL (postgres://…) instead of the data dir's SQLite file
                        (default: $ANIMAWORKS_JOBS_URL, else config.json)
  --no-daemon           run in this process: neither use nor start a running host ($ANIMAWORKS_NO_DAEMON=1)
  --version             print the version
  -h, --help            show help (also: <tool> --help, <tool> <action> --help, help <tool>)
Operator settings (internal hosts, allowed environment, limits…): the "animaworks_tool" section of the
data dir's config.json, or their ANIMAWORKS_* variables; \`audit\` shows those in force (README).`;

export function topLevelHelp(listing: ToolListing | undefined): string {
  const lines = ["Usage: animaworks-tool <tool> <action> [args…] [--param value…]", "       animaworks-tool <command> [args…]", ""];
  if (listing) {
    lines.push(listing.anima ? `Tools for Anima "${listing.anima}":` : "Tools (no Anima selected: core and shared only):");
    if (listing.tools.length === 0) lines.push("  (none)");
    for (const tool of listing.tools) lines.push(toolSummaryLine(tool));
    lines.push("");
  }
  lines.push("Commands:");
  for (const [command, text] of MANAGEMENT_COMMANDS) lines.push(`  ${command.padEnd(20)}  ${text}`);
  lines.push("", GLOBAL_OPTIONS, "", "Exit codes: 0 ok, 1 tool error, 2 invalid usage, 3 timeout/memory, 4 denied, 5 unknown tool/action, 6 load error.");
  return lines.join("\n");
}

function toolSummaryLine(tool: ToolInfo): string {
  const label = `  ${tool.name}`.padEnd(24);
  if (tool.status === "error") return `${label}  [unavailable: ${tool.error?.message ?? "load error"}]`;
  const actions = tool.schemas.map((s) => s.action).join(", ");
  return `${label}  ${actions}  (${tool.origin})`;
}

export function toolHelp(tool: ToolInfo): string {
  const lines = [`Usage: animaworks-tool ${tool.name} <action> [args…]`, "", `Tool "${tool.name}" (${tool.origin})`];
  if (tool.status === "error") {
    lines.push(`Unavailable: ${tool.error?.message ?? "load error"}`);
    if (tool.error?.hint) lines.push(`Fix: ${tool.error.hint}`);
    return lines.join("\n");
  }
  lines.push("", "Actions:");
  for (const schema of tool.schemas) lines.push(`  ${schema.action.padEnd(20)}  ${firstLine(schema.description)}`);
  lines.push("", `Run "animaworks-tool ${tool.name} <action> --help" for an action's parameters.`);
  return lines.join("\n");
}

export function actionHelp(tool: ToolInfo, schema: SchemaInfo): string {
  const params = schema.parameters as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  const properties = params.properties ?? {};
  const required = new Set(params.required ?? []);
  const positional = positionalParameters(params);
  const usage = [`animaworks-tool ${tool.name} ${schema.action}`, ...positional.map((p) => `<${p}>`), "[options]"].join(" ");
  const lines = [`Usage: ${usage}`, ""];
  if (schema.description) lines.push(schema.description, "");
  lines.push("Parameters:");
  if (Object.keys(properties).length === 0) lines.push("  (none)");
  for (const [name, prop] of Object.entries(properties)) {
    const types = typesOf(prop);
    const isBool = types.length === 1 && types[0] === "boolean";
    const flag = isBool ? `${flagName(name)} / --no-${name.replaceAll("_", "-")}` : `${flagName(name)} ${types.join("|").toUpperCase() || "VALUE"}`;
    const notes = [
      required.has(name) ? "required" : undefined,
      positional.includes(name) ? "may be given positionally" : undefined,
      prop["default"] !== undefined ? `default: ${JSON.stringify(prop["default"])}` : undefined,
      Array.isArray(prop["enum"]) ? `one of: ${(prop["enum"] as unknown[]).map((v) => JSON.stringify(v)).join(", ")}` : undefined,
      types.includes("array") ? "repeat the flag or pass a JSON array" : undefined,
      types.includes("object") ? "pass JSON" : undefined,
    ].filter(Boolean);
    const description = typeof prop["description"] === "string" ? prop["description"] : "";
    lines.push(`  ${flag}`);
    if (description || notes.length > 0) lines.push(`      ${[description, notes.length ? `(${notes.join("; ")})` : ""].filter(Boolean).join(" ")}`);
  }
  if (schema.profile?.timeout_seconds) lines.push("", `Timeout: ${schema.profile.timeout_seconds} s`);
  lines.push("", "Arguments may also be given at once with --args-json '{…}' or --args-file F|-.");
  return lines.join("\n");
}

export function describeText(tool: ToolInfo): string {
  const lines = [`${tool.name} (${tool.origin})`];
  if (tool.status === "error") {
    lines.push(`  unavailable: ${tool.error?.message ?? "load error"}`);
    if (tool.error?.hint) lines.push(`  fix: ${tool.error.hint}`);
    return lines.join("\n");
  }
  if (tool.hasCliMain) lines.push("  has cli_main: the CLI passes raw arguments to it");
  for (const schema of tool.schemas) {
    lines.push("", `  ${schema.name}: ${schema.description}`);
    if (schema.profile) lines.push(`    profile: ${JSON.stringify(schema.profile)}`);
    lines.push(
      ...JSON.stringify(schema.parameters, null, 2)
        .split("\n")
        .map((l) => `    ${l}`),
    );
  }
  return lines.join("\n");
}

export function listText(listing: ToolListing): string {
  const lines: string[] = [];
  for (const tool of listing.tools) lines.push(toolSummaryLine(tool).trimStart());
  for (const problem of listing.problems) lines.push(`(skipped) ${problem.file.split("/").pop()}: ${problem.message}`);
  return lines.length > 0 ? lines.join("\n") : "No tools found.";
}

function firstLine(text: string): string {
  return text.split("\n")[0] ?? "";
}
