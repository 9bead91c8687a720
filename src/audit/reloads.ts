import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { sha256 } from "../bundling/sha256.js";
import { withLock } from "../file-lock.js";
import type { ToolInfo, ToolListing } from "../registry/listing.js";
import { changedTools } from "../registry/tool-watch.js";
import type { AuditEvent, AuditLog, ReloadChange, ReloadTrigger } from "./audit-log.js";
import type { HostConfig } from "../config.js";

/**
 * Reload records (docs/design.md §1: every reload is written to the audit log): which tool an Anima sees
 * was loaded new, changed, removed or failed, and what noticed it.
 *
 * Several parties notice changes: an explicit refresh (often a one-shot CLI process), the folder watcher
 * of each long-running host (a daemon, a worker, the host of an MCP server). What the audit log last said
 * about each tool of an Anima is therefore kept on disk, `state/animaworks-tool/reloads/animas/<anima>.json`
 * (`shared.json` for no Anima), and each party records only the difference to it and updates it: a change
 * is recorded once, by whoever sees it first, and a refresh that changes nothing records nothing. The
 * compare-and-update runs under a lock file, so that a daemon and an MCP server woken by the same edit do
 * not both record it. This is separate from `refresh`'s own memory (lifecycle/management.ts), which
 * reports what changed since the last refresh whoever recorded it.
 *
 * Core tools are not recorded: they ship with the product and change only with it.
 */

interface KnownTool {
  origin: string;
  /** A hash of what a caller can see of the version: origin, bundle, schemas, or the load error. */
  version: string;
}

type Snapshot = Record<string, KnownTool>;

export type ReloadEvent = Extract<AuditEvent, { kind: "reload" }>;

export interface RecordReloadsOptions {
  dataDir: string;
  audit: Pick<AuditLog, "append">;
  /** What the Anima (`listing.anima`, or none) sees now. */
  listing: ToolListing;
  trigger: ReloadTrigger;
  /** Compare only these tool names (a watcher's burst of edits); the rest of the snapshot is kept. Default: all. */
  only?: ReadonlySet<string>;
}

export function reloadStateFile(dataDir: string, anima: string | undefined): string {
  const base = join(dataDir, "state", "animaworks-tool", "reloads");
  if (anima === undefined) return join(base, "shared.json");
  // Anima names never start with "." (registry/animas.ts); a long one is hashed to stay a valid file name.
  const encoded = encodeURIComponent(anima);
  return join(base, "animas", `${encoded.length <= 200 ? encoded : `%h${sha256(anima).slice(0, 40)}`}.json`);
}

/** Records how `listing` differs from what was last recorded for its Anima; returns the records written. */
export async function recordReloads(options: RecordReloadsOptions): Promise<ReloadEvent[]> {
  const file = reloadStateFile(options.dataDir, options.listing.anima);
  await mkdir(dirname(file), { recursive: true });
  let ran = false;
  const run = (): Promise<ReloadEvent[]> => {
    ran = true;
    return compareAndRecord(file, options);
  };
  try {
    return await withLock(`${file}.lock`, run);
  } catch (error) {
    // A lock held by a live process for 10 s is stuck: record anyway (at worst a duplicate).
    if (ran) throw error;
    return run();
  }
}

