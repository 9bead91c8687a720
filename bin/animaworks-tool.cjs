#!/usr/bin/env node
// Launcher for the animaworks-tool CLI.
//
// It runs on the Node.js that package.json pins (src/node-runtime.ts): started by an older Node (the
// machine's own, through `#!/usr/bin/env node`), it re-executes once on the pinned build in
// node_modules; without one it needs Node.js 24 or later, and says so.
//
// A call first goes to the host running for its data dir (a daemon or `serve`), through the thin client
// dist/cli/client.cjs: on Node's start-up snapshot, without loading the host. When no host serves it,
// the call runs in this process as before, which needs --no-node-snapshot (isolated-vm's rule): a
// launch without that flag re-executes Node once with it (and a daemon is started in the background, so
// the next call is served). See README "The CLI and the daemon".
//
// The in-process CLI is the bundle dist/cli/main.cjs (made by scripts/bundle-cli.mjs in `npm run build`):
// a one-shot call starts faster from one CommonJS file than from the forty modules of dist/src/, and this
// launcher and the bundles are CommonJS because an ES module entry loads Node's ES module loader (≈ 8 ms
// more without the start-up snapshot). For the same reason node:child_process is loaded only to
// re-execute, and output is written with fs.writeSync: process.stdout on a pipe or terminal would load
// Node's socket and stream modules (≈ 10 ms).
"use strict";
const { join } = require("node:path");
const ROOT = join(__dirname, "..");
// True when this launch was handed to the pinned Node (this process then only waits for it: runChild).
const handedOver = ensurePinnedRuntime();
// Set only for the re-executed process of a call no host served: it runs in-process at once.
const fallback = process.env.ANIMAWORKS_CLI_FALLBACK === "1";
delete process.env.ANIMAWORKS_CLI_FALLBACK;
const hasFlag = process.execArgv.includes("--no-node-snapshot") || (process.env.NODE_OPTIONS ?? "").includes("--no-node-snapshot");
const argv = process.argv.slice(2);

if (handedOver) {
  // The pinned Node's process runs the call.
} else if (fallback && hasFlag) runInProcess();
else {
  // A plain require: the client is small (≈ 16 KB), and loadBundle's code cache costs more than it saves.
  const client = require(join(ROOT, "dist", "cli", "client.cjs"));
  const setup = { ...client.readBuildInfo(ROOT), env: process.env, cwd: process.cwd(), hostname: require("node:os").hostname() };
  const io = { write: rawWriter(), readStdin: readAllStdin, isTerminal };
  client.runThroughHost(argv, io, setup).then((outcome) => {
    if (outcome.served) {
      // Everything is written (synchronously) unless a full pipe sent some through Node's stream: then
      // let the stream drain; else exit now, without another turn of the event loop.
      if (io.write.usedStream()) process.exitCode = outcome.code;
      else process.exit(outcome.code);
      return;
    }
    // The first daemon started for a data dir is announced on stderr (once: src/cli/daemon-notice.ts).
    const started = outcome.daemon ? client.startDaemon(outcome.daemon, setup, __filename, (text) => io.write(2, text)) : undefined;
    Promise.resolve(started).then(() => (hasFlag ? runInProcess() : reExecute()));
  });
}

function runInProcess() {
  const { main, exitProcess } = loadBundle(join(ROOT, "dist", "cli", "main.cjs"));
  const write = rawWriter();
  const line = (fd) => (text) => write(fd, text.endsWith("\n") ? text : `${text}\n`);
  main(argv, { stdout: line(1), stderr: line(2) }).then((code) => {
    if (!write.usedStream()) return exitProcess(code);
    // Output a full pipe made us hand to Node's streams is written before the process ends.
    let pending = 2;
    const flushed = () => --pending === 0 && exitProcess(code);
    process.stdout.write("", flushed);
    process.stderr.write("", flushed);
  });
}

/**
 * Re-executes this launch on the pinned Node when the running one is older (true: it runs there), or
 * exits with what to do when there is none and the running one cannot load isolated-vm 7. On the pinned
 * Node it costs one string comparison.
 */
