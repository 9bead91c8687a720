import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_DAEMON_IDLE_SECONDS, claimDaemonNotice, daemonIdleSeconds, daemonNotice } from "../../src/cli/daemon-notice.js";
import { endpointPaths, makePrivateDir } from "../../src/endpoint/paths.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

// The notice a call gives when it leaves a daemon running (end to end: daemon.test.ts).

describe("the daemon notice", () => {
  let data: TempDataDir | undefined;
  afterEach(() => data?.cleanup());

  it("is claimed once per data dir (and machine)", () => {
    data = makeDataDir();
    const paths = endpointPaths(data.dir, hostname());
    makePrivateDir(paths.dir);
    expect(claimDaemonNotice(paths)).toBe(true);
    expect(claimDaemonNotice(paths)).toBe(false);
    expect(claimDaemonNotice(endpointPaths(data.dir, "another-machine"))).toBe(true);
  });

  it("names the idle time the daemon will have: the environment's, else config.json's, else 15 minutes", () => {
    expect(daemonIdleSeconds("120", 600)).toBe(120);
    expect(daemonIdleSeconds(undefined, 600)).toBe(600);
    expect(daemonIdleSeconds("", 600)).toBe(600);
    expect(daemonIdleSeconds(undefined, undefined)).toBe(DEFAULT_DAEMON_IDLE_SECONDS);
    // Invalid values are the in-process call's to report; the notice does not guess from them.
    expect(daemonIdleSeconds("soon", "10")).toBe(DEFAULT_DAEMON_IDLE_SECONDS);
    expect(daemonIdleSeconds("-5", -1)).toBe(DEFAULT_DAEMON_IDLE_SECONDS);
  });

  it("says how to stop the daemon of exactly this data dir, as a command that can be pasted", () => {
    const text = daemonNotice(42, "/data/it's here", 900);
    expect(text).toMatch(/^Note: animaworks-tool started a daemon \(pid 42\) for \/data\/it's here, /);
    expect(text).toContain("until 15 minutes pass without a call");
    expect(text).toContain(`Stop it now: animaworks-tool --data-dir '/data/it'\\''s here' daemon stop`);
    expect(text).toContain("--no-daemon, or ANIMAWORKS_NO_DAEMON=1");
    expect(text.endsWith("\n")).toBe(true);
    expect(daemonNotice(1, "/plain", 45)).toContain("until 45 s pass");
  });
});