async function compareAndRecord(file: string, options: RecordReloadsOptions): Promise<ReloadEvent[]> {
  const { listing, only, trigger } = options;
  const before = await readSnapshot(file);
  const after: Snapshot = { ...before };
  const anima = listing.anima !== undefined ? { anima: listing.anima } : {};
  const events: ReloadEvent[] = [];
  const seen = new Set<string>();
  for (const tool of listing.tools) {
    if (tool.origin === "core" || (only && !only.has(tool.name))) continue;
    seen.add(tool.name);
    const version = versionOf(tool);
    const known = before[tool.name];
    after[tool.name] = { origin: tool.origin, version };
    if (known?.version === version) continue;
    const change: ReloadChange = tool.status === "error" ? "failed" : known ? "changed" : "loaded";
    events.push({
      kind: "reload",
      ...anima,
      tool: tool.name,
      origin: tool.origin,
      change,
      ...(change === "failed" ? { message: tool.error?.message ?? "load error" } : {}),
      trigger,
    });
  }
  for (const [name, known] of Object.entries(before)) {
    if (seen.has(name) || (only && !only.has(name))) continue;
    delete after[name];
    events.push({ kind: "reload", ...anima, tool: name, origin: known.origin, change: "removed", trigger });
  }
  if (events.length === 0) return events;
  // Recorded first, remembered second: a crash in between repeats a record rather than losing one.
  for (const event of events) options.audit.append(event);
  await writeSnapshot(file, after);
  return events;
}

function versionOf(tool: ToolInfo): string {
  const text =
    tool.status === "error" ? `error:${tool.origin}:${tool.error?.message ?? ""}` : `${tool.origin}:${tool.bundleHash ?? ""}:${JSON.stringify(tool.schemas)}`;
  return sha256(text).slice(0, 32);
}

async function readSnapshot(file: string): Promise<Snapshot> {
  try {
    const parsed = JSON.parse(await readFile(file, "utf8")) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return {};
    const snapshot: Snapshot = {};
    for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
      const known = value as Partial<KnownTool> | null;
      if (known && typeof known.origin === "string" && typeof known.version === "string") snapshot[name] = { origin: known.origin, version: known.version };
    }
    return snapshot;
  } catch {
    return {}; // none yet, or unreadable: everything seen now is new to the audit log
  }
}

async function writeSnapshot(file: string, snapshot: Snapshot): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify(snapshot), { mode: 0o600 });
  await rename(temp, file);
}

/** A share (lifecycle/share.ts): the sharing Anima published `tool` to common_tools/. */
export function shareReloadEvent(anima: string, tool: string): ReloadEvent {
  return { kind: "reload", anima, tool, origin: "shared", change: "loaded", trigger: "share" };
}

// ---- the folder watchers (registry/tool-watch.ts) -----------------------------------------------------

/** What recording a watcher's reloads needs of a host (a `ToolHost` is one). */
export interface ReloadedHost {
  readonly config: HostConfig;
  readonly audit: AuditLog;
  list(anima?: string): Promise<ToolListing>;
  animas(): Promise<string[]>;
}

/**
 * After a watcher saw `paths` change (and the host was refreshed): records the reloads of the Animas
 * they concern — the owner of a personal folder, every Anima for common_tools/ — or of `onlyAnima`
 * alone (a watcher of one Anima's tools, e.g. for an MCP server, which serves one). Only the touched
 * tools are compared, so a first look at an Anima does not record all its tools as new. An Anima that
 * cannot be listed (removed meanwhile) is skipped.
 */
export async function recordWatchedReloads(host: ReloadedHost, paths: Iterable<string>, onlyAnima?: string): Promise<ReloadEvent[]> {
  const scope = changedTools(host.config.dataDir, paths);
  if (scope.size === 0) return [];
  const shared = scope.get(null);
  let animas = [...scope.keys()].filter((key): key is string => key !== null);
  if (onlyAnima !== undefined) animas = [onlyAnima];
  else if (shared) animas = [...new Set([...animas, ...(await host.animas())])];
  const events: ReloadEvent[] = [];
  for (const anima of animas) {
    const own = scope.get(anima);
    const only = shared === "all" || own === "all" ? undefined : new Set([...(shared ?? []), ...(own ?? [])]);
    if (only?.size === 0) continue;
    try {
      const listing = await host.list(anima);
      events.push(...(await recordReloads({ dataDir: host.config.dataDir, audit: host.audit, listing, trigger: "watcher", ...(only ? { only } : {}) })));
    } catch {
      // an Anima removed meanwhile, or the host closing: nothing to record for it
    }
  }
  return events;
}
