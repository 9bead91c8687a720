import { join } from "node:path";
import { ToolHostError } from "../errors.js";
import { readTextFileIfPresent, readTextFileIfPresentSync, unreadableReason } from "../regular-file.js";

/**
 * Per-Anima permissions (docs/design.md §6, docs/animaworks-reference.md §1.3-1.4): `permissions.json`, else the legacy
 * `permissions.md`, else defaults. A file that exists but cannot be understood fails closed: every
 * permission-dependent operation is refused with an error naming the file and the problem.
 *
 * Unlike AnimaWorks, reading `permissions.md` never rewrites it (the host does not migrate the
 * operator's files); and the markdown form accepts what the tool-creator guide shows.
 */
export interface Permissions {
  toolCreation: { personal: boolean; shared: boolean };
  sandbox: SandboxPolicy;
  /** Which file the permissions came from, for reports. */
  source: "permissions.json" | "permissions.md" | "defaults";
}

/** The capability policy an Anima's tools run under. */
export interface SandboxPolicy {
  /**
   * Network reach: `public` (the public internet; private, loopback and metadata addresses refused),
   * `none` (no network at all), or an allowlist of host names (`api.example.com`, `*.example.org`),
   * each still subject to the public-address rule unless the operator allows an internal host. An
   * entry may name a port (`api.example.com:443`): then only that port; a bare name allows any port but
   * the refused non-HTTP ones (net-address.ts `BAD_PORTS`).
   */
  network: { mode: "public" } | { mode: "none" } | { mode: "allowlist"; hosts: string[] };
}

export const DEFAULT_PERMISSIONS: Permissions = Object.freeze({
  toolCreation: { personal: true, shared: false },
  sandbox: { network: { mode: "public" } },
  source: "defaults",
}) as Permissions;

export async function loadPermissions(animaDir: string): Promise<Permissions> {
  const jsonPath = join(animaDir, "permissions.json");
  const json = await readIfPresent(jsonPath);
  if (json !== undefined) return parsePermissionsJson(json);
  const md = await readIfPresent(join(animaDir, "permissions.md"));
  if (md !== undefined) return parsePermissionsMarkdown(md);
  return DEFAULT_PERMISSIONS;
}

/**
 * `loadPermissions`, synchronous: for the policy ledger (audit/policy-ledger.ts), which checks an Anima's
 * policy on the one-shot CLI's path too, where fs/promises is a cost a cold start cannot afford.
 */
export function loadPermissionsSync(animaDir: string): Permissions {
  const read = (file: string) => {
    try {
      return readTextFileIfPresentSync(join(animaDir, file), MAX_PERMISSIONS_BYTES);
    } catch (error) {
      throw broken(file, `it ${unreadableReason(error)}`);
    }
  };
  const json = read("permissions.json");
  if (json !== undefined) return parsePermissionsJson(json);
  const md = read("permissions.md");
  if (md !== undefined) return parsePermissionsMarkdown(md);
  return DEFAULT_PERMISSIONS;
}

/** Largest permissions file read, bytes (a real one is a few hundred). */
const MAX_PERMISSIONS_BYTES = 1024 * 1024;

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readTextFileIfPresent(path, MAX_PERMISSIONS_BYTES);
  } catch (error) {
    throw broken(path.endsWith(".json") ? "permissions.json" : "permissions.md", `it ${unreadableReason(error)}`);
  }
}

/** Only the operator edits an Anima's permissions file (no Anima or tool may write it), so its fault is the host's. */
function broken(file: string, problem: string): ToolHostError {
  return new ToolHostError(
    "PermissionDenied",
    `${file} is invalid: ${problem}; permission-dependent operations are refused until it is fixed`,
    `an operator must fix ${file} in the Anima's folder`,
    "host",
  );
}

/**
 * Where a tool-creation permission is set, in the file in force: `"tool_creation.shared" in permissions.json`,
 * or `"Shared tools: yes" in permissions.md`. Never the other file: AnimaWorks rewrites permissions.md into
 * permissions.json (and keeps the markdown only as permissions.md.bak), and while permissions.json exists an
 * edit of permissions.md has no effect. Without either file, AnimaWorks' own format, permissions.json.
 */
export function permissionSetting(permissions: Pick<Permissions, "source">, kind: "personal" | "shared"): string {
  return permissions.source === "permissions.md"
    ? `"${kind === "personal" ? "Personal" : "Shared"} tools: yes" in permissions.md`
    : `"tool_creation.${kind}" in permissions.json`;
}

/** What an operator does to grant a tool-creation permission, in the file in force (see `permissionSetting`). */
export function grantHint(permissions: Pick<Permissions, "source">, kind: "personal" | "shared"): string {
  switch (permissions.source) {
    case "permissions.md":
      return `an operator can add "- ${kind === "personal" ? "Personal" : "Shared"} tools: yes" under "## Tool creation" in the Anima's permissions.md`;
    case "permissions.json":
      return `an operator can set "tool_creation": {"${kind}": true} in the Anima's permissions.json`;
    case "defaults":
      return `an operator can create the Anima's permissions.json with {"tool_creation": {"${kind}": true}}`;
  }
}

