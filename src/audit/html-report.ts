import type { AnimaReport, HostHistory, PolicyChange, TimelineEvent } from "./report.js";
import type { AuditSummary, SummaryRow } from "./summary.js";
import type { OperatorGrant } from "./least-privilege.js";
import type { TrailIntegrity } from "./verify-text.js";
import { counted, terminalSafe } from "../terminal-text.js";

/**
 * `audit --html FILE`: the report as one self-contained page. Everything is inline (styles, the timeline's
 * SVG) and nothing is fetched: no script, font or image. Most of what the page shows comes from records
 * whose text a tool controls (its name, a path, a URL, an error message), so every such string goes
 * through `escapeHtml` on its way in, in text and in attribute values alike; and the page's Content
 * Security Policy allows no script and no request at all, so that a string that ever slipped through
 * would still be inert.
 */
export interface HtmlReportInput {
  generatedAt: string;
  /** The period's start (`--since`), if given. */
  since?: string;
  /** The chain check of the trails the report was read from (verify.ts), shown first. */
  integrity: TrailIntegrity;
  summary: AuditSummary;
  reports: readonly AnimaReport[];
  /** The operator's host-wide grants (absent for a report of one Anima). */
  operator: readonly OperatorGrant[] | undefined;
  history: HostHistory;
}

/** Summary rows shown before the rest are folded. */
const SUMMARY_ROWS = 25;
/** Timelines shown before the rest are folded. */
const TIMELINE_ROWS = 40;
/** Bins of the timeline: a quarter of an hour each over a day. */
const BINS = 96;
const KINDS: ReadonlyArray<TimelineEvent["kind"]> = ["violation", "denial", "interrupted", "refusal", "failure"];
const COLOURS: Record<TimelineEvent["kind"], string> = {
  violation: "#b71c1c",
  denial: "#e65100",
  interrupted: "#6a1b9a",
  refusal: "#1565c0",
  failure: "#757575",
};

/**
 * Text for an element or attribute: markup characters as character references, and control characters
 * and bidirectional overrides shown as `\uXXXX`, as the text report shows them (terminalSafe): a record's
 * text is a tool's, and an override (U+202E) reversed the rest of its cell, the host's own denial
 * reason included.
 */
export function escapeHtml(text: string): string {
  return terminalSafe(text).replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

const e = escapeHtml;

export function renderHtmlReport(input: HtmlReportInput): string {
  const byName = new Map(input.reports.map((report, index) => [report.anima, { report, index }]));
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    // No script, no request: a record's text that got past the escaping still could not run or call out.
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>animaworks-tool audit report</title>",
    `<style>${STYLE}</style>`,
    "</head><body>",
    `<h1>animaworks-tool audit report</h1>`,
    `<p class="meta">Generated ${e(input.generatedAt)}; records ${input.since ? `since ${e(input.since)}` : "kept"}; ${counted(input.reports.length, "Anima")}.</p>`,
    integritySection(input.integrity),
    summarySection(input, byName),
    timelineSection(input, byName),
    policySection(input),
    versionSection(input),
    detailSection(input),
    "</body></html>",
  ].join("\n");
}

function integritySection(integrity: TrailIntegrity): string {
  if (integrity.ok) return `<p class="meta" id="integrity">Audit trails: verified, every chain whole (${counted(integrity.trails, "trail")}).</p>`;
  const more = integrity.broken - integrity.findings.length;
  return [
    '<section id="integrity"><h2 class="warning">Audit trails BROKEN</h2>',
    `<p class="warning">${integrity.broken} findings: records on this page may have been inserted, edited or removed and shown as the host's own. <code>animaworks-tool audit verify</code> lists where.</p>`,
    `<ul>${integrity.findings.map((finding) => `<li class="warning">${e(finding)}</li>`).join("")}${more > 0 ? `<li>… ${more} more</li>` : ""}</ul>`,
    "</section>",
  ].join("\n");
}

