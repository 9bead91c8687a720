import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { resolveConfig } from "../src/config.js";
import { HOST_DEFAULTS, MIN_MEMORY_LIMIT_MB } from "../src/host-defaults.js";
import { PROJECT_ROOT } from "../src/project-root.js";
import { DEFAULT_PYTHON_INTERPRETERS, TOOLS_PER_ISOLATE } from "../src/isolation/isolate/isolate-runner-options.js";
import { COMPACT_IDLE_AFTER_MS } from "../src/isolation/isolate/idle-compaction.js";
import { makeDataDir } from "./helpers/data-dir.js";

/**
 * `HOST_DEFAULTS` is the one place code takes a host option's default from; `HostOptions` documents each
 * option with its default for readers. These fail when the resolved configuration or the documentation
 * says something else.
 */
const data = makeDataDir();
afterAll(() => data.cleanup());

/** Every default that is a plain value (the others depend on another setting). */
const SCALARS = Object.entries(HOST_DEFAULTS).filter(([, value]) => typeof value !== "function" && typeof value !== "object") as Array<
  [keyof typeof HOST_DEFAULTS, number | string | boolean]
>;

describe("HOST_DEFAULTS", () => {
  it("is what a host gets when nothing is set (no option, variable or config.json)", () => {
    const config = resolveConfig({ dataDir: data.dir }, {});
    const resolved: Record<string, unknown> = { ...config, daemon: config.daemon.enabled, daemonIdleTimeoutMs: config.daemon.idleTimeoutMs };
    for (const [name, value] of SCALARS) expect(resolved[name], name).toEqual(value);
    expect(config.fsLimits).toEqual(HOST_DEFAULTS.fsLimits);
    expect(config.sandboxProcesses).toBe(HOST_DEFAULTS.sandboxProcesses("anima"));
    expect(config.spareSandboxProcesses).toBe(HOST_DEFAULTS.spareSandboxProcesses("anima"));
    const all = resolveConfig({ dataDir: data.dir, cordons: "all" }, {});
    expect([all.sandboxProcesses, all.spareSandboxProcesses]).toEqual([2, 0]);
    expect(config.warmIsolatesMb).toBeGreaterThanOrEqual(256);
    expect(config.warmIsolatesMb).toBeLessThanOrEqual(8_192);
    expect([HOST_DEFAULTS.warmIsolatesMb(24 * 1024), HOST_DEFAULTS.warmIsolatesMb(512), HOST_DEFAULTS.warmIsolatesMb(10 ** 6)]).toEqual([4_096, 256, 8_192]);
    expect(resolveConfig({ dataDir: data.dir, memoryLimitMb: 1 }, {}).memoryLimitMb).toBe(MIN_MEMORY_LIMIT_MB);
    // src/isolation/ may not import HOST_DEFAULTS: the fallback of a runner or sandbox process given none is the same.
    expect(DEFAULT_PYTHON_INTERPRETERS).toEqual({ warm: HOST_DEFAULTS.warmPythonInterpreters, spare: HOST_DEFAULTS.sparePythonInterpreter });
    expect(COMPACT_IDLE_AFTER_MS).toBe(HOST_DEFAULTS.compactIdleIsolatesAfterMs);
    expect(TOOLS_PER_ISOLATE).toBe(HOST_DEFAULTS.toolsPerIsolate);
  });

  it("is the default each HostOptions field documents", () => {
    const source = readFileSync(join(PROJECT_ROOT, "src", "host-options.ts"), "utf8");
    const documented = (field: string): string | undefined => {
      const doc = new RegExp(`/\\*\\*((?:(?!\\*/)[\\s\\S])*)\\*/\\s*${field}\\?:`).exec(source)?.[1];
      return doc === undefined ? undefined : /Default:([\s\S]*)$/.exec(doc.replace(/\s*\*\s*/g, " "))?.[1];
    };
    const spelled = (value: number | string | boolean): string =>
      typeof value === "string"
        ? `"${value}"`
        : value === Number.POSITIVE_INFINITY
          ? "no limit"
          : typeof value === "number"
            ? value.toLocaleString("en-US")
            : String(value);
    const fields = SCALARS.filter(([name]) => documented(name) !== undefined);
    // The daemon's two settings are documented on DaemonSettings (src/config.ts), not as options.
    expect(SCALARS.filter(([name]) => documented(name) === undefined).map(([name]) => name)).toEqual(["daemon", "daemonIdleTimeoutMs"]);
    for (const [name, value] of fields) expect(documented(name), name).toContain(spelled(value));
  });
});