export function parsePermissionsJson(text: string): Permissions {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw broken("permissions.json", `not valid JSON (${(error as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw broken("permissions.json", "the top level must be an object");
  const record = value as Record<string, unknown>;
  const toolCreation = { ...DEFAULT_PERMISSIONS.toolCreation };
  const tc = own(record, "tool_creation");
  if (tc !== undefined) {
    if (typeof tc !== "object" || tc === null || Array.isArray(tc)) throw broken("permissions.json", '"tool_creation" must be an object');
    for (const key of ["personal", "shared"] as const) {
      const flag = own(tc as Record<string, unknown>, key);
      if (flag === undefined) continue;
      if (typeof flag !== "boolean") throw broken("permissions.json", `"tool_creation.${key}" must be true or false`);
      toolCreation[key] = flag;
    }
  }
  return { toolCreation, sandbox: parseSandbox(own(record, "sandbox")), source: "permissions.json" };
}

function parseSandbox(raw: unknown): SandboxPolicy {
  if (raw === undefined) return { network: { mode: "public" } };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw broken("permissions.json", '"sandbox" must be an object');
  const network = own(raw as Record<string, unknown>, "network");
  if (network === undefined || network === "public") return { network: { mode: "public" } };
  if (network === "none" || network === false) return { network: { mode: "none" } };
  if (typeof network === "object" && network !== null && !Array.isArray(network)) {
    const allow = own(network as Record<string, unknown>, "allow");
    if (Array.isArray(allow) && allow.every((h) => typeof h === "string" && validAllowEntry(h))) {
      return { network: { mode: "allowlist", hosts: allow.map((h: string) => h.toLowerCase()) } };
    }
  }
  throw broken(
    "permissions.json",
    '"sandbox.network" must be "public", "none" or {"allow": ["host.example.com", "*.example.org", "api.example.com:443"]} (ports 1-65535)',
  );
}

function validAllowEntry(entry: string): boolean {
  const match = /^(.*?)(?::(\d{1,5}))?$/.exec(entry) as RegExpExecArray;
  const port = match[2] === undefined ? undefined : Number(match[2]);
  return HOST_PATTERN.test(match[1] as string) && (port === undefined || (port >= 1 && port <= 65_535));
}

const HOST_PATTERN = /^(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$/;

function own(record: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

// ---- legacy markdown ------------------------------------------------------------------------------

const TRUE_WORDS = new Set(["yes", "ok", "enabled", "true"]);
const FALSE_WORDS = new Set(["no", "deny", "disabled", "false"]);
// AnimaWorks' Japanese keys. The patterns are built from strings, not written as regular expression
// literals: the CLI bundle must be pure ASCII (scripts/bundle-cli.mjs), and esbuild escapes non-ASCII
// characters in strings but not in regular expression literals.
const PERSONAL_JA = "個人ツール";
const SHARED_JA = "共有ツール";
const TOOL_CREATION_JA = "ツール作成";
/** `- Personal tools: yes`, `* personal: OK`, `- 個人ツール: yes`, `共有ツール：no` (full-width colon too). */
const TOOL_LINE = new RegExp(`^[-*]?\\s*(personal(?:\\s+tools?)?|shared(?:\\s+tools?)?|${PERSONAL_JA}|${SHARED_JA})\\s*[:：]\\s*(\\S+)\\s*$`, "i");
const TOOL_HEADING = new RegExp(`^#{1,6}\\s.*(tool[\\s_-]*creation|${TOOL_CREATION_JA})`, "i");

/**
 * Reads the tool-creation section of a legacy `permissions.md`. Only lines under a "Tool creation" /
 * "ツール作成" heading (any case, any level) count, so entries of other sections are not mistaken for
 * tool permissions (an AnimaWorks defect, docs/animaworks-reference.md §1.4). An unrecognised value there fails closed.
 */
export function parsePermissionsMarkdown(text: string): Permissions {
  const toolCreation = { ...DEFAULT_PERMISSIONS.toolCreation };
  let inSection = false;
  for (const [index, rawLine] of text.split(/\r?\n/).entries()) {
    const line = rawLine.trim();
    if (/^#{1,6}\s/.test(line)) {
      inSection = TOOL_HEADING.test(line);
      continue;
    }
    if (!inSection || line === "") continue;
    const match = TOOL_LINE.exec(line);
    if (!match) continue;
    const key = (match[1] as string).toLowerCase();
    const word = (match[2] as string).toLowerCase();
    const value = TRUE_WORDS.has(word) ? true : FALSE_WORDS.has(word) ? false : undefined;
    if (value === undefined) {
      throw broken("permissions.md", `line ${index + 1}: "${match[2]}" is not yes/OK/enabled/true or no/deny/disabled/false`);
    }
    if (key.startsWith("personal") || key === PERSONAL_JA) toolCreation.personal = value;
    else toolCreation.shared = value;
  }
  return { toolCreation, sandbox: { network: { mode: "public" } }, source: "permissions.md" };
}
