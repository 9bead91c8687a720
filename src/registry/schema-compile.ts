import PQueue from "p-queue";
import { compileSchema, validatorSource } from "../validation/ajv.js";
import { type SchemaCheck, checkToolSchemas } from "./schemas.js";

/**
 * A loaded tool's schemas checked and compiled to their validators' code (kept with its description),
 * and where that work runs. Checking and compiling a tool's schemas is the host's own work on the tool's
 * text, and costs with the schema: a 62 KB schema ≈ 0.5 s, so twenty such tools of one Anima held every
 * other Anima's calls up to 2.5 s each (schema_compile_stall). Small schemas, as honest tools have, are
 * compiled where the load runs (no round trip on a first call); larger ones by a `SchemaChecker` (the
 * host's source-checks process: lifecycle/source-checker.ts), off the host's thread, each Anima's in turn
 * (the loads of shared and core tools, which have no Anima, take one turn together).
 */

/** What a tool's module said of itself: its `get_tool_schemas()` and `EXECUTION_PROFILE`, as sent. */
export interface SchemaCheckRequest {
  toolName: string;
  schemas: unknown;
  profile: unknown;
}

export interface SchemaChecker {
  /** `checkAndCompile` of `request`, elsewhere; `asker` (the tool's Anima) waits in its own turn. Throws when it could not run. */
  checkSchemas(request: SchemaCheckRequest, asker?: string): Promise<SchemaCheck>;
}

/** Schemas and profile of at most this many characters of JSON are checked and compiled where the load runs. */
export const INLINE_SCHEMA_CHARS = 16 * 1024;

/** checkToolSchemas, and each schema's validators (input and output) as code. */
export function checkAndCompile(request: SchemaCheckRequest): SchemaCheck {
  const check = checkToolSchemas(request.toolName, request.schemas, request.profile);
  if (!check.ok) return check;
  const schemas = check.schemas.map((schema) => ({
    ...schema,
    validatorSource: validatorSource(compileSchema(schema.parameters)),
    ...(schema.outputSchema ? { outputValidatorSource: validatorSource(compileSchema(schema.outputSchema)) } : {}),
  }));
  return { ok: true, schemas, profile: check.profile };
}

/** Whether `request` is small enough to check and compile on the caller's thread. */
export function checkInline(request: SchemaCheckRequest): boolean {
  return JSON.stringify([request.schemas ?? null, request.profile ?? null]).length <= INLINE_SCHEMA_CHARS;
}

/**
 * One Anima's loads have at most this many schema checks at the checker at once; its other loads wait
 * their turn here. The checker refuses an Anima past a few waiting (its fair queue): a first listing of an
 * Anima with many large schemas would have failed most of them as Busy.
 */
export const SCHEMA_CHECKS_AT_ONCE_PER_ANIMA = 2;

/** Each Anima's schema checks in turn (`SCHEMA_CHECKS_AT_ONCE_PER_ANIMA` at once); a queue lives while it has work. */
export class SchemaCheckTurns {
  private readonly queues = new Map<string, PQueue>();

  run<T>(anima: string, work: () => Promise<T>): Promise<T> {
    let queue = this.queues.get(anima);
    if (!queue) {
      const made = new PQueue({ concurrency: SCHEMA_CHECKS_AT_ONCE_PER_ANIMA });
      made.addEventListener("idle", () => this.queues.delete(anima));
      this.queues.set(anima, made);
      queue = made;
    }
    return queue.add(work);
  }
}