type Index = Map<string, { report: AnimaReport; index: number }>;

function anchor(index: number | undefined, name: string): string {
  return index === undefined ? e(name) : `<a href="#anima-${index}">${e(name)}</a>`;
}

function summarySection(input: HtmlReportInput, byName: Index): string {
  const { rows, idle, incomplete } = input.summary;
  const columns: Array<[string, keyof SummaryRow]> = [
    ["Calls", "calls"],
    ["Violations", "violations"],
    ["Denials", "denials"],
    ["Interrupted", "interrupted"],
    ["Refusals", "refusals"],
    ["Unused grants", "unusedGrants"],
  ];
  const cell = (row: SummaryRow, key: keyof SummaryRow) => {
    const value = Number(row[key]);
    return `<td class="n${key !== "calls" && value > 0 ? ` hot ${key}` : ""}">${value}</td>`;
  };
  const flags = (row: SummaryRow) =>
    [row.brokenPolicy ? "permissions broken" : "", row.inFlight ? `${row.inFlight} in flight` : "", row.incomplete ? "incomplete" : ""]
      .filter(Boolean)
      .join(", ");
  const body = rows.map(
    (row) =>
      `<tr class="summary-row"><td>${anchor(byName.get(row.anima)?.index, row.anima)}</td>${columns.map(([, key]) => cell(row, key)).join("")}<td>${e(flags(row))}</td></tr>`,
  );
  const parts = [
    '<section id="summary"><h2>Summary</h2>',
    "<p>Riskiest first: violations (sandbox processes that crashed or broke the protocol), denials, interrupted calls, refusals, unused grants; then the busiest.</p>",
  ];
  const head = `<table><thead><tr><th>Anima</th>${columns.map(([title]) => `<th>${title}</th>`).join("")}<th></th></tr></thead><tbody>`;
  if (rows.length > 0) parts.push(head, ...body.slice(0, SUMMARY_ROWS), "</tbody></table>");
  // The rest, lower in risk order, folded: the page opens on what matters, as the text summary does.
  if (rows.length > SUMMARY_ROWS) {
    parts.push(
      `<details><summary>${rows.length - SUMMARY_ROWS} more Animas of lower risk</summary>${head}${body.slice(SUMMARY_ROWS).join("")}</tbody></table></details>`,
    );
  }
  if (idle.length > 0) parts.push(`<p class="idle">${idle.length} idle Animas (no activity, no findings): ${idle.map(e).join(", ")}</p>`);
  if (incomplete.length > 0) {
    parts.push(
      `<p class="warning">Incomplete for ${counted(incomplete.length, "Anima")} (records rotated away or lost): ${incomplete.map((name) => anchor(byName.get(name)?.index, name)).join(", ")}</p>`,
    );
  }
  if (input.operator === undefined) parts.push("<p>Operator settings are judged over every Anima: write the report without <code>--anima</code>.</p>");
  else {
    const findings = input.operator.filter((grant) => grant.finding !== undefined);
    parts.push(`<h3>Operator settings that hold for every Anima</h3>`);
    parts.push(
      findings.length === 0
        ? "<p>No finding.</p>"
        : `<table><thead><tr><th>Setting</th><th>Entry</th><th>Used by</th><th>Last used</th><th>Finding</th></tr></thead><tbody>${findings
            .map(
              (g) =>
                `<tr><td>${e(g.setting)}</td><td>${e(g.entry)}${g.location ? ` <span class="dim">[${e(g.location)}]</span>` : ""}</td><td class="n">${g.usedBy.length} of ${g.appliesTo}</td><td>${e(g.lastUsed ?? "")}</td><td>${e(g.finding ?? "")}</td></tr>`,
            )
            .join("")}</tbody></table>`,
    );
  }
  parts.push("</section>");
  return parts.join("\n");
}

