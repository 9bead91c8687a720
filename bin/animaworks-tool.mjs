#!/usr/bin/env -S node --no-node-snapshot
// Launcher for the animaworks-tool CLI. isolated-vm on Node 20 needs --no-node-snapshot; the shebang
// passes it, and a launch without it (e.g. `node bin/animaworks-tool.mjs`) re-executes Node once with it,
// so the user never has to know.
import { spawnSync } from "node:child_process";

const hasFlag = process.execArgv.includes("--no-node-snapshot") || (process.env.NODE_OPTIONS ?? "").includes("--no-node-snapshot");
if (!hasFlag) {
  const child = spawnSync(process.execPath, ["--no-node-snapshot", ...process.execArgv, new URL(import.meta.url).pathname, ...process.argv.slice(2)], {
    stdio: "inherit",
  });
  process.exit(child.status ?? 1);
} else {
  const { main, exitProcess } = await import("../dist/src/cli/main.js");
  exitProcess(await main(process.argv.slice(2)));
}
