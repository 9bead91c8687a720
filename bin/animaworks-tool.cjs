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
const hasFlag = process.execArgv.includes("--no-node-snapshot") || (process.env.NODE_OPTIONS ?? "").includes("--no-node-snapshot");
if (!hasFlag) {
  const { spawnSync } = require("node:child_process");
  const child = spawnSync(process.execPath, ["--no-node-snapshot", ...process.execArgv, __filename, ...process.argv.slice(2)], {
    stdio: "inherit",
  });
  process.exit(child.status ?? 1);
} else {
  const { main, exitProcess } = require("../dist/cli/main.cjs");
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