/** Each Anima with denials or failures: a bar per quarter hour (per `BINS`th of the period), stacked by kind. */
function timelineSection(input: HtmlReportInput, byName: Index): string {
  const end = Date.parse(input.generatedAt);
  const firsts = input.reports.flatMap((r) => r.timeline.slice(0, 1).map((event) => Date.parse(event.ts)));
  const start = input.since !== undefined ? Date.parse(input.since) : Math.min(end - 86_400_000, ...firsts);
  const span = Math.max(1, end - start);
  const rows = input.summary.rows.flatMap((row) => {
    const entry = byName.get(row.anima);
    return entry && entry.report.timeline.length > 0 ? [entry] : [];
  });
  const counts = rows.map(({ report }) => {
    const bins = Array.from({ length: BINS }, () => new Map<TimelineEvent["kind"], number>());
    for (const event of report.timeline) {
      const bin = Math.min(BINS - 1, Math.max(0, Math.floor(((Date.parse(event.ts) - start) / span) * BINS)));
      const map = bins[bin] as Map<TimelineEvent["kind"], number>;
      map.set(event.kind, (map.get(event.kind) ?? 0) + 1);
    }
    return bins;
  });
  const most = Math.max(1, ...counts.flatMap((bins) => bins.map((bin) => [...bin.values()].reduce((a, b) => a + b, 0))));
  const width = 4;
  const height = 20;
  const svg = (bins: Array<Map<TimelineEvent["kind"], number>>) => {
    const rects: string[] = [];
    bins.forEach((bin, i) => {
      const total = [...bin.values()].reduce((a, b) => a + b, 0);
      if (total === 0) return;
      // Logarithmic: one denial must show beside a flood of them.
      let y = height;
      const barHeight = 3 + (height - 3) * (Math.log1p(total) / Math.log1p(most));
      const binStart = new Date(start + (span * i) / BINS).toISOString();
      for (const kind of KINDS) {
        const n = bin.get(kind) ?? 0;
        if (n === 0) continue;
        const h = (barHeight * n) / total;
        y -= h;
        rects.push(
          `<rect x="${i * width}" y="${y.toFixed(2)}" width="${width - 1}" height="${h.toFixed(2)}" fill="${COLOURS[kind]}"><title>${binStart}: ${n} ${kind}</title></rect>`,
        );
      }
    });
    return `<svg class="timeline" width="${BINS * width}" height="${height}" viewBox="0 0 ${BINS * width} ${height}" role="img"><rect class="track" x="0" y="0" width="${BINS * width}" height="${height}"/>${rects.join("")}</svg>`;
  };
  const legend = KINDS.map((kind) => `<span class="key"><span class="swatch" style="background:${COLOURS[kind]}"></span>${kind}</span>`).join(" ");
  return [
    '<section id="timeline"><h2>Timeline of denials and failures</h2>',
    `<p>${e(new Date(start).toISOString())} to ${e(input.generatedAt)}, ${BINS} bars of ${Math.round(span / BINS / 60_000)} minutes each. ${legend}</p>`,
    rows.length === 0
      ? "<p>No denial, failure, violation, refusal or interrupted call in the period.</p>"
      : timelineTable(rows.slice(0, TIMELINE_ROWS), counts, 0, svg),
    // The rest folded, like the summary's: a closed <details> is parsed but not laid out, so the page opens as fast for 200 Animas as for 40.
    rows.length > TIMELINE_ROWS
      ? `<details><summary>${rows.length - TIMELINE_ROWS} more Animas of lower risk</summary>${timelineTable(rows.slice(TIMELINE_ROWS), counts, TIMELINE_ROWS, svg)}</details>`
      : "",
    "</section>",
  ].join("\n");
}

function timelineTable(
  rows: ReadonlyArray<{ report: AnimaReport; index: number }>,
  counts: ReadonlyArray<Array<Map<TimelineEvent["kind"], number>>>,
  offset: number,
  svg: (bins: Array<Map<TimelineEvent["kind"], number>>) => string,
): string {
  const cells = rows.map(
    ({ report, index }, i) =>
      `<tr><td>${anchor(index, report.anima)}</td><td>${svg(counts[offset + i] ?? [])}</td><td class="n">${report.timeline.length + report.timelineDropped}</td></tr>`,
  );
  return `<table class="timelines"><tbody>${cells.join("")}</tbody></table>`;
}

