import type { Parameters } from "fast-check";

/**
 * How hard the property tests search. `npm test` runs each door with a fixed seed and a small count (a few
 * seconds per door, the same cases every run); `npm run fuzz` sets FUZZ_RUNS to a large count, with a new
 * seed each time (printed by fast-check on a failure, with the counterexample) unless FUZZ_SEED pins one.
 */
const fuzzRuns = Number(process.env["FUZZ_RUNS"] ?? "");

/** True under `npm run fuzz`. */
export const FUZZING = Number.isSafeInteger(fuzzRuns) && fuzzRuns > 0;

/** The seed of `npm test`'s runs. */
export const FIXED_SEED = 20_261_206;

export function fuzzParameters<T>(smallRuns: number): Parameters<T> {
  if (!FUZZING) return { numRuns: smallRuns, seed: FIXED_SEED, endOnFailure: true };
  const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : Math.floor(Math.random() * 2 ** 31);
  return { numRuns: fuzzRuns, seed, endOnFailure: true, verbose: 1 };
}

/** A test's time limit: `smallMs` for the fixed runs, scaled to the runs under `npm run fuzz`. */
export function propertyTimeoutMs(smallMs: number, smallRuns: number): number {
  return FUZZING ? Math.ceil((smallMs * fuzzRuns) / smallRuns) + 60_000 : smallMs;
}

/** Lines of a Node stack trace ("    at fn (file.js:1:2)"): never part of any answer. */
export const STACK_TRACE = /\n\s+at .+:\d+:\d+/;
