import type Database from "better-sqlite3";
import { type JobRow, rowToJob } from "./sqlite-schema.js";
import type { ClaimRequest, Job } from "./store.js";

/**
 * The embedded store's claim: Animas in turn, each Anima's jobs by priority then submit order. It runs
 * inside the caller's `BEGIN IMMEDIATE` transaction, so it must end promptly whatever the file holds:
 * every write of every Anima waits behind it.
 *
 * Hand-edited rows. The tables are not STRICT (SQLite's column types are affinities, not checks), so a
 * queued row may hold a BLOB `anima` or a text `timeout_ms` that no submit could have written. A row whose
 * columns do not have the types the store writes is never claimed: it ends `failed` with a `LoadError`
 * naming the job and the column, and the claim moves on. Invariant of the loop below: each turn either
 * claims a job or fails a malformed one (both take a row out of `queued`) or drops an Anima from `heads`,
 * so it ends after at most (queued rows + Animas) turns.
 */

/** The type each column of a queued job must have (SQLite `typeof`), as the store's own writes give it. */
const COLUMN_TYPES: ReadonlyArray<readonly [column: string, type: "text" | "integer"]> = [
  ["id", "text"],
  ["anima", "text"],
  ["tool", "text"],
  ["action", "text"],
  ["schema_name", "text"],
  ["args_json", "text"],
  ["bundle_hash", "text"],
  ["priority", "integer"],
  ["attempts", "integer"],
  ["max_attempts", "integer"],
  ["retry_backoff_ms", "integer"],
  ["timeout_ms", "integer"],
  ["submitted_at", "integer"],
  ["not_before", "integer"],
  ["cancel_requested", "integer"],
];

/** The first wrong-typed column of a row as "column found expected", or NULL when the row is well formed. */
const MALFORMED = `CASE ${COLUMN_TYPES.map(([c, t]) => `WHEN typeof(${c}) <> '${t}' THEN '${c} ' || typeof(${c}) || ' ${t}'`).join(" ")}
  WHEN idempotency_key IS NOT NULL AND typeof(idempotency_key) <> 'text' THEN 'idempotency_key ' || typeof(idempotency_key) || ' text'
  END`;

/** The head of one Anima's queue: just what choosing between heads needs, and whether the row is usable. */
interface Head {
  seq: number;
  /** The job's id, or `#seq` when the id itself is not text: for messages. */
  label: string;
  /** "column found expected" when the row is malformed (see MALFORMED), else null. */
  malformed: string | null;
}

interface HeadEntry {
  /** The Anima's name: the key of `heads`, always a string (a non-text name never has a usable head). */
  key: string;
  row: Head;
  turn: number;
}

export type ClaimStatements = Record<
  "runningPerAnima" | "queuedAnimas" | "headOfAnima" | "turnOf" | "maxTurn" | "setTurn" | "claimOne" | "failMalformed",
  Database.Statement
>;

export function prepareClaim(db: Database.Database): ClaimStatements {
  const s = (sql: string): Database.Statement => db.prepare(sql);
  return {
    runningPerAnima: s("SELECT anima, COUNT(*) AS n FROM jobs WHERE status = 'running' GROUP BY anima"),
    // Distinct Animas with queued work by skip-scan over the partial index: O(Animas × log n), not O(jobs).
    queuedAnimas: s(`WITH RECURSIVE a(name) AS (
        SELECT (SELECT MIN(anima) FROM jobs WHERE status = 'queued')
        UNION ALL
        SELECT (SELECT MIN(anima) FROM jobs WHERE status = 'queued' AND anima > a.name) FROM a WHERE a.name IS NOT NULL
      ) SELECT name FROM a WHERE name IS NOT NULL`),
    // A not_before that is not an integer compares above every number in SQLite and would keep its job
    // queued forever: such a row is taken as due, so that the claim fails it.
    headOfAnima: s(`SELECT seq, CASE WHEN typeof(id) = 'text' THEN id ELSE '#' || seq END AS label, ${MALFORMED} AS malformed
      FROM jobs WHERE status = 'queued' AND anima = ? AND (not_before <= ? OR typeof(not_before) <> 'integer')
      ORDER BY priority DESC, seq LIMIT 1`),
    turnOf: s("SELECT turn FROM anima_turns WHERE anima = ?"),
    maxTurn: s("SELECT COALESCE(MAX(turn), 0) AS turn FROM anima_turns"),
    setTurn: s("INSERT INTO anima_turns (anima, turn) VALUES (?, ?) ON CONFLICT (anima) DO UPDATE SET turn = excluded.turn"),
    claimOne: s(`UPDATE jobs SET status = 'running', attempts = attempts + 1, started_at = @now, lease_owner = @owner,
        lease_expires_at = @expires, progress_fraction = NULL, progress_message = NULL
      WHERE seq = @seq AND status = 'queued' RETURNING *`),
    // A job whose Anima or id is not text has no one to tell and no notice file name: marked notified.
    failMalformed: s(`UPDATE jobs SET status = 'failed', finished_at = @now, not_before = 0, lease_owner = NULL, lease_expires_at = NULL,
        error_type = 'LoadError', error_fault = 'host', error_message = @message, error_hint = @hint,
        notified_at = CASE WHEN typeof(anima) = 'text' AND typeof(id) = 'text' THEN NULL ELSE @now END
      WHERE seq = @seq AND status = 'queued'`),
  };
}

