import type { Finding } from "../findings.js";
import type { SourceCheckRequest } from "../source-checks.js";
import type { ImportUse } from "../source-scan.js";
import type { SchemaCheckRequest } from "../../registry/schema-compile.js";
import type { SchemaCheck } from "../../registry/schemas.js";

/**
 * The messages between the host and its source-checks process (entry.ts), each one frame of JSON
 * (isolation/wire/frames.ts) on the process's stdin and stdout: plain data, one reply per request,
 * matched by `id`. The process runs the host's own code on a tool's text (never the tool), and exists to
 * keep that work off the host's event loop and out of the host's process (a defect that aborts V8 there
 * ends only it). A schema check's reply carries validators' code, which the host runs as it runs the cached
 * descriptions' (validation/ajv.ts `loadValidator`): the process runs the host's own code only, on data, and
 * is the host's as its cache is; ajv's generated code quotes a schema's values, never runs them. Its
 * replies are bounded where they are made (findings and their messages, source-checks.ts)
 * and again where the host decodes them (`MAX_REPLY_FRAME_BYTES`): a reply Node's IPC channel would have
 * read whole, whatever its size, had grown the daemon past its heap.
 */
export type CheckRequestMessage = { id: number; check: SourceCheckRequest } | { id: number; importsOf: string } | { id: number; schemas: SchemaCheckRequest };

/**
 * The findings of a check, the imports of a text, a tool's schemas checked and compiled
 * (registry/schema-compile.ts), or the message of what the work threw (a defect of the checks, reported
 * as a failed check).
 */
export type CheckReplyMessage =
  { id: number; findings: Finding[] } | { id: number; imports: ImportUse[] } | { id: number; schemaCheck: SchemaCheck } | { id: number; failed: string };

/** The process's first frame: its code is loaded, and a check's time may start. */
export type ReadyMessage = { ready: true };

/** Largest request frame the process reads: a source of validate's 1 MiB bound, and what its load said. */
export const MAX_REQUEST_FRAME_BYTES = 64 * 1024 * 1024;

/** Largest reply frame the host reads; a larger one is the checks' defect, reported as a failed check. */
export const MAX_REPLY_FRAME_BYTES = 16 * 1024 * 1024;
