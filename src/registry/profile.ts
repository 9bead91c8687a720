/**
 * A tool's EXECUTION_PROFILE: what each action declares about how it runs (expected and longest
 * duration, whether it may run as a background job and with which retries, whether it is gated), its
 * checks, and how the host reads it for a call.
 */

export interface ProfileEntry {
  expected_seconds?: number;
  background_eligible?: boolean;
  timeout_seconds?: number;
  gated?: boolean;
  /** Background jobs: runs in all (1 to `MAX_RETRY_ATTEMPTS`) and seconds before the first retry. */
  retry?: { attempts: number; backoff?: number };
}

/** Most runs a profile's `retry.attempts` may ask for. */
export const MAX_RETRY_ATTEMPTS = 10;
/** Longest `retry.backoff`, in seconds. */
export const MAX_RETRY_BACKOFF_SECONDS = 3_600;

/** Receives a problem and the path (from EXECUTION_PROFILE) of the setting at fault. */
type ProblemSink = (message: string, path: Array<string | number>) => void;

/**
 * Normalises and checks a module's EXECUTION_PROFILE: every problem goes to `problem`, and the settings
 * that are valid are kept (registry/schemas.ts checks it with the schemas).
 */
export function checkProfile(raw: unknown, problem: ProblemSink): Record<string, ProfileEntry> {
  if (raw === null || raw === undefined) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) {
    problem("EXECUTION_PROFILE must be an object mapping action names to settings", []);
    return {};
  }
  const profile: Record<string, ProfileEntry> = {};
  for (const [action, value] of Object.entries(raw)) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      problem(`EXECUTION_PROFILE.${action} must be an object`, [action]);
      continue;
    }
    const entry = value as Record<string, unknown>;
    const out: ProfileEntry = {};
    for (const key of ["expected_seconds", "timeout_seconds"] as const) {
      const v = entry[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
        problem(`EXECUTION_PROFILE.${action}.${key} must be a positive number of seconds`, [action, key]);
      else out[key] = v;
    }
    for (const key of ["background_eligible", "gated"] as const) {
      const v = entry[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== "boolean") problem(`EXECUTION_PROFILE.${action}.${key} must be true or false`, [action, key]);
      else out[key] = v;
    }
    const retry = checkRetry(entry["retry"], `EXECUTION_PROFILE.${action}.retry`, (message, path) => problem(message, [action, "retry", ...path]));
    if (retry) out.retry = retry;
    profile[action] = out;
  }
  return profile;
}

function checkRetry(raw: unknown, where: string, problem: ProblemSink): ProfileEntry["retry"] {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    problem(`${where} must be an object like { attempts: 3, backoff: 5 }`, []);
    return undefined;
  }
  const { attempts, backoff } = raw as Record<string, unknown>;
  let ok = true;
  if (typeof attempts !== "number" || !Number.isInteger(attempts) || attempts < 1 || attempts > MAX_RETRY_ATTEMPTS) {
    problem(`${where}.attempts must be a whole number of runs from 1 to ${MAX_RETRY_ATTEMPTS}`, ["attempts"]);
    ok = false;
  }
  if (backoff !== undefined && (typeof backoff !== "number" || !Number.isFinite(backoff) || backoff < 0 || backoff > MAX_RETRY_BACKOFF_SECONDS)) {
    problem(`${where}.backoff must be a number of seconds from 0 to ${MAX_RETRY_BACKOFF_SECONDS}`, ["backoff"]);
    ok = false;
  }
  if (!ok) return undefined;
  return { attempts: attempts as number, ...(backoff !== undefined ? { backoff: backoff as number } : {}) };
}

/** Longest duration a Node timer can hold, ms (2^31 − 1; it treats anything longer as 1 ms). */
export const MAX_TIMER_MS = 2_147_483_647;

/** An action's `timeout_seconds` in whole ms (1 to the longest timer), or undefined when the profile gives none. */
export function profileTimeoutMs(profile: ProfileEntry | undefined): number | undefined {
  const seconds = profile?.timeout_seconds;
  return seconds === undefined ? undefined : Math.min(MAX_TIMER_MS, Math.max(1, Math.round(seconds * 1000)));
}

/** The profile entry for an action; keys may spell the action with hyphens (`draft-update`). */
export function profileFor(profile: Record<string, ProfileEntry>, action: string): ProfileEntry | undefined {
  return profile[action] ?? profile[action.replaceAll("_", "-")] ?? profile[action.replaceAll("-", "_")];
}
