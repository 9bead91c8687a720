/**
 * Cordons: the groups of Animas whose tools may share a sandbox process. A sandbox process runs the code
 * of one cordon only, for its whole life (a process once used for one cordon is never handed to
 * another), so that code that escaped an isolate reaches the Animas of its own cordon and no one else:
 * inside a cordon an isolate escape reaches the cordon's other Animas, across cordons it reaches nothing.
 *
 * Settings (`HostOptions.cordons`, config.json `cordons`):
 *  - `"anima"` (the default): every Anima is a cordon of its own.
 *  - `"all"`: all Animas in one cordon (the density of a host before cordons; only for Animas that
 *    trust each other).
 *  - `{ "<name>": ["anima", …], … }`: named groups; an Anima in no group is a cordon of its own.
 */
export type CordonSetting = "anima" | "all" | Readonly<Record<string, readonly string[]>>;

/** The cordon of `anima` under `setting`: a name that no other cordon has. */
export function cordonOf(setting: CordonSetting, anima: string): string {
  if (setting === "all") return "all";
  if (setting !== "anima") {
    for (const [name, members] of Object.entries(setting)) if (members.includes(anima)) return `group:${name}`;
  }
  return `anima:${anima}`;
}

/** The other Animas listed in `anima`'s cordon, or "all" when every Anima shares one. */
export function cordonMates(setting: CordonSetting, anima: string): string[] | "all" {
  if (setting === "all") return "all";
  if (setting === "anima") return [];
  for (const members of Object.values(setting)) if (members.includes(anima)) return members.filter((member) => member !== anima);
  return [];
}

/** How the setting reads in `audit`. */
export function describeCordons(setting: CordonSetting): string {
  if (setting === "anima") return "one cordon per Anima: no sandbox process runs two Animas' code";
  if (setting === "all") return "all Animas in one cordon: their tools share sandbox processes (an isolate escape reaches every Anima)";
  const groups = Object.entries(setting).map(([name, members]) => `${name} (${members.join(", ")})`);
  return `cordons ${groups.join("; ")}; every other Anima a cordon of its own`;
}
