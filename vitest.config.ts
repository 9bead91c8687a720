import { defineConfig } from "vitest/config";

// Tests run against real isolates: each test file in its own forked process started with
// --no-node-snapshot (isolated-vm needs it), on the pinned Node (npm runs `npm test` with
// node_modules/.bin first on the PATH). `npm test` builds dist/ first, because sandbox processes and the
// prelude are loaded from there.
export default defineConfig({
  test: {
    pool: "forks",
    execArgv: ["--no-node-snapshot"],
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    maxWorkers: 2,
    // CLI processes that tests start run in-process and start no daemon (one would outlive the test by
    // its idle time); the tests of the daemon path (test/endpoint/) clear this for the processes they start.
    env: { ANIMAWORKS_NO_DAEMON: "1" },
    reporters: ["default"],
  },
});
