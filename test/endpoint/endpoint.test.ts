import { spawn, spawnSync } from "node:child_process";
import { chmodSync, lstatSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Socket, connect } from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { PROJECT_ROOT } from "../../src/project-root.js";
import { type ClientIo, runThroughHost } from "../../src/cli/client.js";
import { endpointPaths, makePrivateDir, readBuildInfo } from "../../src/endpoint/paths.js";
import { FrameDecoder, type HostMessage, PROTOCOL_VERSION, decodeHostMessage, encodeFrame } from "../../src/endpoint/protocol.js";
import { Endpoint } from "../../src/endpoint/server.js";
import { type ToolHost, createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir, waitFor } from "../helpers/data-dir.js";

const LOGGER = `
import { logger } from "@animaworks/tool";
export function get_tool_schemas() {
  return [
    { name: "logger_say", description: "logs and answers", input_schema: { type: "object", properties: { word: { type: "string" }, ms: { type: "integer" } }, required: ["word"] } },
    { name: "logger_spin", description: "never returns" },
  ];
}
export async function dispatch(name, args) {
  if (name === "logger_spin") { for (;;) {} }
  for (let i = 0; i < 5; i++) {
    logger.info("line " + i + " of " + args.word);
    await new Promise((resolve) => setTimeout(resolve, args.ms ?? 1));
  }
  return "said " + args.word;
}
`;

const build = readBuildInfo(PROJECT_ROOT);
let data: TempDataDir;
let host: ToolHost;
let endpoint: Endpoint;
const stopRequests: string[] = [];

function collectingIo(stdin = ""): ClientIo & { out: { 1: string[]; 2: string[] } } {
  const out = { 1: [] as string[], 2: [] as string[] };
  return { out, write: (fd, text) => void out[fd].push(text), readStdin: async () => stdin, isTerminal: () => false };
}

async function throughHost(argv: string[], options: { env?: Record<string, string>; cwd?: string; stdin?: string } = {}) {
  const io = collectingIo(options.stdin);
  const outcome = await runThroughHost(["--data-dir", data.dir, ...argv], io, {
    ...build,
    env: options.env ?? {},
    cwd: options.cwd ?? "/",
    hostname: hostname(),
  });
  return { outcome, stdout: io.out[1].join(""), stderr: io.out[2].join("") };
}

/** Sends raw bytes on a fresh connection; resolves with the host's messages once it closes the connection. */
function rawExchange(bytes: Buffer | undefined): Promise<HostMessage[]> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(endpoint.paths.socket);
    const decoder = new FrameDecoder();
    const messages: HostMessage[] = [];
    socket.on("connect", () => bytes && socket.write(bytes));
    socket.on("data", (chunk: Buffer) => messages.push(...decoder.push(chunk).map(decodeHostMessage)));
    socket.on("error", reject);
    socket.on("close", () => resolve(messages));
  });
}

beforeAll(async () => {
  data = makeDataDir({ "animas/alice/tools/logger.mjs": LOGGER, "animas/bob/tools/.keep": "", "animas/alice/tools/list.mjs": "export const x = 1;" });
  host = createHost({ dataDir: data.dir, isolation: "process", watch: true, timeoutMs: 10_000, onLog: () => {} });
  const opened = await Endpoint.open({
    host,
    kind: "daemon",
    runInvocation: main,
    firstMessageTimeoutMs: 300,
    onStopRequest: (reason) => void stopRequests.push(reason),
  });
  if (!opened) throw new Error("no endpoint");
  endpoint = opened;
});
afterAll(async () => {
  await endpoint.close();
  await host.close();
  data.cleanup();
});

