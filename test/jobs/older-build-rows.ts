import { expect } from "vitest";
import { LISTED_TEXT_CHARS } from "../../src/jobs/limits.js";
import { listedJobView } from "../../src/jobs/listing.js";
import { type JobStore, leaseOf } from "../../src/jobs/store.js";
import { jobInput } from "./helpers.js";

/** The per-Anima argument bound `olderBuildRows` opens its store with. */
export const OLDER_BUILD_ARGS_BOUND = 20_000;

/**
 * older_build_rows, for each store's specifics: a process of an older build, still running after the
 * migration that added args_bytes and result_bytes, writes jobs without them (args_bytes 0, the column's
 * default; result_bytes NULL). `forgetSizes` makes every stored job so, through the database itself.
 * Before, listings read such a job's arguments whole and presented them (on PostgreSQL: cut) as whole,
 * and the per-Anima argument bound counted them as 0 bytes. `store` is opened with
 * `maxUnfinishedArgsBytesPerAnima: OLDER_BUILD_ARGS_BOUND` and holds the bundle.
 */
export async function olderBuildRows(store: JobStore, forgetSizes: () => Promise<void>): Promise<void> {
  const { job: bobs } = await store.submit(jobInput("bob"));
  const [claimed] = await store.claim({ owner: "w", leaseMs: 60_000, limit: 1 });
  expect(claimed?.id).toBe(bobs.id);
  const result = "ü".repeat(6_000);
  await store.complete(leaseOf(claimed!), { status: "succeeded", result });
  const argsJson = JSON.stringify({ text: "é".repeat(6_000) });
  const { job: alices } = await store.submit(jobInput("alice", { argsJson }));
  await forgetSizes();

  const [listed] = await store.list("alice");
  expect(listed?.listed?.argsBytes).toBe(Buffer.byteLength(argsJson));
  expect(listed?.argsJson).toBe(argsJson.slice(0, LISTED_TEXT_CHARS));
  const view = listedJobView(listed!);
  expect(view).not.toHaveProperty("args");
  expect(view).toMatchObject({ args_bytes: Buffer.byteLength(argsJson), args_preview: argsJson.slice(0, LISTED_TEXT_CHARS) });
  const [pending] = await store.pendingNotices({ minAgeMs: 0, limit: 10 });
  expect(pending?.listed?.resultBytes).toBe(Buffer.byteLength(result));
  expect(listedJobView(pending!)).toMatchObject({ result_bytes: Buffer.byteLength(result) });
  expect((await store.get("alice", alices.id))?.argsJson).toBe(argsJson);

  // Her 12,011 bytes count: 9,000 more would pass the bound of 20,000.
  const more = JSON.stringify({ text: "x".repeat(8_989) });
  await expect(store.submit(jobInput("alice", { argsJson: more }))).rejects.toMatchObject({
    type: "Busy",
    message: expect.stringContaining("hold 12,011 bytes"),
  });
}
