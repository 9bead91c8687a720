/**
 * Tool lifecycle (docs/design.md §5): writing tool files through write_memory_file, validating them, sharing
 * them to common_tools/, and auditing what was shared.
 */
export { DEFAULT_MAX_MEMORY_FILE_BYTES, WRITE_PROTECTED_ENTRIES, type WriteMemoryOptions, writeMemoryFile } from "./write-memory.js";
export { SHARE_NAME_PATTERN, type ShareOptions, shareTool } from "./share.js";
export { type ShareRecord, type SharedToolState, type SharedToolStatus, checkSharedIntegrity, inspectSharedTools } from "./share-records.js";
export {
  type CheckName,
  type Finding,
  type FindingLevel,
  type InstalledToolsCheck,
  type LoadCheck,
  MAX_TOOL_SOURCE_BYTES,
  type ToolLoader,
  VALIDATE_EXIT_CODES,
  type ValidateOptions,
  type ValidateOutcome,
  type ValidationReport,
  errorsForShare,
  formatValidation,
  runValidate,
  toolNameProblem,
  validateSource,
  validateToolFile,
  validationJson,
} from "./validate.js";
export { type ScratchLoaderOptions, hostLoader, installedPathOf, scratchLoader, toolsFolderOf } from "./load-check.js";
export { installedToolsCheck } from "./installed-tools.js";
