import type { Finding } from "../findings.js";
import type { SourceCheckRequest } from "../source-checks.js";
import type { ImportUse } from "../source-scan.js";

/**
 * The messages between the host and its source-checks process (entry.ts), as JSON over the process's IPC
 * channel: plain data, one reply per request, matched by `id`. The process runs the host's own code on a
 * tool's text (never the tool), so its replies are the host's; it exists to keep that work off the
 * host's event loop and out of the host's process (a defect that aborts V8 there ends only it), not as a
 * trust boundary.
 */
export type CheckRequestMessage = { id: number; check: SourceCheckRequest } | { id: number; importsOf: string };

/**
 * The findings of a check, the imports of a text, or the message of what the work threw (a defect of the
 * checks, reported as a failed check).
 */
export type CheckReplyMessage = { id: number; findings: Finding[] } | { id: number; imports: ImportUse[] } | { id: number; failed: string };