describe("the host endpoint", () => {
  it("is a socket only its owner can reach: 0600 in a 0700 directory of the user", () => {
    const paths = endpointPaths(data.dir, hostname());
    expect(lstatSync(paths.socket).isSocket()).toBe(true);
    expect(statSync(paths.socket).mode & 0o777).toBe(0o600);
    expect(statSync(paths.dir).mode & 0o777).toBe(0o700);
    expect(statSync(paths.dir).uid).toBe(process.getuid?.());
  });

  // Another user is kept out (0700 directory, 0600 socket), even where the data dir is open to all.
  it.runIf(process.getuid?.() === 0)("cannot be reached by another user", () => {
    for (const dir of [data.dir, join(data.dir, "state"), join(data.dir, "state", "animaworks-tool")]) chmodSync(dir, 0o755);
    const probe = spawnSync(
      process.execPath,
      [
        "-e",
        `require("node:net").connect(${JSON.stringify(endpoint.paths.socket)}).on("connect", () => { console.log("connected"); process.exit(0); }).on("error", (e) => { console.log(e.code); process.exit(0); })`,
      ],
      {
        uid: 65534,
        gid: 65534,
        encoding: "utf8",
      },
    );
    expect(probe.stdout.trim()).toBe("EACCES");
  });

  it("runs a call with the client's argv, environment, working directory and stdin", async () => {
    const r = await throughHost(["logger", "say", "hi"], { env: { ANIMAWORKS_ANIMA_DIR: `${data.dir}/animas/alice` } });
    expect(r.outcome).toEqual({ served: true, code: 0 });
    expect(r.stdout).toBe("said hi\n");
    expect(r.stderr).toContain("[info] animaworks.tools (alice/logger): line 4 of hi\n");
    writeFileSync(`${data.dir}/args.json`, JSON.stringify({ word: "from-file" }));
    const relative = await throughHost(["--anima", "alice", "logger", "say", "--args-file", "args.json"], { cwd: data.dir });
    expect(relative.stdout).toBe("said from-file\n");
    const piped = await throughHost(["--anima", "alice", "logger", "say", "--args-file", "-"], { stdin: JSON.stringify({ word: "piped" }) });
    expect(piped.stdout).toBe("said piped\n");
  });

  it("gives each client only its own calls' log lines, however they interleave", async () => {
    const words = ["alpha", "beta", "gamma", "delta"];
    const runs = await Promise.all(words.map((word) => throughHost(["--anima", "alice", "logger", "say", word, "--ms", "5"])));
    runs.forEach((run, i) => {
      expect(run.stdout).toBe(`said ${words[i]}\n`);
      const lines = run.stderr
        .trim()
        .split("\n")
        .filter((line) => line.includes("animaworks.tools"));
      expect(lines).toHaveLength(5);
      for (const line of lines) expect(line).toContain(`of ${words[i]}`);
    });
  });

  it("prints the warnings about an Anima's tool folders to every invocation, as a new process does", async () => {
    const inProcess: string[] = [];
    await main(["--data-dir", data.dir, "--anima", "alice", "logger", "say", "x"], { stdout: () => {}, stderr: (t) => void inProcess.push(t) }, { env: {} });
    const warning = inProcess.find((line) => line.includes("list"));
    expect(warning).toMatch(/^\[warn\] animaworks\.host \(list\): /);
    for (let i = 0; i < 2; i++) expect((await throughHost(["--anima", "alice", "logger", "say", "x"])).stderr).toContain(`${warning}\n`);
  });

  it("serves an edited tool on the very next call", async () => {
    data.write("animas/bob/tools/ver.mjs", 'export function get_tool_schemas() { return [{ name: "ver_get" }]; }\nexport function dispatch() { return "v1"; }');
    expect((await throughHost(["--anima", "bob", "ver", "get"])).stdout).toBe("v1\n");
    data.write("animas/bob/tools/ver.mjs", 'export function get_tool_schemas() { return [{ name: "ver_get" }]; }\nexport function dispatch() { return "v2"; }');
    expect((await throughHost(["--anima", "bob", "ver", "get"])).stdout).toBe("v2\n");
  });

  it("stops a call whose client went away", async () => {
    const socket = connect(endpoint.paths.socket);
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      encodeFrame({
        type: "call",
        protocol: PROTOCOL_VERSION,
        ...build,
        argv: ["--data-dir", data.dir, "--anima", "alice", "logger", "spin"],
        cwd: "/",
        env: {},
        stdoutIsTerminal: false,
        stderrIsTerminal: false,
      }),
    );
    await waitFor(() => endpoint.activeCalls === 1, 5_000);
    socket.destroy();
    await waitFor(() => endpoint.activeCalls === 0, 3_000); // not the 10 s call timeout
    expect((await throughHost(["--anima", "alice", "logger", "say", "after"])).stdout).toBe("said after\n");
  });

  it("refuses a client of another build or protocol", async () => {
    const foreign = await runThroughHost(["--data-dir", data.dir, "list"], collectingIo(), {
      build: "x",
      install: "/elsewhere",
      env: {},
      cwd: "/",
      hostname: hostname(),
    });
    expect(foreign).toMatchObject({ served: false });
    expect(foreign).not.toHaveProperty("daemon");
    expect(stopRequests).toEqual([]); // a daemon of another install is not outdated
    const replies = await rawExchange(encodeFrame({ type: "status", protocol: PROTOCOL_VERSION + 1, ...build }));
    expect(replies).toEqual([expect.objectContaining({ type: "refused", reason: "version" })]);
  });

  it("as an outdated daemon (a client of its own install, built since) gives up its socket and asks to stop", async () => {
    const other = makeDataDir({ "animas/fay/tools/.keep": "" });
    const otherHost = createHost({ dataDir: other.dir, isolation: "process", onLog: () => {} });
    const reasons: string[] = [];
    const old = await Endpoint.open({ host: otherHost, kind: "daemon", runInvocation: main, onStopRequest: (reason) => void reasons.push(reason) });
    try {
      const newer = await runThroughHost(["--data-dir", other.dir, "list"], collectingIo(), {
        build: "newer-build",
        install: build.install,
        env: {},
        cwd: "/",
        hostname: hostname(),
      });
      expect(newer).toMatchObject({ served: false, daemon: { dataDir: other.dir } });
      expect(reasons).toEqual(["outdated"]);
      expect(old?.stillOurs()).toBe(false);
      expect(lstatSync(old?.paths.socket as string, { throwIfNoEntry: false })).toBeUndefined(); // a new daemon can bind now
    } finally {
      await old?.close();
      await otherHost.close();
      other.cleanup();
    }
  });

  it("leaves commands that hold the terminal or manage the host to the client", async () => {
    for (const command of ["mcp", "serve", "daemon"]) expect((await throughHost([command])).outcome).toMatchObject({ served: false });
    expect((await throughHost(["--no-daemon", "list"])).outcome).toMatchObject({ served: false });
    expect((await throughHost(["list"], { env: { ANIMAWORKS_NO_DAEMON: "1" } })).outcome).toMatchObject({ served: false });
  });
});

