/**
 * Public API of the animaworks-tool host. Kept small on purpose: create a host, call tools, list them.
 */
export { createHost } from "./host.js";
export type { CallOptions, CallResult, SchemaInfo, ToolHost, ToolInfo, ToolListing } from "./host.js";
export type { HostOptions, LogRecord } from "./host-options.js";
export { ERROR_TYPES, EXIT_CODES, ToolHostError } from "./errors.js";
export type { ErrorInfo, ErrorType, Fault, WireError } from "./errors.js";
export { JobService } from "./jobs/service.js";
export type { JobResult, JobServiceOptions, RunWorkerOptions, SubmitOptions, SubmittedJob, WaitOptions } from "./jobs/service.js";
export type { Job, JobProgress, JobStatus, JobStore } from "./jobs/store.js";
export type { AuditEvent, AuditLog, AuditRecord } from "./audit/audit-log.js";
export type { AnimaReport, AuditReader } from "./host-api.js";
export { startMcpServer } from "./mcp/server.js";
export type { McpServerHandle, McpServerOptions } from "./mcp/server.js";
