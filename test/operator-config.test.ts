import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { resolveConfig, settingDifference } from "../src/config.js";
import { HOST_DEFAULTS, MAX_MEMORY_LIMIT_MB, MAX_SETTING_MS } from "../src/host-defaults.js";
import { SETTINGS, maskUrlPassword } from "../src/operator-config.js";
import { effectiveSettings } from "../src/audit/effective-config.js";
import { type TempDataDir, makeDataDir } from "./helpers/data-dir.js";
import { thrownToolError } from "./helpers/errors.js";
import { REPO_ROOT, okOutput, simpleTool, useTestHost } from "./helpers/tools.js";
import { DEFAULT_PROCESS_MEMORY_MB } from "../src/isolation/os/resource-watchdog.js";

let data: TempDataDir | undefined;
afterEach(() => {
  data?.cleanup();
  data = undefined;
});

function withConfig(section: unknown, rest: Record<string, unknown> = {}): TempDataDir {
  data = makeDataDir({ "config.json": JSON.stringify({ ...rest, animaworks_tool: section }) });
  return data;
}

/** Each of `wrong` as `key` in `dir`'s config.json is the operator's error naming the key; the file is `{}` afterwards. */
function expectRefusedInFile(dir: string, key: string, wrong: readonly unknown[]): void {
  for (const value of wrong) {
    writeFileSync(join(dir, "config.json"), JSON.stringify({ animaworks_tool: { [key]: value } }));
    expect(thrownToolError(() => resolveConfig({ dataDir: dir }, {}))).toMatchObject({
      type: "ToolConfigError",
      message: expect.stringContaining(`animaworks_tool.${key} must be`),
    });
  }
  writeFileSync(join(dir, "config.json"), "{}");
}

describe("a section of notes only (as init writes it)", () => {
  it("sets nothing, and a process reading it never loads the schema validator (ajv: ≈ 100 ms of a one-shot call)", () => {
    const script = `
      import { createRequire } from "node:module";
      import { parseOperatorFile } from ${JSON.stringify(join(REPO_ROOT, "dist", "src", "operator-config.js"))};
      const file = parseOperatorFile("config.json", JSON.stringify({ animaworks_tool: { "//": "a note", "//timeout_ms": "another" } }));
      const loaded = Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes("/node_modules/ajv/"));
      console.log(JSON.stringify({ settings: file.settings, loaded }));`;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 30_000 });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ settings: {}, loaded: false });
  });
});

