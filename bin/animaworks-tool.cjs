#!/usr/bin/env -S node --no-node-snapshot
// Launcher for the animaworks-tool CLI. isolated-vm on Node 20 needs --no-node-snapshot; the shebang
// passes it, and a launch without it (e.g. `node bin/animaworks-tool.cjs`) re-executes Node once with it,
// so the user never has to know.
//
// It runs the bundled CLI (dist/cli/main.cjs, made by scripts/bundle-cli.mjs in `npm run build`): a
// one-shot call starts faster from one CommonJS file than from the forty modules of dist/src/, and this
// launcher and the bundle are CommonJS because an ES module entry loads Node's ES module loader (≈ 8 ms
// more without the start-up snapshot). For the same reason node:child_process is loaded only to
// re-execute, and the CLI's own output is written with fs.writeSync: process.stdout on a pipe or
// terminal would load Node's socket and stream modules (≈ 10 ms).
"use strict";
// The bundle is compiled with a V8 code cache kept beside it (see loadBundle): ≈ 8 ms less per call.
const hasFlag = process.execArgv.includes("--no-node-snapshot") || (process.env.NODE_OPTIONS ?? "").includes("--no-node-snapshot");
if (!hasFlag) {
  const { spawnSync } = require("node:child_process");
  const child = spawnSync(process.execPath, ["--no-node-snapshot", ...process.execArgv, __filename, ...process.argv.slice(2)], {
    stdio: "inherit",
  });
  process.exit(child.status ?? 1);
} else {
  const { main, exitProcess } = loadBundle(require("node:path").join(__dirname, "..", "dist", "cli", "main.cjs"));
  main(process.argv.slice(2), { stdout: lineWriter(1, () => process.stdout), stderr: lineWriter(2, () => process.stderr) }).then(exitProcess);
}

/**
 * Writes each text as a line to `fd`, synchronously (exitProcess relies on output being written when
 * main returns). A descriptor that cannot take it all now (a non-blocking pipe that is full: EAGAIN) or
 * fails otherwise gets the rest through Node's stream, which waits for the pipe and reports errors as before.
 */
function lineWriter(fd, stream) {
  const { writeSync } = process.getBuiltinModule("node:fs");
  let useStream = false;
  return (text) => {
    const bytes = Buffer.from(text.endsWith("\n") ? text : `${text}\n`, "utf8");
    let written = 0;
    while (!useStream && written < bytes.length) {
      try {
        written += writeSync(fd, bytes, written);
      } catch {
        useStream = true; // keeps later lines in order behind the ones the stream still holds
      }
    }
    if (written < bytes.length) stream().write(bytes.subarray(written));
  };
}

/**
 * Loads the CommonJS bundle as `require` would, but compiled with the V8 code cache in
 * `<file>.v8-cache` (Node 20's `require` has no code cache; compiling the bundle costs ≈ 12 ms, with
 * the cache ≈ 4). When the cache is missing, or V8 rejects it (another Node version or V8 flags), a
 * new one is written as this process exits, so that it holds the functions this call compiled too.
 * Writing is best effort: a read-only install simply runs without a cache. The bundle is pure ASCII
 * (scripts/bundle-cli.mjs checks), so it is read as latin1: one byte per character, no UTF-8 decoding.
 */
function loadBundle(file) {
  const fs = require("node:fs");
  const { dirname } = require("node:path");
  const { Script } = require("node:vm");
  const cacheFile = `${file}.v8-cache`;
  let cachedData;
  try {
    cachedData = fs.readFileSync(cacheFile);
  } catch {
    // no cache yet
  }
  const source = fs.readFileSync(file, "latin1");
  // The bundle has no import() (scripts/bundle-cli.mjs turns them into require): a vm.Script has no
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
