import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { Socket } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";
import { HOSTILE_DIR, PROJECT_ROOT } from "./harness.js";

/**
 * A call's capability work ends with the call: fetches a tool started and left behind are aborted when
 * it returns (their sockets close), and the one-shot CLI exits right after printing the result.
 *
 * The tool starts 8 fetches with a 60 s timeout and returns: what keeps them, or the CLI, alive past the
 * call would show for a minute. Each test has a server of its own, so that it counts only its own
 * connections, and asserts what happened (connections made, all closed, the CLI gone), never how fast:
 * the bounds below only catch a hang, well short of the fetches' 60 s.
 */
const HANG_MS = 15_000;
/** The fixture's fetches: at most this many connections (a loaded machine may connect fewer before the call returns). */
const FETCHES = 8;

/** A server that answers nothing, ever: a fetch to it lasts until someone closes the connection. */
async function silentServer() {
  const open = new Set<Socket>();
  let connections = 0;
  const server = createServer(() => undefined);
  server.on("connection", (socket) => {
    connections++;
    open.add(socket);
    socket.on("close", () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/slow`,
    open,
    connections: () => connections,
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("a call's footprint ends with the call", () => {
  let data: TempDataDir;

  beforeAll(() => {
    data = makeDataDir({ "animas/eve/tools/leaves_fetches_open.ts": readFileSync(join(HOSTILE_DIR, "leaves_fetches_open.ts"), "utf8") });
  });
  afterAll(() => data.cleanup());

  for (const isolation of ["process", "in-process"] as const) {
    it(`fetches left open are closed when the call returns (${isolation})`, async () => {
      const server = await silentServer();
      const host: ToolHost = createHost({ dataDir: data.dir, isolation, allowInternalHosts: ["127.0.0.1"], timeoutMs: 10_000, onLog: () => {} });
      try {
        const result = await host.call("eve", "leaves_fetches_open_run", { url: server.url });
        expect(result).toMatchObject({ status: "ok", output: "returned" });
        // The fetches were under way when the call returned (the tool waits for them to connect), and
        // every connection they made is closed, long before their own timeout.
        await waitFor(() => server.connections() > 0 && server.open.size === 0, HANG_MS, 5);
        expect(server.connections()).toBeLessThanOrEqual(FETCHES);
      } finally {
        await host.close();
        await server.close();
      }
    });
  }

  it("the one-shot CLI exits once it has printed the result, without waiting for the fetches", async () => {
    const server = await silentServer();
    try {
      const child = spawn(
        process.execPath,
        [
          "--no-node-snapshot",
          join(PROJECT_ROOT, "bin", "animaworks-tool.cjs"),
          "--data-dir",
          data.dir,
          "--anima",
          "eve",
          "leaves_fetches_open",
          "run",
          server.url,
        ],
        {
          env: { ...process.env, ANIMAWORKS_ALLOW_INTERNAL_HOSTS: "127.0.0.1", ANIMAWORKS_OS_SANDBOX: "auto" },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let printedAt: number | undefined;
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += String(chunk);
        printedAt ??= performance.now();
      });
      const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
      const exitedAt = performance.now();
      expect(stdout.trim()).toBe("returned");
      expect(code).toBe(0);
      // Had it waited for its fetches, it would have lived for their 60 s.
      expect(exitedAt - (printedAt as number)).toBeLessThan(HANG_MS);
      await waitFor(() => server.connections() > 0 && server.open.size === 0, HANG_MS, 5);
      expect(server.connections()).toBeLessThanOrEqual(FETCHES);
    } finally {
      await server.close();
    }
  }, 60_000);
});
