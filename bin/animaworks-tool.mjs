#!/usr/bin/env -S node --no-node-snapshot
// Launcher for the animaworks-tool CLI. isolated-vm on Node 20 needs --no-node-snapshot; the shebang
// passes it, and a launch without it (e.g. `node bin/animaworks-tool.mjs`) re-executes Node once with it,
// so the user never has to know.
//
// It runs the bundled CLI (dist/cli/, made by scripts/bundle-cli.mjs in `npm run build`): a one-shot
// call starts faster from a few bundled modules than from the forty modules of dist/src/. For the same
// reason node:child_process is loaded only to re-execute, and the CLI's own output is written with
// fs.writeSync: process.stdout on a pipe or terminal would load Node's socket and stream modules (≈ 10 ms).
const hasFlag = process.execArgv.includes("--no-node-snapshot") || (process.env.NODE_OPTIONS ?? "").includes("--no-node-snapshot");
if (!hasFlag) {
  const { spawnSync } = await import("node:child_process");
  const child = spawnSync(process.execPath, ["--no-node-snapshot", ...process.execArgv, new URL(import.meta.url).pathname, ...process.argv.slice(2)], {
    stdio: "inherit",
  });
  process.exit(child.status ?? 1);
} else {
  const { main, exitProcess } = await import("../dist/cli/main.js");
  exitProcess(await main(process.argv.slice(2), { stdout: lineWriter(1, () => process.stdout), stderr: lineWriter(2, () => process.stderr) }));
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