describe("operator configuration (config.json animaworks_tool)", () => {
  it("takes each setting from the option, else its variable, else the file, else the default, and says which", () => {
    const { dir } = withConfig({
      timeout_ms: 5_000,
      allow_internal_hosts: ["10.0.0.1"],
      os_sandbox: "off",
      log_level: "warn",
      fs_limits: { max_files: 10 },
      daemon_idle_seconds: 60,
    });
    const config = resolveConfig({ dataDir: dir, osSandbox: "required" }, { ANIMAWORKS_ALLOW_INTERNAL_HOSTS: "127.0.0.1, ::1", ANIMAWORKS_LOG_LEVEL: "" });
    expect(config.timeoutMs).toBe(5_000);
    expect(config.allowInternalHosts).toEqual(["127.0.0.1", "::1"]);
    expect(config.osSandbox).toBe("required");
    expect(config.logLevel).toBe("warn"); // an empty variable counts as unset
    expect(config.fsLimits.maxFiles).toBe(10);
    expect(config.fsLimits.maxReadBytes).toBe(10 * 1024 * 1024);
    expect(config.daemon.idleTimeoutMs).toBe(60_000);
    expect(config.memoryLimitMb).toBe(128);
    expect(config.operator.sources).toMatchObject({
      timeout_ms: "file",
      allow_internal_hosts: "environment",
      os_sandbox: "option",
      log_level: "file",
      memory_limit_mb: "default",
      fs_limits: "file",
    });
    expect(config.operator.file).toBe(join(dir, "config.json"));
  });

  it("a config.json that is a FIFO or a device is refused at once, never read (a host reads it on every call)", () => {
    data = makeDataDir({});
    expect(spawnSync("mkfifo", [join(data.dir, "config.json")]).status).toBe(0);
    const error = thrownToolError(() => resolveConfig({ dataDir: data!.dir }, {}));
    expect(error).toMatchObject({ type: "ToolConfigError", fault: "host" });
    expect(error.message).toMatch(/config\.json is not a regular file \(it is a FIFO\)/);
    expect(error.hint).toMatch(/regular JSON file/);
  });

  it("cordons: an Anima in two groups is refused; the setting is read from the file", () => {
    const { dir } = withConfig({ cordons: { team: ["alice", "bob"] } });
    expect(resolveConfig({ dataDir: dir }, {}).cordons).toEqual({ team: ["alice", "bob"] });
    expect(resolveConfig({ dataDir: dir }, {}).sandboxProcesses).toBe(1);
    expect(resolveConfig({ dataDir: dir, cordons: "all" }, {}).sandboxProcesses).toBe(2);
    const error = thrownToolError(() => resolveConfig({ dataDir: dir, cordons: { a: ["alice"], b: ["alice"] } }, {}));
    expect(error.message).toMatch(/Anima "alice" is in both "a" and "b"/);
  });

  it("python interpreters: kept warm and spare as the file says, a negative or fractional count refused", () => {
    const { dir } = withConfig({ warm_python_interpreters: 0, spare_python_interpreter: false });
    expect(resolveConfig({ dataDir: dir }, {})).toMatchObject({ warmPythonInterpreters: 0, sparePythonInterpreter: false });
    expect(resolveConfig({ dataDir: join(dir, "missing") }, {})).toMatchObject({ warmPythonInterpreters: 2, sparePythonInterpreter: true });
    expectRefusedInFile(dir, "warm_python_interpreters", [-1, 1.5, "2"]);
    expect(() => resolveConfig({ dataDir: dir, warmPythonInterpreters: -1 })).toThrow(/warmPythonInterpreters must be a number of 0 or more/);
  });

  it("idle compaction: after as many ms as the file says, 0 for never, a negative or non-number refused", () => {
    const { dir } = withConfig({ compact_idle_isolates_after_ms: 0 });
    expect(resolveConfig({ dataDir: dir }, {}).compactIdleIsolatesAfterMs).toBe(0);
    expect(resolveConfig({ dataDir: join(dir, "missing") }, {}).compactIdleIsolatesAfterMs).toBe(30_000);
    expectRefusedInFile(dir, "compact_idle_isolates_after_ms", [-1, "30000", true]);
    expect(() => resolveConfig({ dataDir: dir, compactIdleIsolatesAfterMs: -5 })).toThrow(/compactIdleIsolatesAfterMs must be a number of 0 or more/);
  });

  it("tools per isolate: as many as the file says, 1 for an isolate per tool, 0 or a non-integer refused", () => {
    const { dir } = withConfig({ tools_per_isolate: 1 });
    expect(resolveConfig({ dataDir: dir }, {}).toolsPerIsolate).toBe(1);
    expect(resolveConfig({ dataDir: join(dir, "missing") }, {}).toolsPerIsolate).toBe(HOST_DEFAULTS.toolsPerIsolate);
    expectRefusedInFile(dir, "tools_per_isolate", [0, 2.5, "4", true]);
    expect(() => resolveConfig({ dataDir: dir, toolsPerIsolate: 0 })).toThrow(/toolsPerIsolate must be/);
  });

  it("bounds every duration by what a timer can wait and the heap limit by a sandbox process's memory cap", () => {
    // Beyond these, `timeout_ms: 3e9` passed validation, then every call failed at once blaming the tool
    // ("did not finish within 3000000000 ms"; Node fires a longer timer after 1 ms), `1e12` failed every
    // load, and `memory_limit_mb: 1e300` every call with isolated-vm's "`memoryLimit` must be at least 8".
    const { dir } = withConfig({});
    const durations = ["timeout_ms", "max_call_timeout_ms", "load_timeout_ms", "compact_idle_isolates_after_ms"];
    // Every setting in ms is bounded, including one added later.
    expect(SETTINGS.filter((spec) => spec.key.endsWith("_ms")).map((spec) => [spec.key, spec.schema["maximum"]])).toEqual(
      durations.map((key) => [key, MAX_SETTING_MS]),
    );
    expect(MAX_SETTING_MS).toBeLessThan(2 ** 31 - 1);
    for (const key of durations) expectRefusedInFile(dir, key, [3_000_000_000, 1e12, MAX_SETTING_MS + 1]);
    expectRefusedInFile(dir, "memory_limit_mb", [1e300, MAX_MEMORY_LIMIT_MB + 1]);
    // The operator's to fix, naming the setting, its range and the value.
    writeFileSync(join(dir, "config.json"), JSON.stringify({ animaworks_tool: { timeout_ms: 3_000_000_000, memory_limit_mb: 1e300 } }));
    const error = thrownToolError(() => resolveConfig({ dataDir: dir }, {}));
    expect(error).toMatchObject({ type: "ToolConfigError", fault: "host" });
    expect(error.message).toContain("animaworks_tool.timeout_ms must be <= 2000000000 (it takes more than 0 to 2,000,000,000, got 3000000000)");
    expect(error.message).toContain("animaworks_tool.memory_limit_mb must be <= 1024 (it takes 8 to 1,024, got 1e+300)");
    expect(error.hint).toMatch(/"timeout_ms", "memory_limit_mb"/);
    // The bounds themselves are taken.
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({ animaworks_tool: Object.fromEntries([...durations.map((key) => [key, MAX_SETTING_MS]), ["memory_limit_mb", MAX_MEMORY_LIMIT_MB]]) }),
    );
    expect(resolveConfig({ dataDir: dir }, {})).toMatchObject({ timeoutMs: MAX_SETTING_MS, loadTimeoutMs: MAX_SETTING_MS, memoryLimitMb: MAX_MEMORY_LIMIT_MB });
    // A library caller's options are held to the same bounds.
    expect(() => resolveConfig({ dataDir: dir, timeoutMs: 3_000_000_000 }, {})).toThrow(
      /timeoutMs must be a positive number of at most 2,000,000,000, got 3000000000/,
    );
    expect(() => resolveConfig({ dataDir: dir, loadTimeoutMs: 1e12 }, {})).toThrow(/loadTimeoutMs must be a positive number of at most/);
    expect(() => resolveConfig({ dataDir: dir, maxCallTimeoutMs: 1e12 }, {})).toThrow(/maxCallTimeoutMs must be a positive number of at most/);
    expect(() => resolveConfig({ dataDir: dir, compactIdleIsolatesAfterMs: 1e12 }, {})).toThrow(
      /compactIdleIsolatesAfterMs must be a number from 0 to 2,000,000,000/,
    );
    expect(() => resolveConfig({ dataDir: dir, memoryLimitMb: 1e300 }, {})).toThrow(/memoryLimitMb must be a positive number of at most 1,024/);
    // A larger heap would meet the watchdog's kill of the whole sandbox process, not the tool's MemoryLimit.
    expect(MAX_MEMORY_LIMIT_MB).toBe(DEFAULT_PROCESS_MEMORY_MB);
  });

  it("a host at the largest timeouts serves calls (no timer overflows into an immediate timeout)", async () => {
    const t = useTestHost({ timeoutMs: MAX_SETTING_MS, loadTimeoutMs: MAX_SETTING_MS });
    try {
      t.personal("alpha.ts", simpleTool("alpha"));
      expect(okOutput(await t.host.call("alice", "alpha_run", { n: 1 }))).toMatch(/"tool": "alpha"/);
    } finally {
      await t.close();
    }
  });

  it("without the section (or the file) changes nothing", () => {
    data = makeDataDir({ "config.json": JSON.stringify({ credentials: {} }) });
    const config = resolveConfig({ dataDir: data.dir }, {});
    expect(config.operator.fingerprint).toBe("");
    expect(config.timeoutMs).toBe(30_000);
    expect(Object.values(config.operator.sources).every((source) => source === "default")).toBe(true);
    expect(resolveConfig({ dataDir: join(data.dir, "missing") }, {}).timeoutMs).toBe(30_000);
  });

  it("refuses a wrong section at start, naming every wrong key", () => {
    const { dir } = withConfig({
      timeout: 5,
      os_sandbox: "maybe",
      jobs_url: 3,
      fs_limits: { max: 1 },
      memory_limit_mb: 4,
      allowed_environment: ["OK_NAME", "not a name"],
    });
    const error = thrownToolError(() => resolveConfig({ dataDir: dir }, {}));
    // The operator's file, not the caller's arguments: the operator must act (exit 1).
    expect(error).toMatchObject({ type: "ToolConfigError", fault: "host", exitCode: 1 });
    for (const key of ["timeout", "os_sandbox", "jobs_url", "fs_limits", "memory_limit_mb", "allowed_environment"]) expect(error.hint).toContain(`"${key}"`);
    expect(error.hint).toContain(`section of ${join(dir, "config.json")}`);
    for (const key of [
      "animaworks_tool.timeout is not a setting",
      'animaworks_tool.os_sandbox must be one of "auto", "required", "off"',
      "animaworks_tool.jobs_url must be string",
      "animaworks_tool.fs_limits.max is not a setting",
      "animaworks_tool.memory_limit_mb must be >= 8",
      "animaworks_tool.allowed_environment.1 must match pattern",
    ]) {
      expect(error.message).toContain(key);
    }
    expect(error.message).toContain(join(dir, "config.json"));
  });

  it("refuses a config.json that is not JSON, and wrong variables by name", () => {
    data = makeDataDir({ "config.json": "{ not json" });
    const notJson = thrownToolError(() => resolveConfig({ dataDir: data!.dir }, {}));
    expect(notJson).toMatchObject({ type: "ToolConfigError", fault: "host", message: expect.stringMatching(/config\.json is not valid JSON/) });
    expect(notJson.hint).toContain(join(data.dir, "config.json"));
    writeFileSync(join(data.dir, "config.json"), "{}");
    expect(thrownToolError(() => resolveConfig({ dataDir: data!.dir }, { ANIMAWORKS_ALLOWED_ENVIRONMENT: "GOOD,BAD-NAME" })).message).toContain(
      '$ANIMAWORKS_ALLOWED_ENVIRONMENT lists "BAD-NAME"',
    );
    expect(thrownToolError(() => resolveConfig({ dataDir: data!.dir }, { ANIMAWORKS_OS_SANDBOX: "sometimes" })).message).toContain(
      "$ANIMAWORKS_OS_SANDBOX must be auto, required, off",
    );
  });

  it("types a wrong value by who set it: from config.json the operator's (ToolConfigError naming file and key), else the caller's", () => {
    // (Both pass the section's schema, which the value's own check then refuses.)
    const { dir } = withConfig({ jobs_url: "postgres://[::1", cordons: { a: ["alice"], b: ["alice"] } });
    const fromFile = thrownToolError(() => resolveConfig({ dataDir: dir, cordons: "anima" }, {}));
    expect(fromFile).toMatchObject({ type: "ToolConfigError", fault: "host", exitCode: 1, message: expect.stringContaining("must be a postgres:// URL") });
    expect(fromFile.hint).toBe(
      `fix "jobs_url" in the "animaworks_tool" section of ${join(dir, "config.json")} (e.g. postgres://user@db.example:5432/animaworks)`,
    );
    const cordons = thrownToolError(() => resolveConfig({ dataDir: dir, jobsUrl: "postgres://db/jobs" }, {}));
    expect(cordons).toMatchObject({ type: "ToolConfigError", message: expect.stringContaining('Anima "alice" is in both') });
    expect(cordons.hint).toContain('fix "cordons" in the "animaworks_tool" section');
    // The same mistakes made by this run's flag or variable are the caller's.
    const fromFlag = thrownToolError(() => resolveConfig({ dataDir: dir, jobsUrl: "mysql://db/jobs", cordons: "anima" }, {}));
    expect(fromFlag).toMatchObject({ type: "InvalidArguments", fault: "caller", exitCode: 2 });
    expect(thrownToolError(() => resolveConfig({ dataDir: dir, cordons: "anima" }, { ANIMAWORKS_JOBS_URL: "mysql://x/y" })).type).toBe("InvalidArguments");
  });

  it("snapshots only the allowed variables, from the environment it is given", () => {
    const { dir } = withConfig({ allowed_environment: ["WEATHER_API_KEY"] });
    const config = resolveConfig({ dataDir: dir }, { WEATHER_API_KEY: "k-1", AWS_SECRET_ACCESS_KEY: "never" });
    expect(config.environment).toEqual({ WEATHER_API_KEY: "k-1" });
    expect(resolveConfig({ dataDir: dir }, { ANIMAWORKS_ALLOWED_ENVIRONMENT: "OTHER", OTHER: "o" }).environment).toEqual({ OTHER: "o" });
  });

  it("names the first setting two configurations differ in, never a value", () => {
    const { dir } = withConfig({ allowed_environment: ["WEATHER_API_KEY"], timeout_ms: 1_000 });
    const a = resolveConfig({ dataDir: dir }, { WEATHER_API_KEY: "secret-a" });
    expect(settingDifference(a, resolveConfig({ dataDir: dir }, { WEATHER_API_KEY: "secret-a", ANIMAWORKS_LOG_LEVEL: "error" }))).toBeUndefined();
    const b = resolveConfig({ dataDir: dir }, { WEATHER_API_KEY: "secret-b" });
    const difference = settingDifference(a, b);
    expect(difference).toContain("WEATHER_API_KEY");
    expect(difference).not.toContain("secret");
    expect(settingDifference(a, resolveConfig({ dataDir: dir, osSandbox: "off" }, { WEATHER_API_KEY: "secret-a" }))).toBe("its os_sandbox differs");
  });

  it("shows the settings in force with passwords masked", () => {
    const { dir } = withConfig({ jobs_url: "postgres://worker:hunter2@db.internal:5432/jobs" });
    const shown = effectiveSettings(resolveConfig({ dataDir: dir }, {}));
    expect(shown.map((setting) => setting.key)).toEqual(SETTINGS.map((spec) => spec.key));
    expect(shown.find((setting) => setting.key === "jobs_url")).toEqual({
      key: "jobs_url",
      value: "postgres://worker:***@db.internal:5432/jobs",
      source: "file",
    });
    expect(JSON.stringify(shown)).not.toContain("hunter2");
    expect(maskUrlPassword("postgres://u@h/db")).toBe("postgres://u@h/db");
  });

  it("is documented: the README's table lists every setting and its variable", () => {
    const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
    const table = readme.slice(readme.indexOf("### Operator configuration"), readme.indexOf("### The library"));
    for (const spec of SETTINGS) {
      expect(table).toContain(`| \`${spec.key}\` |`);
      if (spec.env) expect(table).toContain(spec.env);
    }
  });
});
