import { type FileSettings, SETTINGS, type SettingSpec } from "./operator-config.js";
import { ToolHostError } from "./errors.js";

/**
 * The settings an environment sets (variables named in `SETTINGS`; empty means unset), checked: a
 * variable overrides config.json (config.ts), and a wrong value is the caller's error (its shell set it).
 */
export function environmentSettings(env: Readonly<Record<string, string | undefined>>): FileSettings {
  const settings: Record<string, unknown> = {};
  for (const spec of SETTINGS) {
    const text = spec.env === undefined ? undefined : env[spec.env]?.trim();
    if (text === undefined || text === "") continue;
    settings[spec.field] = environmentValue(spec, text);
  }
  if (/^(1|true|yes)$/i.test(env["ANIMAWORKS_NO_DAEMON"]?.trim() ?? "")) settings["daemon"] = false;
  return settings;
}

function environmentValue(spec: SettingSpec, text: string): unknown {
  const variable = spec.env as string;
  if (spec.schema["type"] === "array") {
    const items = text
      .split(",")
      .map((item) => item.trim())
      .filter(Boolean);
    const pattern = (spec.schema["items"] as { pattern?: string }).pattern;
    const bad = pattern === undefined ? undefined : items.find((item) => !new RegExp(pattern).test(item));
    if (bad !== undefined)
      throw new ToolHostError(
        "InvalidArguments",
        `$${variable} lists ${JSON.stringify(bad)}, which is not a variable name`,
        "a comma-separated list of names, e.g. WEATHER_API_KEY,GITHUB_TOKEN",
      );
    return items;
  }
  const allowed = spec.schema["enum"] as string[] | undefined;
  if (allowed !== undefined) {
    const value = spec.key === "log_level" ? text.toLowerCase() : text;
    if (!allowed.includes(value)) throw new ToolHostError("InvalidArguments", `$${variable} must be ${allowed.join(", ")}, not ${JSON.stringify(text)}`);
    return value;
  }
  if (spec.schema["type"] === "number") return checkedSeconds(text, `$${variable}`);
  return text;
}

/** A number of seconds (a daemon's idle time) given as text by `source` (named in the error). */
export function checkedSeconds(text: string, source: string): number {
  const seconds = Number(text);
  if (text.trim() === "" || !Number.isFinite(seconds) || seconds <= 0 || seconds > 2_147_483) {
    throw new ToolHostError("InvalidArguments", `${source} must be a number of seconds from 1 to 2,147,483, got "${text}"`);
  }
  return seconds;
}
