import type { ToolOrigin } from "./discovery.js";

/** What precedence needs of a tool as it declares itself (a registry `ToolEntry`). */
export type DeclaredTool =
  { name: string; origin: ToolOrigin; state: "ok"; tool: { schemas: readonly { name: string }[] } } | { name: string; origin: ToolOrigin; state: "error" };

/**
 * How the tools one Anima sees share the schema names (docs/animaworks-reference.md §3.3: a schema name
 * belongs to the longest visible tool name that prefixes it), with the host's precedence
 * core > personal > shared (README, "Tool precedence"):
 *
 * - A tool whose name, followed by `_`, starts a schema name of a tool of HIGHER precedence would take
 *   that schema name over. It gives way instead (`yieldsTo`): it is unavailable in that view and its name
 *   routes no schema name, so the higher tool keeps its schemas. A shared tool thus never takes a core
 *   or personal tool's action, whoever shared it; a personal tool never takes a core tool's.
 * - Otherwise (a longer name of the same or higher precedence), the tool whose schema is taken is the
 *   one unavailable (`findSchemaCollision`), as always.
 *
 * Both decisions are made per Anima view: a shared tool gives way only where the tool it collides with
 * is visible.
 */
export const ORIGIN_RANK: Readonly<Record<ToolOrigin, number>> = { core: 3, personal: 2, shared: 1 };

/** The tools one Anima sees, by name, with their origins. */
export type VisibleTools = ReadonlyMap<string, { origin: ToolOrigin }>;

/** The unavailable entry of a tool that gives way to `yieldsTo`, or undefined when it does not. */
export interface Yield {
  yieldsTo: string;
  message: string;
}

/**
 * Whether `tool` gives way to one of `higher`: the declared entries (before any collision check) of the
 * visible tools of higher precedence whose name followed by `_` starts `tool`'s name. One that does not
 * load counts as colliding: which schema names it declares cannot be told, and a call meant for it must
 * never reach this tool instead.
 */
export function yieldOf(tool: { name: string; origin: ToolOrigin }, higher: readonly DeclaredTool[]): Yield | undefined {
  const prefix = `${tool.name}_`;
  for (const other of higher) {
    const who = `the ${other.origin} tool "${other.name}"`;
    if (other.state !== "ok") {
      return {
        yieldsTo: other.name,
        message: `${tool.name}: ${tool.origin} tool "${tool.name}" is unavailable here: ${who}, which takes precedence, does not load, so whether it has schema names starting with "${prefix}" cannot be told; rename "${tool.name}" to a name that does not start with "${other.name}_"`,
      };
    }
    const taken = other.tool.schemas.find((schema) => schema.name.startsWith(prefix));
    if (taken) {
      return {
        yieldsTo: other.name,
        message: `${tool.name}: ${tool.origin} tool "${tool.name}" collides with ${who}: its schema "${taken.name}" would be routed to "${tool.name}" (as action "${taken.name.slice(prefix.length)}"); ${who} takes precedence, so "${tool.name}" is unavailable here; rename "${tool.name}" so that no schema of "${other.name}" starts with its name and "_"`,
      };
    }
  }
  return undefined;
}

/** The names of `visible` of higher precedence than `tool` whose name followed by `_` starts `tool`'s name. */
export function higherPrefixes(tool: { name: string; origin: ToolOrigin }, visible: VisibleTools): string[] {
  const rank = ORIGIN_RANK[tool.origin];
  return [...visible].filter(([name, other]) => tool.name.startsWith(`${name}_`) && ORIGIN_RANK[other.origin] > rank).map(([name]) => name);
}

/**
 * A schema name belongs to the longest visible tool name that prefixes it (`image_gen_3d` → `image_gen`
 * when both `image` and `image_gen` exist). A tool that declares a name belonging to another tool of the
 * same or higher precedence is unavailable, so that schema names stay unique across everything one Anima
 * sees. A longer name of lower precedence takes nothing: that tool gives way (`yieldOf`).
 */
export function findSchemaCollision(
  tool: { name: string; origin: ToolOrigin; schemas: readonly { name: string }[] },
  visible: VisibleTools,
): string | undefined {
  const rank = ORIGIN_RANK[tool.origin];
  const longer = [...visible]
    .filter(([name, other]) => name.length > tool.name.length && name.startsWith(`${tool.name}_`) && ORIGIN_RANK[other.origin] >= rank)
    .map(([name]) => name)
    .sort((a, b) => b.length - a.length);
  for (const schema of tool.schemas) {
    const owner = longer.find((name) => schema.name.startsWith(`${name}_`));
    if (owner) {
      return `${tool.name}: schema "${schema.name}" collides with tool "${owner}" (it would be ${owner}'s action "${schema.name.slice(owner.length + 1)}"); rename the schema`;
    }
  }
  return undefined;
}
