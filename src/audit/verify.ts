import { closeSync, lstatSync } from "node:fs";
import { join, relative } from "node:path";
import { isAnimaName } from "../registry/animas.js";
import { trailFilesIn } from "./trail-files.js";
import { RECORD_SCHEMA_VERSION, generationsOf, recordHash } from "./trail.js";
import { GENESIS, readHead } from "./trail-head.js";
import { MAX_LINE_BYTES, linesOf, openTrailForRead } from "./trail-file.js";

/**
 * `audit verify`: walks every trail of an audit folder (jsonl-audit-log.ts) along its chain (trail.ts) and
 * reports what breaks it. What it catches, each as a `broken` finding:
 * - an edited record (its hash no longer matches the `prev` of the record after it, or the head);
 * - a deleted record or run of records (a gap in `seq`), and a deleted oldest generation (the first kept
 *   record does not follow what the head says rotation dropped);
 * - reordered or duplicated records (`seq` going back);
 * - a truncated trail (the files end before the head's last record) and a deleted head;
 * - a lost trail: a trail file announced in the host's security trail that holds no record and no head
 *   (gone, or a decoy such as an empty generation left in its place; for an announcement of an earlier
 *   build, which names an Anima: both files of its pair so), and the host's security trail so while
 *   another trail holds something;
 * - a trail file that is not a regular file or cannot be read to its end, and a line too long to be a record;
 * - a `trail_head_lost` record (a writer found no head for files holding records), and a trail announced
 *   twice (started again after its files and head were deleted);
 * - a record without `seq` (inserted: every record ever written into this folder was chained, the folder
 *   came with the chain; the log before it was `audit.jsonl` beside the folder, never read here), and a
 *   line that is not a record (not a JSON object), unless a crash explains it (below).
 * `note`s are what a crash leaves: an unfinished last line of the current file, a record cut off mid-line
 * where the next record was due (the next writer starts a line of its own), records written after the
 * head was last moved. Reported, not failures.
 */
export interface VerifyFinding {
  severity: "broken" | "note";
  /** The trail's file, relative to the audit folder. */
  trail: string;
  /** Where: a generation file and 1-based line, when it is about one record. */
  at?: string;
  message: string;
}

export interface VerifyReport {
  trails: Array<{ trail: string; records: number; firstSeq?: number; lastSeq?: number; oldestTs?: string; newestTs?: string }>;
  findings: VerifyFinding[];
  /** True when no finding is `broken`. */
  ok: boolean;
}

export function verifyAuditDir(dir: string, keepFiles = 3): VerifyReport {
  return inOnePiece(verifySteps(dir, keepFiles));
}

/** Runs a walk to its end without giving the event loop a turn. */
function inOnePiece<T>(walk: Generator<void, T, undefined>): T {
  for (;;) {
    const step = walk.next();
    if (step.done === true) return step.value;
  }
}

/** Lines walked between two turns of the event loop by `verifyAuditDirYielding`: a few milliseconds of work. */
const LINES_PER_TURN = 2_000;

/**
 * `verifyAuditDir` for a long-running host (the daemon runs `audit` and `audit verify` for whoever asks):
 * the walk gives the event loop a turn every `LINES_PER_TURN` lines, so that the other Animas' calls go on
 * while hundreds of megabytes of trails are checked (walked in one piece, 114 MB held the daemon ≈ 3 s).
 */
