import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigCredentialStore } from "../../src/credentials/stores.js";
import { SHARED_SCOPE, configCredentialKey } from "../../src/credentials/store.js";
import { Vault } from "../../src/credentials/vault.js";
import { ToolHostError } from "../../src/errors.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { loadPermissions } from "../../src/policy/permissions.js";
import { type TempDataDir, makeDataDir, within } from "../helpers/data-dir.js";

/**
 * Attack: an Anima's owner (or anyone who can write its folder) puts a FIFO, or a device, where the host
 * reads a file on every call that needs it — permissions.json, config.json's credentials, the vault — to
 * hold a long-running host that serves every Anima (a read of a FIFO waits for a writer forever, and holds
 * one of libuv's four file threads meanwhile). The host reads them as regular files only, to a bound:
 * the call that needs one fails with an error naming the file, and the host keeps serving.
 */

const mkfifo = (path: string): void => void execFileSync("mkfifo", [path]);

const FETCHER = `
import { fetch } from "@animaworks/tool";
export function get_tool_schemas() { return [{ name: "probe_get", description: "get" }]; }
export async function dispatch() { const r = await fetch("https://example.invalid/"); return r.status; }
`;
const ECHO = `
export function get_tool_schemas() { return [{ name: "echo_say", description: "say", input_schema: { type: "object", properties: { text: { type: "string" } } } }]; }
export function dispatch(name, args) { return String(args.text); }
`;

describe("a FIFO among the data dir's files the host reads on a call", () => {
  let data: TempDataDir;
  let host: ToolHost;

  beforeAll(() => {
    data = makeDataDir({ "animas/mallory/tools/probe.ts": FETCHER, "animas/alice/tools/echo.ts": ECHO });
    mkfifo(join(data.dir, "animas", "mallory", "permissions.json"));
    host = createHost({ dataDir: data.dir, isolation: "in-process", onLog: () => {} });
  });
  afterAll(async () => {
    await host?.close();
    data?.cleanup();
  });

  it("permissions.json: the call that needs it is refused naming the file, and the host serves the next call", async () => {
    const result = await within(20_000, "mallory's call", host.call("mallory", "probe_get", {}));
    expect(result).toMatchObject({ status: "error", error_type: "PermissionDenied" });
    expect(result.status === "error" && result.message).toMatch(/permissions\.json is invalid: it is not a regular file \(it is a FIFO\)/);
    expect(await within(20_000, "alice's call", host.call("alice", "echo_say", { text: "still here" }))).toMatchObject({ status: "ok", output: "still here" });
    // And again: nothing was left waiting on the FIFO (each of libuv's file threads would be held).
    const again = await Promise.all([1, 2, 3, 4, 5].map(() => within(20_000, "mallory's calls", host.call("mallory", "probe_get", {}))));
    expect(again.every((r) => r.status === "error" && r.error_type === "PermissionDenied")).toBe(true);
    expect(await within(20_000, "alice's call", host.call("alice", "echo_say", { text: "and after" }))).toMatchObject({ status: "ok", output: "and after" });
  });

  it("permissions.json as a device is refused too (it never ends)", async () => {
    const dir = makeDataDir();
    try {
      execFileSync("ln", ["-s", "/dev/zero", join(dir.dir, "permissions.json")]);
      await expect(within(10_000, "loadPermissions", loadPermissions(dir.dir))).rejects.toThrow(
        /permissions\.json is invalid: it is not a regular file \(it is a character device\)/,
      );
    } finally {
      dir.cleanup();
    }
  });

  it("config.json's credentials: an error naming the file, at once", async () => {
    const dir = makeDataDir();
    try {
      mkfifo(join(dir.dir, "config.json"));
      const store = new ConfigCredentialStore(join(dir.dir, "config.json"));
      const error = await within(10_000, "credential", store.get(SHARED_SCOPE, configCredentialKey("myapi"))).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ToolHostError);
      expect((error as Error).message).toMatch(/is not a regular file \(it is a FIFO\)/);
    } finally {
      dir.cleanup();
    }
  });

  it("vault.json and vault.key: read as empty and missing, with a warning, at once", async () => {
    const dir = makeDataDir();
    try {
      mkfifo(join(dir.dir, "vault.json"));
      mkfifo(join(dir.dir, "vault.key"));
      const warnings: string[] = [];
      const vault = new Vault(dir.dir, { log: (record) => void warnings.push(record.message) });
      expect(await within(10_000, "vault", vault.get("shared", "ANY"))).toBeUndefined();
      expect(await within(10_000, "vault key", vault.hasKey())).toBe(false);
      expect(warnings.join("\n")).toMatch(/vault\.json at .* is not a regular file \(it is a FIFO\)/);
      expect(warnings.join("\n")).toMatch(/vault key .* is not a regular file \(it is a FIFO\)/);
    } finally {
      dir.cleanup();
    }
  });
});
