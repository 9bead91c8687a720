import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../src/audit/audit-log.js";
import { JsonlAuditLog } from "../../src/audit/jsonl-audit-log.js";
import { main } from "../../src/cli/main.js";
import { generateAuditRecords, writeGeneratedDataDir } from "../helpers/audit-records.js";
import { findChromium, visitPage } from "../helpers/chromium.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";

/**
 * `audit --html` in a real browser (the system's Chromium, headless, driven over the DevTools protocol on
 * a pipe: test/helpers/chromium.ts). CI installs Chromium (.ci/run), so there a missing browser fails the
 * suite; on a machine without it (and without $CI) these tests are skipped, visibly. The page's load time
 * is not asserted here (this suite runs on busy machines): benchmarks/audit-html.mjs measures it.
 */
const browser = findChromium();
if (!browser && process.env["CI"] !== undefined) throw new Error("chromium is required on CI (.ci/run installs it) but is not on the PATH");
if (!browser) console.warn("audit HTML browser tests skipped: no chromium on the PATH (apt-get install -y chromium); they run on CI");
const suite = browser ? describe : describe.skip;

/** What the page holds once loaded: its title, any active content, and its summary as shown. */
const PROBE = `JSON.stringify({
  title: document.title,
  scripts: document.scripts.length,
  images: document.images.length,
  handlers: [...document.querySelectorAll("*")].filter((el) => [...el.attributes].some((a) => a.name.startsWith("on"))).length,
  text: document.body.textContent,
  rows: [...document.querySelectorAll("tr.summary-row td:first-child")].map((td) => td.textContent),
  idle: document.querySelector("p.idle")?.textContent ?? null,
  timelines: document.querySelectorAll("svg.timeline").length,
  sections: [...document.querySelectorAll("section h2")].map((h) => h.textContent),
})`;

async function writeHtml(data: TempDataDir): Promise<{ file: string; json: { summary: { rows: Array<{ anima: string }>; idle: string[] } } }> {
  const quiet = { stdout: () => {}, stderr: () => {} };
  expect(await main(["--data-dir", data.dir, "audit", "--html", "audit.html"], quiet, { cwd: data.dir })).toBe(0);
  const out: string[] = [];
  expect(await main(["--data-dir", data.dir, "audit", "--json"], { stdout: (t) => out.push(t), stderr: () => {} })).toBe(0);
  return { file: join(data.dir, "audit.html"), json: JSON.parse(out.join("")) };
}

suite("the HTML audit report in a browser", () => {
  let data: TempDataDir;
  afterEach(() => data.cleanup());

  it("shows hostile tool names, targets and Anima names as text, bidirectional overrides escaped: no script runs, nothing is loaded, no error", async () => {
    const eve = `"><svg onload="document.title='pwned'">`;
    const tool = "<script>document.title='pwned'</script>";
    // U+202E reverses the rest of its cell as shown (the host's denial reason included) unless shown escaped.
    const target = `https://x.example/"><img src=x onerror="document.title='pwned'">\u202e\u2066gnp.exe`;
    data = makeDataDir();
    data.anima("alice");
    data.anima(eve);
    const log = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
    const events: AuditEvent[] = [
      { kind: "call", callId: "1", anima: "alice", tool, schema: `${tool}_run`, version: `'"><b>`, durationMs: 1, outcome: "error", errorType: "Timeout" },
      { kind: "capability", callId: "1", anima: "alice", tool, operation: "fetch", target, outcome: "denied", reason: "SandboxViolation: <b>no</b>" },
      { kind: "sandbox_crash", anima: eve, tool, message: "</style><script>document.title='pwned'</script>" },
      {
        kind: "policy_change",
        anima: "alice",
        scope: "permissions",
        from: "<i>a</i>",
        to: "b",
        before: "</pre><script>x()</script>",
        after: '{"x":"</details>"}',
      },
      { kind: "reload", anima: "alice", tool, origin: "personal", change: "failed", message: "<iframe src=//x.example>" },
    ];
    for (const event of events) log.append(event);
    await log.close();
    const { file } = await writeHtml(data);
    const visit = await visitPage(browser as string, file, { evaluate: PROBE });
    const page = JSON.parse(visit.evaluated as string);
    expect(page).toMatchObject({ title: "animaworks-tool audit report", scripts: 0, images: 0, handlers: 0 });
    expect(page.rows).toEqual([eve, "alice"]);
    const shownTarget = target.replace("\u202e\u2066", "\\u202e\\u2066");
    for (const text of [eve, tool, shownTarget, "SandboxViolation: <b>no</b>", "</style><script>document.title='pwned'</script>"])
      expect(page.text).toContain(text);
    expect(page.text).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/); // no override reaches the page as one
    expect(visit.errors).toEqual([]);
    expect(visit.requests).toEqual([pathToFileURL(file).href]);
  });

  it("renders the summary of 200 Animas and a day of records, riskiest first, with timelines and the histories", { timeout: 180_000 }, async () => {
    data = makeDataDir();
    const animas = Array.from({ length: 200 }, (_, i) => `anima-${String(i).padStart(3, "0")}`);
    writeGeneratedDataDir(data.dir, animas);
    const log = new JsonlAuditLog(join(data.dir, "logs", "animaworks-tool", "audit"));
    const day = 86_400_000;
    generateAuditRecords(log, { animas, recordsPerAnima: 30, startMs: Date.now() - day, spanMs: day - 60_000 });
    await log.close();
    const { file, json } = await writeHtml(data);
    const visit = await visitPage(browser as string, file, { evaluate: PROBE, timeoutMs: 120_000 });
    const page = JSON.parse(visit.evaluated as string);
    // Every Anima with activity or findings has its row (the first 25 shown, the rest folded), in the text report's order.
    expect(page.rows).toEqual(json.summary.rows.map((row) => row.anima));
    expect(page.rows.length + json.summary.idle.length).toBe(200);
    expect(page.idle).toBe(`${json.summary.idle.length} idle Animas (no activity, no findings): ${json.summary.idle.join(", ")}`);
    expect(page.timelines).toBeGreaterThan(100);
    expect(page.sections).toEqual(["Summary", "Timeline of denials and failures", "Policy history", "Version history", "Animas"]);
    expect(page.text).toContain("allow_internal_hosts");
    expect(visit.errors).toEqual([]);
    expect(visit.requests).toEqual([pathToFileURL(file).href]);
  });
});
