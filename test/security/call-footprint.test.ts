import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { type Server, createServer } from "node:http";
import type { Socket } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { HOSTILE_DIR, PROJECT_ROOT } from "./harness.js";

/**
 * A call's capability work ends with the call: fetches a tool started and left behind are aborted when
 * it returns (their sockets close), and the one-shot CLI exits right after printing the result.
 */
describe("a call's footprint ends with the call", () => {
  let server: Server;
  let url: string;
  const open = new Set<Socket>();
  let connections = 0;
  let data: TempDataDir;

  beforeAll(async () => {
    // Answers nothing, ever: a fetch to it lasts until someone closes the connection.
    server = createServer(() => undefined);
    server.on("connection", (socket) => {
      connections++;
      open.add(socket);
      socket.on("close", () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/slow`;
    data = makeDataDir({ "animas/eve/tools/leaves_fetches_open.ts": readFileSync(join(HOSTILE_DIR, "leaves_fetches_open.ts"), "utf8") });
  });
  afterAll(async () => {
    for (const socket of open) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
    data.cleanup();
  });

  for (const isolation of ["process", "in-process"] as const) {
    it(`fetches left open are closed when the call returns (${isolation})`, async () => {
      const host: ToolHost = createHost({ dataDir: data.dir, isolation, allowInternalHosts: ["127.0.0.1"], timeoutMs: 10_000, onLog: () => {} });
      try {
        const before = connections;
        const result = await host.call("eve", "leaves_fetches_open_run", { url });
        expect(result).toMatchObject({ status: "ok", output: "returned" });
        expect(connections - before).toBe(8); // the fetches were under way when the call returned
        const returnedAt = performance.now();
        await waitFor(() => open.size === 0, 2_000, 5);
        expect(performance.now() - returnedAt).toBeLessThan(1_000);
      } finally {
        await host.close();
      }
    });
  }

  it("the one-shot CLI exits within a second of printing the result", async () => {
    const started = performance.now();
    const child = spawn(process.execPath, ["--no-node-snapshot", join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"), "--data-dir", data.dir, "--anima", "eve", "leaves_fetches_open", "run", url], {
      env: { ...process.env, ANIMAWORKS_ALLOW_INTERNAL_HOSTS: "127.0.0.1", ANIMAWORKS_OS_SANDBOX: "auto" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let printedAt: number | undefined;
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += String(chunk);
      printedAt ??= performance.now();
    });
    const before = connections;
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    expect(connections - before).toBe(8);
    const exitedAt = performance.now();
    expect(stdout.trim()).toBe("returned");
    expect(code).toBe(0);
    expect(exitedAt - (printedAt ?? started)).toBeLessThan(1_000);
    await waitFor(() => open.size === 0, 2_000, 5);
  }, 20_000);
});
