// The HTML audit report at scale: 200 Animas and a day of records, written through JsonlAuditLog into a
// throwaway data dir (test/helpers/audit-records.ts), then `animaworks-tool audit --html` writes the page
// and the system's Chromium opens it (test/helpers/chromium.ts: headless, over the DevTools protocol on a
// pipe). Figures: the page's size, the CLI's time to write it, and the page's load time in the browser
// (navigation start to the load event's end, and to the first contentful paint), the median of --runs
// visits; baseline: the same browser opening a one-line page in the same run.
// Run after `npm run build`: node --no-node-snapshot benchmarks/audit-html.mjs [--animas 200] [--records 300] [--runs 5] [--screenshot docs/audit-report.png] [--json]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonlAuditLog } from "../dist/src/audit/jsonl-audit-log.js";
import { generateAuditRecords, writeGeneratedDataDir } from "../test/helpers/audit-records.ts";
import { findChromium, visitPage } from "../test/helpers/chromium.ts";

const arg = (name, fallback) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : fallback;
};
const ANIMAS = Number(arg("--animas", "200"));
const RECORDS = Number(arg("--records", "300"));
const RUNS = Number(arg("--runs", "5"));
const SCREENSHOT = arg("--screenshot", undefined);
const JSON_OUT = process.argv.includes("--json");

const browser = findChromium();
if (!browser) {
  console.error("no chromium on the PATH: apt-get install -y chromium");
  process.exit(1);
}
const dataDir = mkdtempSync(join(tmpdir(), "awt-audit-html-"));
try {
  const animas = Array.from({ length: ANIMAS }, (_, i) => `anima-${String(i).padStart(3, "0")}`);
  writeGeneratedDataDir(dataDir, animas);
  const log = new JsonlAuditLog(join(dataDir, "logs", "animaworks-tool", "audit"));
  const day = 86_400_000;
  const startMs = Date.now() - day;
  let t = performance.now();
  const records = generateAuditRecords(log, { animas, recordsPerAnima: RECORDS, startMs, spanMs: day - 60_000 });
  await log.close();
  const generateMs = performance.now() - t;

  const page = join(dataDir, "audit.html");
  t = performance.now();
  const cli = spawnSync(process.execPath, ["--no-node-snapshot", "bin/animaworks-tool.cjs", "--data-dir", dataDir, "audit", "--html", page], {
    encoding: "utf8",
    env: { ...process.env, ANIMAWORKS_NO_DAEMON: "1" },
  });
  const writeMs = performance.now() - t;
  if (cli.status !== 0) throw new Error(`audit --html failed: ${cli.stderr}`);

  const baseline = join(dataDir, "baseline.html");
  writeFileSync(baseline, "<!doctype html><title>baseline</title><p>baseline</p>");
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const loads = [];
  const paints = [];
  const baseLoads = [];
  let problems = [];
  for (let run = 0; run < RUNS; run++) {
    // Each in a fresh browser, after a warm-up page in the same tab (a first navigation also pays for starting the renderer).
    baseLoads.push((await visitPage(browser, baseline, { warmUp: baseline })).timing.loadMs);
    // The screenshot (docs/audit-report.png) is taken tall enough to show the summary, the operator's findings and the timeline's start.
    const shot = run === 0 && SCREENSHOT !== undefined;
    const visit = await visitPage(browser, page, { warmUp: baseline, screenshot: shot, ...(shot ? { height: 1500 } : {}) });
    loads.push(visit.timing.loadMs);
    paints.push(visit.timing.firstContentfulPaintMs ?? NaN);
    problems = [...visit.errors, ...visit.requests.slice(1)];
    if (visit.screenshot) writeFileSync(SCREENSHOT, visit.screenshot);
  }
  const result = {
    animas: ANIMAS,
    records,
    pageBytes: statSync(page).size,
    generateMs: Math.round(generateMs),
    cliWriteMs: Math.round(writeMs),
    loadMsMedian: Math.round(median(loads)),
    firstContentfulPaintMsMedian: Math.round(median(paints)),
    baselineLoadMsMedian: Math.round(median(baseLoads)),
    loadRatio: Number((median(loads) / Math.max(1, median(baseLoads))).toFixed(1)),
    consoleErrorsOrRequests: problems.length,
  };
  if (JSON_OUT) console.log(JSON.stringify(result));
  else {
    console.log(
      `${result.animas} Animas, ${result.records} records; page ${(result.pageBytes / 1024).toFixed(0)} KiB, written by the CLI in ${result.cliWriteMs} ms`,
    );
    console.log(
      `load (navigation start to load event end): median ${result.loadMsMedian} ms of ${RUNS}; first contentful paint ${result.firstContentfulPaintMsMedian} ms; a one-line page ${result.baselineLoadMsMedian} ms (×${result.loadRatio})`,
    );
    console.log(`console errors and requests beyond the page itself: ${result.consoleErrorsOrRequests}`);
  }
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
