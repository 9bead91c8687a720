import type { HostConfig } from "../config.js";
import { CONFIG_SECTION, SETTINGS, type SettingSource, maskUrlPassword } from "../operator-config.js";

/** One operator setting as in force: its value (secrets masked; never an environment variable's value) and where it came from. */
export interface EffectiveSetting {
  key: string;
  value: unknown;
  source: SettingSource;
}

/** Every operator setting of `config`, in `SETTINGS` order, as `audit` shows it. */
export function effectiveSettings(config: HostConfig): EffectiveSetting[] {
  return SETTINGS.map((spec) => {
    const value = valueOf(config, spec.field);
    return {
      key: spec.key,
      value: spec.secret && typeof value === "string" ? maskUrlPassword(value) : value,
      source: config.operator.sources[spec.key] ?? "default",
    };
  });
}

function valueOf(config: HostConfig, field: (typeof SETTINGS)[number]["field"]): unknown {
  switch (field) {
    case "daemon":
      return config.daemon.enabled;
    case "daemonIdleSeconds":
      return config.daemon.idleTimeoutMs / 1000;
    case "fsLimits":
      return Object.fromEntries(Object.entries(config.fsLimits).map(([name, limit]) => [name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), limit]));
    case "maxIdleIsolates":
      return Number.isFinite(config.maxIdleIsolates) ? config.maxIdleIsolates : null;
    default:
      return (config as unknown as Record<string, unknown>)[field] ?? null;
  }
}

export function formatSettings(config: HostConfig, settings: EffectiveSetting[]): string {
  const shown = (value: unknown): string => {
    if (typeof value === "string") return value;
    if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
    if (Array.isArray(value)) return value.length ? value.join(", ") : "(none)";
    if (typeof value === "object" && value !== null) {
      return Object.entries(value)
        .map(([k, v]) => `${k} ${String(v)}`)
        .join(", ");
    }
    return "(none)"; // null, or undefined: not set
  };
  return [
    `Configuration (flag > environment > "${CONFIG_SECTION}" in ${config.operator.file} > default):`,
    ...settings.map(
      (setting) =>
        `  ${setting.key}: ${setting.key === "mcp_core_tools" && setting.value === null ? "(every core tool)" : shown(setting.value)}${setting.source === "default" ? "" : ` [${setting.source === "option" ? "flag" : setting.source}]`}`,
    ),
  ].join("\n");
}
