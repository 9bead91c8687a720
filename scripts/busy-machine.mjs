// The whole test suite on a busy machine: `npm run test:busy` runs `vitest run` several times in a row
// while other processes spin on the machine's cores, and says how each run ended. The suite must stay
// green there (a test asserts behaviour, never a wall-clock figure that depends on load: issue #33).
//   --runs N       suite runs, one after another (default 3)
//   --spinners N   processes spinning for the whole time (default 2, the cores of the machines this
//                  project is checked on)
// Exit 0 when every run passed. Each run's output: busy-run-<n>.log in the system's temp folder.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";

function option(name, fallback) {
  const index = process.argv.indexOf(name);
  const value = index === -1 ? fallback : Number(process.argv[index + 1]);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} takes a whole number, not "${process.argv[index + 1]}"`);
  return value;
}

const runs = option("--runs", 3);
const spinners = Array.from({ length: option("--spinners", 2) }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
const stopSpinners = () => spinners.forEach((spinner) => spinner.kill("SIGKILL"));
process.on("exit", stopSpinners);
process.on("SIGINT", () => process.exit(130));

let failed = 0;
for (let run = 1; run <= runs; run++) {
  const log = join(tmpdir(), `busy-run-${run}.log`);
  const started = Date.now();
  const code = await new Promise((resolve) => {
    const out = createWriteStream(log);
    const child = spawn(process.execPath, [join("node_modules", "vitest", "vitest.mjs"), "run"], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    child.on("exit", (exitCode) => out.end(() => resolve(exitCode)));
  });
  if (code !== 0) failed++;
  const load = loadavg()
    .map((value) => value.toFixed(1))
    .join(" ");
  console.log(
    `run ${run} of ${runs}: ${code === 0 ? "passed" : `FAILED (exit ${code})`} in ${Math.round((Date.now() - started) / 1000)} s, load ${load}, ${spinners.length} spinners; output: ${log}`,
  );
}
stopSpinners();
process.exit(failed === 0 ? 0 : 1);