function ensurePinnedRuntime() {
  const pinnedPackage = join(ROOT, "node_modules", `node-${process.platform}-${process.arch}`);
  const pinnedNode = join(pinnedPackage, "bin", "node");
  if (process.execPath === pinnedNode) return false;
  const fs = require("node:fs");
  let pinned;
  try {
    pinned = JSON.parse(fs.readFileSync(join(pinnedPackage, "package.json"), "utf8")).version;
  } catch {
    // not installed (another platform, or npm ci --omit=optional)
  }
  const running = process.versions.node;
  if (pinned !== undefined && olderThan(running, pinned) && fs.existsSync(pinnedNode)) {
    runChild(pinnedNode, [...process.execArgv, __filename, ...process.argv.slice(2)], process.env);
    return true;
  }
  if (Number(running.split(".")[0]) < 24) {
    process.stderr.write(
      `Error: animaworks-tool needs Node.js 24 or later (this is ${running}) — run npm ci in ${ROOT} to install the pinned Node.js (linux-x64), or install Node.js 24 or later\n`,
    );
    process.exit(1);
  }
  return false;
}

/** src/node-runtime.ts `compareVersions` < 0, which this launcher cannot load without the ES module loader. */
function olderThan(version, than) {
  const a = version.split(".").map(Number);
  const b = than.split(".").map(Number);
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  return false;
}

function reExecute() {
  // --no-concurrent-osr: isolated-vm's memory limit holds only with it (ISOLATE_V8_FLAGS, src/isolation/isolate/v8-flags.ts).
  runChild(process.execPath, ["--no-node-snapshot", "--no-concurrent-osr", ...process.execArgv, __filename, ...argv], {
    ...process.env,
    ANIMAWORKS_CLI_FALLBACK: "1",
  });
}

/**
 * Runs the call in a child process with this one's stdio and ends as it ends: its exit code, or the
 * signal that ended it, raised again here. This process only waits. A SIGTERM sent to it (a supervisor,
 * `kill PID`) is passed on: a `serve` or `mcp` started through a re-execution had outlived its launcher.
 * SIGINT and SIGHUP are not passed on: a terminal sends them to both processes already, and a second
 * SIGINT would count twice (`serve` aborts its running jobs at the second); this process keeps waiting.
 */
function runChild(command, args, env) {
  // Some failures are thrown (E2BIG: the command line is too long), others emitted: both end here, exit 1.
  const failed = (error) => {
    process.stderr.write(`Error: could not start Node.js to run the call (${error.code ?? error.message})\n`);
    process.exit(1);
  };
  let child;
  // Listened to before the spawn: the child exists (and can be seen) while spawn waits for its exec, and a
  // SIGTERM then, with no listener, ended this process at once and left the child running alone. A
  // listener's signal is handled on a later turn of the event loop, once `child` is set.
  const forward = () => child?.kill("SIGTERM");
  const wait = () => {};
  process.on("SIGTERM", forward);
  process.on("SIGINT", wait);
  process.on("SIGHUP", wait);
  try {
    child = require("node:child_process").spawn(command, args, { stdio: "inherit", env });
  } catch (error) {
    return failed(error);
  }
  child.on("error", failed);
  child.on("exit", (code, signal) => {
    if (signal === null) return process.exit(code ?? 1);
    process.off("SIGTERM", forward);
    process.off("SIGINT", wait);
    process.off("SIGHUP", wait);
    process.kill(process.pid, signal);
  });
}

/**
 * Writes text to fd 1 or 2, synchronously (exitProcess relies on output being written when main
 * returns). A descriptor that cannot take it all now (a non-blocking pipe that is full: EAGAIN) or fails
 * otherwise gets the rest through Node's stream, which waits for the pipe.
 * A reader that went away (EPIPE, `animaworks-tool … | head -1`) gets nothing more on that descriptor, and
 * the call ends with its own exit status: Node ignores SIGPIPE, so the write error would otherwise be an
 * unhandled 'error' event (a stack trace, exit 1).
 */
