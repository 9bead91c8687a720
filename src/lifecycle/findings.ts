/** What `validate` reports (validate.ts): one finding per problem, with its check and, where the source shows one, its line. */
export type FindingLevel = "error" | "warning";
export type CheckName =
  | "file"
  | "file-name"
  | "source"
  | "exports"
  | "schemas"
  | "profile"
  | "description"
  | "input-schema"
  | "handlers"
  | "secrets"
  | "credentials"
  | "cancellation"
  | "imports"
  | "network-timeout"
  | "load"
  | "shadowing"
  | "collisions";

export interface Finding {
  level: FindingLevel;
  check: CheckName;
  message: string;
  /** 1-based source line, when the finding has one (left out rather than guessed). */
  line?: number;
  /** 1-based column on that line, when known. */
  column?: number;
}