// Hostile clients: each named after its attack. The connection is closed with an error, and the host
// keeps serving.
describe("the host endpoint against bad clients", () => {
  const stillServes = async () => expect((await throughHost(["--anima", "alice", "logger", "say", "ok"])).stdout).toBe("said ok\n");

  it("oversized-frame: a length over the limit", async () => {
    const replies = await rawExchange(Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3]));
    expect(replies).toEqual([{ type: "error", message: expect.stringContaining("more than the") }]);
    await stillServes();
  });

  it("garbage-frame: bytes that are not JSON", async () => {
    const replies = await rawExchange(Buffer.concat([Buffer.from([0, 0, 0, 5]), Buffer.from("hello")]));
    expect(replies).toEqual([{ type: "error", message: expect.stringContaining("valid JSON") }]);
    await stillServes();
  });

  it("forged-fields: a call with wrongly typed fields, or stdin first", async () => {
    const bad = Buffer.from(
      JSON.stringify({
        type: "call",
        protocol: 1,
        build: build.build,
        install: build.install,
        argv: "list",
        cwd: "/",
        env: {},
        stdoutIsTerminal: false,
        stderrIsTerminal: false,
      }),
    );
    const header = Buffer.alloc(4);
    header.writeUInt32BE(bad.length);
    expect(await rawExchange(Buffer.concat([header, bad]))).toEqual([{ type: "error", message: expect.stringContaining("argv must be an array of strings") }]);
    expect(await rawExchange(encodeFrame({ type: "stdin", data: "x" }))).toEqual([{ type: "error", message: expect.stringContaining("must start with") }]);
    await stillServes();
  });

  it("silent-client: a connection that never sends a request is closed", async () => {
    expect(await rawExchange(undefined)).toEqual([{ type: "error", message: "no request within 300 ms" }]);
    await stillServes();
  });

  it("unsolicited-stdin: stdin nobody asked for ends that connection", async () => {
    const call = encodeFrame({
      type: "call",
      protocol: PROTOCOL_VERSION,
      ...build,
      argv: ["--data-dir", data.dir, "--anima", "alice", "logger", "say", "x", "--ms", "50"],
      cwd: "/",
      env: {},
      stdoutIsTerminal: false,
      stderrIsTerminal: false,
    });
    const replies = await rawExchange(Buffer.concat([call, encodeFrame({ type: "stdin", data: "{}" })]));
    expect(replies.at(-1)).toEqual({ type: "error", message: "unexpected stdin message" });
    await waitFor(() => endpoint.activeCalls === 0, 3_000);
    await stillServes();
  });
});