function rawWriter() {
  const { writeSync } = require("node:fs");
  const useStream = { 1: false, 2: false };
  const gone = { 1: false, 2: false };
  const streamOf = (fd) => (fd === 1 ? process.stdout : process.stderr);
  const write = (fd, text) => {
    if (gone[fd]) return;
    const bytes = Buffer.from(text, "utf8");
    let written = 0;
    while (!useStream[fd] && written < bytes.length) {
      try {
        written += writeSync(fd, bytes, written);
      } catch (error) {
        if (error.code === "EPIPE") {
          gone[fd] = true;
          return;
        }
        // Later output goes behind what the stream still holds, in order; the stream's own error (EPIPE
        // after an EAGAIN) ends that output as quietly.
        streamOf(fd).on("error", () => void (gone[fd] = true));
        useStream[fd] = true;
      }
    }
    if (written < bytes.length) streamOf(fd).write(bytes.subarray(written));
  };
  write.usedStream = () => useStream[1] || useStream[2];
  return write;
}

/**
 * Whether fd is a terminal. A terminal is a character device: anything else (a pipe, a file, a socket, as
 * when an Anima's runtime captures the output) is answered from one fstat, without node:tty, whose load
 * (with Node's stream modules) cost a served call ≈ 0.3–1 ms.
 */
function isTerminal(fd) {
  try {
    if (!require("node:fs").fstatSync(fd).isCharacterDevice()) return false;
  } catch {
    return false; // a closed descriptor is no terminal
  }
  return require("node:tty").isatty(fd);
}

/** stdin read for `--args-file -` is bounded as the host bounds it (src/cli/invocation.ts MAX_ARGUMENTS_BYTES). */
const MAX_STDIN_BYTES = 64 * 1024 * 1024;

/**
 * All of stdin, or the first MAX_STDIN_BYTES + 1 bytes when there is more: the host answers that with
 * InvalidArguments (more than its limit), and this client stops reading (`/dev/zero` as stdin ends).
 */
async function readAllStdin() {
  const chunks = [];
  let bytes = 0;
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
    bytes += chunk.length;
    if (bytes > MAX_STDIN_BYTES) {
      process.stdin.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Loads a CommonJS bundle as `require` would, but compiled with the V8 code cache in `<file>.v8-cache`
 * (`require` keeps no code cache unless Node's compile cache is enabled for the whole process;
 * compiling the CLI bundle costs ≈ 12 ms, with the cache ≈ 4).
 * When the cache is missing, or V8 rejects it (another Node version or V8 flags), a new one is written
 * as this process exits, so that it holds the functions this call compiled too. Writing is best effort:
 * a read-only install simply runs without a cache. The bundles are pure ASCII (scripts/bundle-cli.mjs
 * checks), so they are read as latin1: one byte per character, no UTF-8 decoding.
 */
function loadBundle(file) {
  const fs = require("node:fs");
  const { dirname } = require("node:path");
  const { Script } = require("node:vm");
  // A code cache depends on V8's flags; the in-process CLI always runs with --no-node-snapshot.
  const cacheFile = `${file}.no-snapshot.v8-cache`;
  let cachedData;
  try {
    cachedData = fs.readFileSync(cacheFile);
  } catch {
    // no cache yet
  }
  const source = fs.readFileSync(file, "latin1");
  // The bundles have no import() (scripts/bundle-cli.mjs turns them into require): a vm.Script has no
  // loader for it.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData });
  const module = { exports: {}, filename: file };
  script.runInThisContext()(module.exports, require("node:module").createRequire(file), module, file, dirname(file));
  if (cachedData === undefined || script.cachedDataRejected) {
    process.once("exit", () => {
      const temp = `${cacheFile}.${process.pid}.tmp`;
      try {
        fs.writeFileSync(temp, script.createCachedData());
        fs.renameSync(temp, cacheFile);
      } catch {
        fs.rmSync(temp, { force: true });
      }
    });
  }
  return module.exports;
}