function policySection(input: HtmlReportInput): string {
  const changes: Array<PolicyChange & { whose: string }> = [
    ...input.history.policyHistory.map((change) => ({ ...change, whose: "operator (every Anima)" })),
    ...input.reports.flatMap((report) => report.policyHistory.map((change) => ({ ...change, whose: report.anima }))),
  ].sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0));
  const row = (c: PolicyChange & { whose: string }) =>
    `<tr><td>${e(c.ts)}</td><td>${e(c.whose)}</td><td><code>${e(c.from ?? "(first seen)")}</code> → <code>${e(c.to)}</code></td><td>${e(c.changedAt ?? "")}</td><td><details><summary>policy</summary>${c.before !== undefined ? `<p>before</p><pre>${e(c.before)}</pre>` : ""}<p>after</p><pre>${e(c.after)}</pre></details></td></tr>`;
  return [
    '<section id="policy"><h2>Policy history</h2>',
    changes.length === 0
      ? "<p>No policy change recorded in the period.</p>"
      : `<table><thead><tr><th>Recorded</th><th>Whose</th><th>Policy hash</th><th>File changed</th><th></th></tr></thead><tbody>${changes.map(row).join("")}</tbody></table>`,
    "</section>",
  ].join("\n");
}

function versionSection(input: HtmlReportInput): string {
  const reloadRows = (reloads: AnimaReport["reloads"]) =>
    reloads
      .map(
        (r) =>
          `<tr><td>${e(r.ts)}</td><td>${e(r.tool)}</td><td>${e(r.origin)}</td><td>${e(r.change)}${r.message !== undefined ? `: ${e(r.message)}` : ""}</td><td>${e(r.trigger ?? "")}</td></tr>`,
      )
      .join("");
  const perAnima = input.reports
    .filter((report) => report.versions.length > 0 || report.reloads.length > 0)
    .map((report) => {
      const versions = report.versions
        .map(
          (v) =>
            `<tr><td>${e(v.tool)}</td><td><code title="${e(v.version)}">${e(v.version.slice(0, 12))}</code></td><td>${e(v.firstTs)}</td><td>${e(v.lastTs)}</td><td class="n">${v.calls}</td></tr>`,
        )
        .join("");
      const tools = new Set(report.versions.map((v) => v.tool));
      const changed = [...tools].filter((tool) => report.versions.filter((v) => v.tool === tool).length > 1).length;
      return `<details><summary>${e(report.anima)}: ${counted(tools.size, "tool")} called, ${changed} in more than one version, ${counted(report.reloads.length, "reload")}</summary>${
        versions
          ? `<table><thead><tr><th>Tool</th><th>Version</th><th>First call</th><th>Last call</th><th>Calls</th></tr></thead><tbody>${versions}</tbody></table>`
          : ""
      }${report.reloads.length ? `<table><thead><tr><th>Reloaded</th><th>Tool</th><th>Origin</th><th>Change</th><th>By</th></tr></thead><tbody>${reloadRows(report.reloads)}</tbody></table>` : ""}</details>`;
    });
  const hostWide = input.history.reloads;
  return [
    '<section id="versions"><h2>Version history</h2>',
    "<p>The versions (bundle hashes) each Anima's calls ran, per tool over time, and the reloads that changed what it sees.</p>",
    hostWide.length > 0
      ? `<details><summary>Core and shared tools (every Anima): ${hostWide.length} reloads</summary><table><tbody>${reloadRows(hostWide)}</tbody></table></details>`
      : "",
    perAnima.length > 0 ? perAnima.join("\n") : "<p>No call or reload in the period.</p>",
    "</section>",
  ].join("\n");
}