describe("taking the endpoint", () => {
  it("replaces a stale socket left by a killed host; of hosts starting at once exactly one takes it", async () => {
    const other = makeDataDir({ "animas/carol/tools/.keep": "" });
    const paths = endpointPaths(other.dir, hostname());
    makePrivateDir(paths.dir);
    // A socket file whose server was killed: nothing accepts on it any more.
    const holder = spawn(process.execPath, ["-e", `require("node:net").createServer().listen(${JSON.stringify(paths.socket)}, () => console.log("up"))`]);
    await new Promise((resolve) => holder.stdout.once("data", resolve));
    holder.kill("SIGKILL");
    await new Promise((resolve) => holder.once("exit", resolve));
    expect(lstatSync(paths.socket).isSocket()).toBe(true);
    const otherHost = createHost({ dataDir: other.dir, isolation: "process", onLog: () => {} });
    try {
      const opened = await Promise.all([1, 2, 3].map(() => Endpoint.open({ host: otherHost, kind: "serve", runInvocation: main })));
      const taken = opened.filter((endpoint): endpoint is Endpoint => endpoint !== undefined);
      expect(taken).toHaveLength(1);
      expect(taken[0]?.stillOurs()).toBe(true);
      await taken[0]?.close();
      expect(lstatSync(paths.socket, { throwIfNoEntry: false })).toBeUndefined();
    } finally {
      await otherHost.close();
      other.cleanup();
    }
  });
});

describe("a replaced endpoint", () => {
  it("notices that its socket is another host's, and leaves that socket alone when it closes", async () => {
    const other = makeDataDir({ "animas/erin/tools/.keep": "" });
    const otherHost = createHost({ dataDir: other.dir, isolation: "process", onLog: () => {} });
    try {
      const first = await Endpoint.open({ host: otherHost, kind: "serve", runInvocation: main });
      rmSync(endpointPaths(other.dir, hostname()).socket); // removed by hand: nothing answers there now
      const second = await Endpoint.open({ host: otherHost, kind: "serve", runInvocation: main });
      expect(second).toBeDefined();
      expect(first?.stillOurs()).toBe(false);
      await first?.close();
      expect(second?.stillOurs()).toBe(true);
      await second?.close();
    } finally {
      await otherHost.close();
      other.cleanup();
    }
  });
});

describe("closing the endpoint", () => {
  it("lets calls in flight finish within the grace time, then ends them: their clients are told the host ended", async () => {
    const other = makeDataDir({ "animas/dave/tools/logger.mjs": LOGGER });
    const otherHost = createHost({ dataDir: other.dir, isolation: "process", timeoutMs: 60_000, onLog: () => {} });
    const opened = await Endpoint.open({ host: otherHost, kind: "serve", runInvocation: main });
    try {
      const io = collectingIo();
      const spinning = runThroughHost(["--data-dir", other.dir, "--anima", "dave", "logger", "spin"], io, {
        ...build,
        env: {},
        cwd: "/",
        hostname: hostname(),
      });
      await waitFor(() => opened?.activeCalls === 1, 10_000);
      const started = Date.now();
      await opened?.close({ graceMs: 200 });
      expect(Date.now() - started).toBeLessThan(5_000); // not the call's 60 s timeout
      expect(opened?.activeCalls).toBe(0);
      expect(await spinning).toEqual({ served: true, code: 1 });
      expect(io.out[2].join("")).toContain("Error (SandboxCrashed): the running animaworks-tool host ended before the call finished");
    } finally {
      await otherHost.close();
      other.cleanup();
    }
  });
});