/** Claims up to `request.limit` jobs at `now`; call inside a write transaction. */
export function claimJobs(sql: ClaimStatements, request: ClaimRequest, now: number): Job[] {
  const perAnima = request.perAnimaLimit ?? Number.POSITIVE_INFINITY;
  const running = new Map<unknown, number>();
  for (const row of sql.runningPerAnima.all() as Array<{ anima: unknown; n: number }>) running.set(row.anima, row.n);
  // The next usable job of `anima`, failing each malformed row met on the way (each leaves `queued`, so this ends).
  const headOf = (anima: unknown): Head | undefined => {
    for (;;) {
      const row = sql.headOfAnima.get(anima, now) as Head | undefined;
      if (!row?.malformed) return row;
      failMalformed(sql, row, now);
    }
  };
  // The head of each Anima's queue, for Animas with room under their limit.
  const heads = new Map<string, HeadEntry>();
  for (const { name } of sql.queuedAnimas.all() as Array<{ name: unknown }>) {
    if ((running.get(name) ?? 0) >= perAnima) continue;
    const row = headOf(name);
    if (!row || typeof name !== "string") continue; // a non-text name: headOf failed all its rows
    const turn = (sql.turnOf.get(name) as { turn: number } | undefined)?.turn ?? 0;
    heads.set(name, { key: name, row, turn });
  }
  let turn = (sql.maxTurn.get() as { turn: number }).turn;
  const claimed: Job[] = [];
  while (claimed.length < request.limit && heads.size > 0) {
    let best: HeadEntry | undefined;
    for (const head of heads.values()) if (!best || before(head, best)) best = head;
    const { key } = best!;
    const row = sql.claimOne.get({ seq: best!.row.seq, owner: request.owner, now, expires: now + request.leaseMs }) as JobRow | undefined;
    if (row) claimed.push(rowToJob(row));
    turn += 1;
    sql.setTurn.run(key, turn);
    const count = (running.get(key) ?? 0) + 1;
    running.set(key, count);
    const next = count < perAnima ? headOf(key) : undefined;
    // Always replaces or removes the chosen entry, by the key it was stored under.
    if (next) heads.set(key, { key, row: next, turn });
    else heads.delete(key);
  }
  return claimed;
}

function failMalformed(sql: ClaimStatements, row: Head, now: number): void {
  const [column, found, expected] = row.malformed!.split(" ");
  const message = `job ${row.label} cannot run: its ${column} column holds a ${found} value where the job store writes ${expected}`;
  const hint = "the job database was edited by hand; submit the job again";
  sql.failMalformed.run({ seq: row.seq, now, message, hint });
}

/**
 * Claim order between two Animas' queue heads: the Anima served longest ago, then submit order. Priority
 * is not compared here: it orders an Anima's own jobs (each head is its Anima's most urgent), never one
 * Anima's jobs before another's, or a tenant could starve the others by asking for a high priority.
 */
function before(a: HeadEntry, b: HeadEntry): boolean {
  if (a.turn !== b.turn) return a.turn < b.turn;
  return a.row.seq < b.row.seq;
}