export async function verifyAuditDirYielding(dir: string, keepFiles = 3, anima?: string): Promise<VerifyReport> {
  const walk = verifySteps(dir, keepFiles, anima);
  for (;;) {
    const step = walk.next();
    if (step.done === true) return step.value;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * The trails a check of `anima`'s records covers: the host's pair (where its records naming no known
 * Anima went, and every trail's announcement) and its own; every trail without one. The trails a read
 * for that Anima takes its records from (jsonl-audit-log.ts `trailFiles`), so that `audit events --anima`
 * and `audit --anima` check what they show, not every Anima's trails at each run.
 */
function trailsInScope(dir: string, all: readonly string[], anima: string | undefined): readonly string[] {
  if (anima === undefined) return all;
  const host = all.slice(0, 2);
  // A name that is not an Anima's has no trail of its own (its records are the host's): never a path.
  return isAnimaName(anima) ? [...host, join(dir, "animas", `${anima}.jsonl`), join(dir, "animas", `${anima}.security.jsonl`)] : host;
}

/** The walk of `verifyAuditDir`; it yields where a caller may give the event loop a turn. */
function* verifySteps(dir: string, keepFiles: number, anima?: string): Generator<void, VerifyReport, undefined> {
  const all = trailFilesIn(dir);
  const trails = trailsInScope(dir, all, anima);
  const inScope = (name: string) => anima === undefined || trails.includes(join(dir, name));
  const report: VerifyReport = { trails: [], findings: [], ok: true };
  const announced: Announced = { files: new Set(), twice: new Set(), pairs: new Set() };
  // A trail is present when it holds something to check: a chained record or a head. Any file at all
  // (an empty generation, a file of another kind) is not enough: a decoy left in place of a deleted trail
  // would answer for it. A file that cannot be read is reported broken where it is walked.
  const holding = new Set<string>();
  for (const file of trails) if (yield* walkSettled(dir, file, keepFiles, report, announced)) holding.add(file);
  const present = (file: string) => holding.has(file);
  const lost = (file: string, message: string) => report.findings.push({ severity: "broken", trail: relative(dir, file), message });
  for (const name of announced.files) {
    if (inScope(name) && !present(join(dir, name)))
      lost(join(dir, name), `the trail ${name} was announced but its files are gone (no record and no head left: deleted, or left empty)`);
  }
  // A writer announces a trail when it finds, under the trail's lock, no head and no record: once per
  // trail, unless its files and head were deleted (the trail then starts again from seq 1 and proves
  // nothing about what was there).
  for (const name of [...announced.twice].filter(inScope)) {
    lost(join(dir, name), `the trail ${name} was started twice: its files and head were deleted in between, and what they held with them`);
  }
  // Announcements of earlier builds name an Anima, not a file: either file of its pair answers for it.
  for (const pair of [...announced.pairs].filter((name) => anima === undefined || name === anima)) {
    const base = join(dir, "animas", pair);
    if (![`${base}.jsonl`, `${base}.security.jsonl`].some(present)) lost(`${base}.jsonl`, `the trail of Anima ${pair} was announced but its files are gone`);
  }
  // The host's security trail holds every announcement and cannot announce itself. It is written before
  // any other trail (every trail's first record is announced there; every host records the operator's
  // policy there as it starts): gone while another trail is left, it was deleted, and what it announced
  // with it.
  // Scoped to one Anima, the other trails are not walked, but they still tell that the folder was written
  // to: any of them with a head or a file with bytes in it counts as left.
  const hostSecurity = join(dir, "host.security.jsonl");
  const othersLeft = (file: string) => (trails.includes(file) ? present(file) : holdsAnything(file, keepFiles));
  if (!present(hostSecurity) && all.some((file) => file !== hostSecurity && othersLeft(file)))
    lost(
      hostSecurity,
      "the host's security trail (which announces every other trail) is gone (no record and no head left), while other trails are left: it was deleted",
    );
  report.ok = report.findings.every((finding) => finding.severity !== "broken");
  return report;
}

/** Whether a trail not walked has anything left: its head, or a generation with bytes in it. */
function holdsAnything(file: string, keepFiles: number): boolean {
  return [`${file}.head`, ...generationsOf(file, keepFiles)].some((path) => {
    try {
      return lstatSync(path).size > 0;
    } catch {
      return false;
    }
  });
}

/** The trails the host's security trail announced: files (this build), and Animas' pairs (earlier builds). */
interface Announced {
  files: Set<string>;
  /** Files announced more than once: started again, so their files and head were deleted in between. */
  twice: Set<string>;
  pairs: Set<string>;
}

/** A `file` an announcement may name: one of the audit folder's trails, nothing outside it. */
const ANNOUNCED_FILE = /^(host|animas\/[^/]+?(\.security)?)\.jsonl$/;

function announce(announced: Announced, record: { anima?: unknown; file?: unknown }): void {
  if (typeof record.file === "string" && ANNOUNCED_FILE.test(record.file) && !record.file.includes("..")) {
    if (announced.files.has(record.file)) announced.twice.add(record.file);
    announced.files.add(record.file);
  } else if (typeof record.anima === "string") announced.pairs.add(record.anima);
}

/** Walks of one trail that a rotation may interrupt before the last one counts as it is. */
const WALKS_PER_TRAIL = 3;

/**
 * `verifyTrail`, again when the trail rotated while it was walked (a writer renamed its files one
 * generation down: the walk could read a generation twice or miss one, and report a whole chain broken).
 * A walk that gives the event loop turns in a host that writes the trail meets that; so does one beside
 * another process's writer. Which inode each generation is, before and after, tells. The last walk runs
 * in one piece: this process's own writer cannot rotate the trail under it.
 */
function* walkSettled(dir: string, file: string, keepFiles: number, report: VerifyReport, announced: Announced): Generator<void, boolean, undefined> {
  for (let walk = 1; ; walk++) {
    const before = generationInodes(file, keepFiles);
    const scratch: VerifyReport = { trails: [], findings: [], ok: true };
    const heard: Announced = { files: new Set(), twice: new Set(), pairs: new Set() };
    const walking = verifyTrail(dir, file, keepFiles, scratch, heard);
    const holds = walk < WALKS_PER_TRAIL ? yield* walking : inOnePiece(walking);
    if (walk < WALKS_PER_TRAIL && generationInodes(file, keepFiles) !== before) continue;
    report.trails.push(...scratch.trails);
    report.findings.push(...scratch.findings);
    for (const name of heard.files) announce(announced, { file: name });
    for (const name of heard.twice) announced.twice.add(name);
    for (const anima of heard.pairs) announced.pairs.add(anima);
    return holds;
  }
}

function generationInodes(file: string, keepFiles: number): string {
  return generationsOf(file, keepFiles)
    .map((generation) => {
      try {
        return String(lstatSync(generation).ino);
      } catch {
        return "-";
      }
    })
    .join(",");
}

/** Walks one trail; true when it holds a chained record or a head (see `present`). */
function* verifyTrail(dir: string, file: string, keepFiles: number, report: VerifyReport, announced: Announced): Generator<void, boolean, undefined> {
  const trail = relative(dir, file);
  const head = readHead(file);
  const broken = (message: string, at?: string) => report.findings.push({ severity: "broken", trail, message, ...(at ? { at } : {}) });
  const note = (message: string, at?: string) => report.findings.push({ severity: "note", trail, message, ...(at ? { at } : {}) });
  const generations = generationsOf(file, keepFiles);
  let expectedSeq: number | undefined;
  let prevHash: string | undefined;
  let chained = 0;
  let firstSeq: number | undefined;
  let oldestTs: string | undefined;
  let newestTs: string | undefined;
  let anyFile = false;
  /** The hash of the (last) record numbered head.seq: the head names it, however far the files run past it. */
  let hashAtHead: string | undefined;
  let walked = 0;
  for (const [index, generation] of generations.entries()) {
    if (index > 0) yield; // a turn between files, too: an audit folder of many small trails is many files
    const name = relative(dir, generation);
    let fd: number | undefined;
    try {
      fd = openTrailForRead(generation);
    } catch (error) {
      // Never "no file": a FIFO, directory or unreadable file in a trail's place hides what was there.
      anyFile = true;
      broken(`${name} cannot be read as a trail file (${error instanceof Error ? error.message : String(error)})`);
      continue;
    }
    if (fd === undefined) continue;
    anyFile = true;
    let torn = false;
    try {
      for (const { text: line, number, terminated } of linesOf(fd, MAX_LINE_BYTES)) {
        if (++walked % LINES_PER_TURN === 0) yield;
        const at = `${name}:${number}`;
        if (!terminated) torn = true;
        if (line === undefined) {
          broken(`a line longer than ${MAX_LINE_BYTES} bytes: not a record (padding or inserted text?)`, at);
          continue;
        }
        if (line === "") continue;
        const record = recordOf(line);
        if (record === undefined) {
          // Not a record. A writer that died mid-line leaves one: the file's unfinished last line, or, once
          // the next writer has started a line of its own after it, a record cut off where the next seq was
          // due. The chain does not pass through it, so the records around it still prove themselves (a
          // record edited into garbage breaks the chain at the next record). Anything else was put there.
          if (!terminated) note("an unfinished last line (a writer ended mid-write)", at);
          else if (cutRecordSeq(line) === (expectedSeq ?? (head?.droppedThroughSeq ?? 0) + 1))
            note("a record cut off mid-line (a writer ended mid-write; the next one started a new line)", at);
          else broken("a line that is not a record (inserted text?)", at);
          continue;
        }
        if (typeof record.seq !== "number") {
          broken("a record without seq: not chained, so not written by the host (inserted)", at);
          continue;
        }
        if (record.kind === "trail") announce(announced, record);
        // A writer that found a trail's head gone while its files held records said so (trail.ts): the
        // trail's end (cut records, an edited last record) can no longer be checked against anything.
        if (record.kind === "trail_rewritten")
          report.findings.push({
            severity: "broken",
            trail: typeof record.trail === "string" ? record.trail : trail,
            at,
            message: `a writer found records past the head whose seq ${String(record.headSeq)} is not the head's record: records were rewritten and re-chained`,
          });
        if (record.kind === "trail_head_lost")
          report.findings.push({
            severity: "broken",
            trail: typeof record.trail === "string" ? record.trail : trail,
            at,
            message: `a writer found no readable head while the files held records (through seq ${String(record.fileSeq)}): the head was deleted or spoiled, and the trail's end cannot be checked`,
          });
        if (typeof record.ts === "string") {
          oldestTs ??= record.ts;
          newestTs = record.ts;
        }
        if (expectedSeq === undefined) {
          // The chain's start: seq 1 from genesis, or right after what rotation dropped.
          const fromSeq = head?.droppedThroughSeq ?? 0;
          const fromHash = head?.droppedThroughHash ?? GENESIS;
          firstSeq = record.seq;
          if (record.seq !== fromSeq + 1) {
            broken(
              fromSeq === 0 && head
                ? `the trail starts at seq ${record.seq}, not 1, and nothing was rotated away: records 1–${record.seq - 1} were deleted`
                : `the oldest kept record is seq ${record.seq}, but rotation dropped through seq ${fromSeq}: records ${fromSeq + 1}–${record.seq - 1} were deleted (a generation removed?)`,
              at,
            );
          } else if (head && record.prev !== fromHash) broken(`seq ${record.seq} does not follow the records before it (prev hash mismatch)`, at);
        } else if (record.seq > expectedSeq) {
          broken(`records seq ${expectedSeq}${record.seq - 1 > expectedSeq ? `–${record.seq - 1}` : ""} are missing (deleted)`, at);
        } else if (record.seq < expectedSeq) {
          broken(`seq ${record.seq} comes after seq ${expectedSeq - 1} (reordered or duplicated)`, at);
        } else if (record.prev !== prevHash) {
          broken(`seq ${record.seq - 1} was changed: its hash is not the one seq ${record.seq} recorded`, at);
        }
        expectedSeq = record.seq + 1;
        prevHash = recordHash(line);
        if (head && record.seq === head.seq) hashAtHead = prevHash;
        chained++;
      }
    } catch (error) {
      broken(`${name} could not be read to its end (${error instanceof Error ? error.message : String(error)})`);
    } finally {
      closeSync(fd);
    }
    if (torn && index < generations.length - 1) broken(`${name} ends mid-line, and it is not the current file (truncated)`);
  }
  if (!anyFile && !head) return false;
  const lastSeq = expectedSeq === undefined ? undefined : expectedSeq - 1;
  if (!head) {
    if (chained > 0) broken("the head file is missing (deleted?): the trail's end cannot be checked");
  } else if (lastSeq === undefined ? head.seq > 0 : lastSeq < head.seq) {
    broken(`truncated: the head says the trail runs to seq ${head.seq}, the files end at ${lastSeq ?? "no record"}`);
  } else if (lastSeq === head.seq && prevHash !== head.hash) {
    broken(`seq ${lastSeq} (the last record) was changed: its hash is not the head's`);
  } else if (lastSeq !== undefined && lastSeq > head.seq && head.seq > 0 && hashAtHead !== head.hash) {
    broken(`seq ${head.seq} (the head's record) was changed, and records after it re-chained: its hash is not the head's`);
  } else if (lastSeq !== undefined && lastSeq > head.seq) {
    note(`records after seq ${head.seq} were written after the head was last moved (a writer ended between the two)`);
  }
  report.trails.push({
    trail,
    records: chained,
    ...(firstSeq !== undefined ? { firstSeq } : {}),
    ...(lastSeq !== undefined ? { lastSeq } : {}),
    ...(oldestTs !== undefined ? { oldestTs } : {}),
    ...(newestTs !== undefined ? { newestTs } : {}),
  });
  return head !== undefined || chained > 0;
}

type LineRecord = {
  seq?: unknown;
  prev?: unknown;
  ts?: unknown;
  kind?: unknown;
  anima?: unknown;
  file?: unknown;
  trail?: unknown;
  fileSeq?: unknown;
  headSeq?: unknown;
};

/** The line as a record: a JSON object (`null`, a number, a list… are not records), else undefined. */
function recordOf(line: string): LineRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined;
}

/** The seq of a record line cut off mid-write (it starts as the writer starts every line, trail.ts), else undefined. */
function cutRecordSeq(line: string): number | undefined {
  const start = new RegExp(`^\\{"v":${RECORD_SCHEMA_VERSION},"seq":(\\d+),`).exec(line);
  return start ? Number(start[1]) : undefined;
}