function detailSection(input: HtmlReportInput): string {
  const parts = ['<section id="animas"><h2>Animas</h2>'];
  input.reports.forEach((report, index) => {
    const lp = report.leastPrivilege;
    const use = (u: { uses: number; lastUsed?: string }) => (u.uses > 0 ? `${u.uses}× (last ${e(u.lastUsed ?? "")})` : '<span class="hot">unused</span>');
    const items: string[] = [];
    const c = report.coverage;
    items.push(`<li>Records: ${report.records}; kept from ${e(c.oldestTs ?? "(none kept)")}${c.rotatedAway ? ", older ones rotated away" : ""}</li>`);
    if (c.warning) items.push(`<li class="warning">${e(c.warning)}</li>`);
    if (c.note) items.push(`<li>${e(c.note)}</li>`);
    items.push(
      `<li>Network ${e(lp.network.mode)}${lp.network.mode === "allowlist" ? `: ${lp.network.grants.map((g) => `${e(g.entry)} ${use(g)}`).join("; ")}` : ""}${lp.network.hostsReached ? `; ${lp.network.hostsReached} hosts reached: ${lp.network.hosts.map((h) => `${e(h.host)} ${use(h)}`).join("; ")}` : ""}</li>`,
    );
    if (lp.internalHosts.length) items.push(`<li>allow_internal_hosts: ${lp.internalHosts.map((g) => `${e(g.entry)} ${use(g)}`).join("; ")}</li>`);
    if (lp.credentials.length) {
      items.push(
        `<li>Credentials readable: ${lp.credentials.map((cr) => `${e(cr.name)} <span class="dim">[${e(cr.location)}]</span> ${!cr.set ? '<span class="hot">not set</span>' : cr.status === "unattributed" ? "?" : use(cr)}`).join("; ")}</li>`,
      );
    }
    if (lp.unusedGrants.length) items.push(`<li class="warning">Unused grants: ${lp.unusedGrants.map(e).join("; ")}</li>`);
    for (const call of report.interrupted) {
      items.push(
        `<li class="warning">Interrupted: ${e(call.schema)} (tool ${e(call.tool)}, version ${e(call.version.slice(0, 12) || "(none)")}) started ${e(call.startedAt)}, pid ${call.pid}</li>`,
      );
    }
    if (report.inFlight.length) items.push(`<li>${counted(report.inFlight.length, "call")} in flight</li>`);
    const events = report.timeline
      .slice(-20)
      .map(
        (ev) =>
          `<tr><td>${e(ev.ts)}</td><td class="${ev.kind}">${ev.kind}</td><td>${e(ev.tool ?? "")}</td><td>${e(ev.what)}${ev.reason ? ` <span class="dim">— ${e(ev.reason)}</span>` : ""}</td></tr>`,
      )
      .join("");
    parts.push(
      `<details id="anima-${index}"><summary>${e(report.anima)}</summary><ul>${items.join("")}</ul>${events ? `<table><thead><tr><th>When</th><th>What</th><th>Tool</th><th>Detail</th></tr></thead><tbody>${events}</tbody></table>` : ""}</details>`,
    );
  });
  parts.push("</section>");
  return parts.join("\n");
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}h3{font-size:1em}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.hot{font-weight:600;color:#b71c1c}.warning{color:#b71c1c}.dim{color:#777}.meta{color:#555}
.idle{color:#555}details{margin:.2em 0}summary{cursor:pointer}pre{white-space:pre-wrap;max-width:60em;background:#f8f8f8;padding:4px}
svg.timeline .track{fill:#f6f6f6}.key{margin-right:.8em;white-space:nowrap}.swatch{display:inline-block;width:10px;height:10px;margin-right:3px;vertical-align:middle}
td.violation{color:#b71c1c}td.denial{color:#e65100}td.interrupted{color:#6a1b9a}td.refusal{color:#1565c0}
`;
