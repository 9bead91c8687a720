import { createHash } from "node:crypto";
import { readdir } from "node:fs/promises";
import { PathConfinement } from "../capabilities/paths.js";
import { ToolHostError } from "../errors.js";
import { TOOL_EXTENSIONS } from "../registry/discovery.js";
import { readRegularFile, withExactDir } from "./safe-dir.js";
import { MAX_TOOL_SOURCE_BYTES } from "./validate.js";

/**
 * Who shared a shared tool, and what exactly was shared. One hidden sidecar per tool,
 * `common_tools/.<name>.share.json`, written once (created exclusively, never updated) by shareTool.
 * Per-tool files instead of one index: no read-modify-write, so concurrent shares of different tools
 * never contend, and creating the sidecar is the share's reservation of the name (share.ts). Hidden:
 * discovery and watchers ignore dotfiles.
 */
export interface ShareRecord {
  version: 1;
  tool: string;
  /** File name in common_tools/, e.g. `my_tool.ts`. */
  file: string;
  /** SHA-256 (hex) of the file's bytes as shared. */
  sha256: string;
  bytes: number;
  /** Name of the Anima that shared it. */
  shared_by: string;
  /** ISO 8601 time of the share. */
  shared_at: string;
}

export type SharedToolState =
  | "ok" // content matches the record
  | "modified" // content (or the file's extension) differs from what was shared
  | "unrecorded" // a shared tool that did not come through shareTool (copied in by other means)
  | "missing" // a record whose tool file is gone (removed, or a share interrupted by a crash)
  | "invalid-record" // the sidecar cannot be read as a record
  | "unreadable"; // the tool file is a link, not a regular file, or too large

export interface SharedToolStatus {
  tool: string;
  /** The tool's file in common_tools/, when there is one. */
  file: string | undefined;
  status: SharedToolState;
  sharedBy?: string;
  sharedAt?: string;
  recordedSha256?: string;
  actualSha256?: string;
  detail?: string;
}

export const SHARED_DIR = "common_tools";

export function recordFileName(tool: string): string {
  return `.${tool}.share.json`;
}

const RECORD_FILE = /^\.(.+)\.share\.json$/;

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export function encodeRecord(record: ShareRecord): Buffer {
  return Buffer.from(`${JSON.stringify(record, null, 2)}\n`, "utf8");
}

function decodeRecord(bytes: Buffer, tool: string): ShareRecord | string {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    return "not valid JSON";
  }
  const r = value as Partial<ShareRecord> | null;
  if (typeof r !== "object" || r === null || r.version !== 1) return "not a version 1 share record";
  if (r.tool !== tool || typeof r.file !== "string" || typeof r.sha256 !== "string" || !/^[0-9a-f]{64}$/.test(r.sha256))
    return "fields tool/file/sha256 are missing or wrong";
  if (typeof r.shared_by !== "string" || typeof r.shared_at !== "string" || typeof r.bytes !== "number") return "fields shared_by/shared_at/bytes are missing";
  return r as ShareRecord;
}

/** Every shared tool and record in `{dataDir}/common_tools/`, with its state, sorted by name. */
export async function inspectSharedTools(dataDir: string): Promise<SharedToolStatus[]> {
  const paths = new PathConfinement(dataDir);
  const operation = "shared tool audit";
  try {
    return await withExactDir(paths, SHARED_DIR, operation, { create: false }, async (dirFdPath) => {
      const entries = await readdir(dirFdPath);
      const files = new Map<string, string>();
      const records = new Set<string>();
      for (const entry of entries) {
        const recordMatch = RECORD_FILE.exec(entry);
        if (recordMatch) records.add(recordMatch[1] as string);
        const ext = TOOL_EXTENSIONS.find((e) => entry.endsWith(e));
        if (!ext || entry.startsWith("_") || entry.startsWith(".") || entry.endsWith(".d.ts") || entry.endsWith(".d.mts")) continue;
        // More than one file per name is discovery's problem to report; the audit checks each.
        files.set(entry, entry.slice(0, -ext.length));
      }
      const statuses: SharedToolStatus[] = [];
      for (const [file, tool] of files) statuses.push(await inspectOne(dirFdPath, tool, file, records.has(tool), operation));
      const withFiles = new Set(files.values());
      for (const tool of records) {
        if (withFiles.has(tool)) continue;
        const record = await readRecord(dirFdPath, tool, operation);
        if (typeof record === "string") {
          statuses.push({ tool, file: undefined, status: "invalid-record", detail: record });
        } else {
          const detail = `recorded ${record.file} is gone (removed, or a share was interrupted); remove ${SHARED_DIR}/${recordFileName(tool)} to free the name`;
          statuses.push({ tool, file: undefined, status: "missing", ...recordFields(record), detail });
        }
      }
      return statuses.sort((a, b) => (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : (a.file ?? "") < (b.file ?? "") ? -1 : 1));
    });
  } catch (error) {
    if (error instanceof ToolHostError && error.type === "NotFound") return [];
    throw error;
  }
}

/** Shared tools that do not match what was shared, or cannot be vouched for: everything not `ok`. */
export async function checkSharedIntegrity(dataDir: string): Promise<SharedToolStatus[]> {
  return (await inspectSharedTools(dataDir)).filter((status) => status.status !== "ok");
}

async function inspectOne(dirFdPath: string, tool: string, file: string, hasRecord: boolean, operation: string): Promise<SharedToolStatus> {
  let actual: string;
  try {
    const content = await readRegularFile(dirFdPath, file, `${SHARED_DIR}/${file}`, operation, MAX_TOOL_SOURCE_BYTES);
    if (!content) return { tool, file, status: "unreadable", detail: "the file disappeared during the audit" };
    actual = sha256Hex(content.bytes);
  } catch (error) {
    return { tool, file, status: "unreadable", detail: error instanceof Error ? error.message : String(error) };
  }
  if (!hasRecord) return { tool, file, status: "unrecorded", actualSha256: actual, detail: "not shared through share_tool: no record of who shared it" };
  const record = await readRecord(dirFdPath, tool, operation);
  if (typeof record === "string") return { tool, file, status: "invalid-record", actualSha256: actual, detail: record };
  const base = { tool, file, ...recordFields(record), actualSha256: actual };
  if (record.file !== file) return { ...base, status: "modified", detail: `shared as ${record.file}, now ${file}` };
  if (record.sha256 !== actual) return { ...base, status: "modified", detail: "the content changed after it was shared" };
  return { ...base, status: "ok" };
}

async function readRecord(dirFdPath: string, tool: string, operation: string): Promise<ShareRecord | string> {
  try {
    const content = await readRegularFile(dirFdPath, recordFileName(tool), `${SHARED_DIR}/${recordFileName(tool)}`, operation, 64 * 1024);
    return content ? decodeRecord(content.bytes, tool) : "the record disappeared during the audit";
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

function recordFields(record: ShareRecord): Pick<SharedToolStatus, "sharedBy" | "sharedAt" | "recordedSha256"> {
  return { sharedBy: record.shared_by, sharedAt: record.shared_at, recordedSha256: record.sha256 };
}
