import { ToolHostError } from "../errors.js";
import type { ToolHost, ToolInfo } from "../host-api.js";
import type { Finding } from "./findings.js";
import type { InstalledToolsCheck } from "./validate.js";

/**
 * How a draft, installed as tool `tool`, would meet the tools already installed for the calling Anima
 * (all of core and shared without one). The precedence is the registry's (registry.ts `sources()`): a
 * core tool wins over everything, and a shared or personal tool named like one is skipped; a personal
 * tool overrides a shared one of its name for its Anima. Schema names must stay unique across what one
 * Anima sees: a schema belongs to the longest tool name that prefixes it; of two tools that would share
 * one, the one of lower precedence is unavailable (registry/precedence.ts), so a new name can break the
 * draft or a tool already installed. Every such clash is an error: share refuses a tool that has one
 * with a core or shared tool.
 *
 * The installed tools come from the host's public API (`list`, `describe`), so a long-running host
 * answers as freshly as for a call.
 */
export function installedToolsCheck(host: Pick<ToolHost, "list" | "describe">, anima: string | undefined): InstalledToolsCheck {
  return async (tool, schemas) => {
    const listing = await host.list(anima);
    const same = listing.tools.find((info) => info.name === tool);
    if (same?.origin === "core") {
      return [
        error(
          "shadowing",
          `a core tool named "${tool}" exists: a shared or personal tool of that name would be skipped; choose another name (rename the file, or check it with --name NAME)`,
        ),
      ];
    }
    const findings: Finding[] = [];
    if (same?.origin === "personal") {
      findings.push(
        warning("shadowing", `Anima "${anima}" already has a personal tool named "${tool}": installing this one as its personal tool would replace it`),
      );
    }
    // The Anima's own tool hides a shared one of the same name from its listing.
    const shared = same?.origin === "shared" || (same?.origin === "personal" && (await sharedToolExists(host, tool)));
    if (shared) {
      findings.push(
        warning(
          "shadowing",
          anima !== undefined
            ? `a shared tool named "${tool}" exists: as a personal tool of "${anima}" this one would override it for "${anima}" (personal tools take precedence over shared ones), and share would refuse it (it never overwrites)`
            : `a shared tool named "${tool}" exists: share would refuse this one (it never overwrites), and as a personal tool it would override the shared one for its Anima`,
        ),
      );
    }
    // Files of this name that are not loaded now (two files for one name, …): installing one more does not help.
    for (const problem of listing.problems) {
      if (problem.name === tool && problem.origin !== "core")
        findings.push(warning("shadowing", `an installed ${problem.origin} file for "${tool}" is not loaded now: ${problem.message}`));
    }
    findings.push(
      ...schemaCollisions(
        tool,
        schemas,
        listing.tools.filter((info) => info.name !== tool),
      ),
    );
    return findings;
  };
}

async function sharedToolExists(host: Pick<ToolHost, "describe">, tool: string): Promise<boolean> {
  try {
    return (await host.describe(undefined, tool)).origin === "shared";
  } catch (failure) {
    if (failure instanceof ToolHostError && failure.type === "ToolNotFound") return false;
    throw failure;
  }
}

function schemaCollisions(tool: string, schemas: string[] | undefined, others: ToolInfo[]): Finding[] {
  const findings: Finding[] = [];
  // The draft's schemas that a longer installed tool name would own. The draft is taken as a personal
  // tool: it wins over a shared tool (registry/precedence.ts), which share would refuse it for.
  const longer = others.filter((info) => info.name.startsWith(`${tool}_`)).sort((a, b) => b.name.length - a.name.length);
  for (const schema of schemas ?? []) {
    const owner = longer.find((info) => schema.startsWith(`${info.name}_`));
    if (!owner) continue;
    const action = `it is its action "${schema.slice(owner.name.length + 1)}"`;
    findings.push(
      error(
        "collisions",
        owner.origin === "shared"
          ? `schema "${schema}" belongs to the shared tool "${owner.name}" (${action}): as a personal tool this one takes precedence and "${owner.name}" would be unavailable to its Anima, and share would refuse it; rename the schema, or the tool`
          : `schema "${schema}" belongs to the ${owner.origin} tool "${owner.name}" (${action}): installed, this tool would not load; rename the schema, or the tool`,
      ),
    );
  }
  // Installed tools with a shorter name whose schemas this name would take over.
  for (const other of others) {
    if (other.status !== "ok" || !tool.startsWith(`${other.name}_`)) continue;
    const taken = other.schemas.map((schema) => schema.name).filter((name) => name.startsWith(`${tool}_`));
    if (taken.length === 0) continue;
    const declares = `the ${other.origin} tool "${other.name}" declares ${taken.map((name) => `"${name}"`).join(", ")}, which would belong to this tool`;
    findings.push(
      error(
        "collisions",
        other.origin === "core"
          ? `${declares}: the core tool takes precedence, so installed, this tool would be unavailable (and share would refuse it); choose another name`
          : `${declares}: installing it would make "${other.name}" fail to load; choose another name`,
      ),
    );
  }
  return findings;
}

function error(check: "shadowing" | "collisions", message: string): Finding {
  return { level: "error", check, message };
}

function warning(check: "shadowing" | "collisions", message: string): Finding {
  return { level: "warning", check, message };
}
