import { defineConfig } from "vitest/config";
import { SANDBOX_NODE_FLAGS } from "./src/isolation/isolate/v8-flags.js";

// Tests run against real isolates: each test file in its own forked process started with the flags of a
// sandbox process (--no-node-snapshot, which isolated-vm needs, and the isolate flags: v8-flags.ts), on
// the pinned Node (npm runs `npm test` with node_modules/.bin first on the PATH). `npm test` builds dist/
// first, because sandbox processes and the prelude are loaded from there.
export default defineConfig({
  test: {
    pool: "forks",
    execArgv: [...SANDBOX_NODE_FLAGS],
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
