import { link, lstat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { PathConfinement, fsError } from "../capabilities/paths.js";
import { ToolHostError, callerNotTool } from "../errors.js";
import { grantHint, loadPermissions } from "../policy/permissions.js";
import { RESERVED_NAMES, TOOL_EXTENSIONS, TOOL_NAME_PATTERN } from "../registry/discovery.js";
import { readRegularFile, syncDir, withExactDir, writeTempFile } from "./safe-dir.js";
import { SHARED_DIR, type ShareRecord, encodeRecord, recordFileName, sha256Hex } from "./share-records.js";
import { sharedSourceChecker } from "./source-checker.js";
import { isRelativeSpecifier } from "./source-scan.js";
import { MAX_TOOL_SOURCE_BYTES } from "./validate.js";

/**
 * The host's `share_tool` (docs/animaworks-reference.md §5.2, docs/design.md §5): copies a personal tool to `common_tools/`.
 * Checks, in this order (the first failure is reported):
 *   1. the name: `^[A-Za-z_][A-Za-z0-9_]*$` (InvalidArguments), and not one that could never be a
 *      tool: a leading `_` (a helper), longer than 64 characters, or a CLI command name;
 *   2. the source `tools/<name>.(ts|mts|js|mjs|py)` exists (NotFound) — before the permission, as in
 *      AnimaWorks, so a typo is reported as a typo;
 *   3. `tool_creation.shared` (PermissionDenied "Shared tool creation is not permitted."; a broken
 *      permissions file fails closed);
 *   4. it is a single file: a tool that imports relative helpers is refused (InvalidArguments), because
 *      common_tools/ holds other tools' helpers too and copying several files cannot be atomic (a Python
 *      tool always is one: its folder's other files are not importable, bundling/python-bundle.ts);
 *   5. its name and schema names collide with no core or shared tool's (the injected `collisions`,
 *      share-collisions.ts: InvalidArguments, naming what to rename): a shared tool must never take a
 *      schema name of a tool every Anima sees, nor lose one of its own to such a tool (checked before
 *      validation, whose load would otherwise report a clash with a core tool as a LoadError);
 *   6. it validates: the injected `validate(sourcePath)` returns no problems (else LoadError listing them);
 *   7. no shared tool of that name exists with ANY extension, and no share of it is recorded or in
 *      progress (InvalidArguments, the reference's FileExists: "choose a different name");
 * then publishes. Publishing never overwrites: the record `.<name>.share.json` is created first with
 * link(2), which fails if the name exists (O_EXCL semantics, also across processes), and serves as the
 * reservation of the name whatever the extension; then the tool file itself is linked into place. Both
 * are written and flushed as hidden temporary files first, so nobody ever sees a partial file. Of two
 * concurrent shares of one name exactly one wins.
 *
 * The bytes published are the bytes validated: the source is read before validation and again after;
 * if it changed in between, the share is refused.
 *
 * Faults: a share is the caller's own request, so its refusals are the caller's (a name, a link, a helper
 * import), except the permission, which only the operator grants (`host`, the hint naming the permissions
 * file in force), and a tool that does not validate (`tool`: its author fixes it).
 */
export interface ShareOptions {
  dataDir: string;
  animaDir: string;
  /** The sharing Anima's name, recorded as `shared_by`. */
  anima: string;
  toolName: unknown;
  /** Returns the problems that make the tool unfit to share (empty: fine). See errorsForShare() in validate.ts. */
  validate: (sourcePath: string) => Promise<string[]>;
  /**
   * Why the tool, as its Anima's view loads it, collides with the installed core and shared tools (empty:
   * it does not; share-collisions.ts). Runs before `validate`.
   */
  collisions?: (toolName: string) => Promise<string[]>;
  /** Clock for `shared_at`. Default: the system clock. */
  now?: () => Date;
  /** Runs after every check passed, right before publishing. For tests of the publishing race only. */
  beforePublish?: () => Promise<void>;
  /** Told the name once the tool is published (the callers write the audit log's reload record). */
  onShared?: (tool: string) => void;
}

export const SHARE_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const OPERATION = "share_tool";

export async function shareTool(options: ShareOptions): Promise<string> {
  try {
    return await share(options);
  } catch (error) {
    // A tool that does not validate stays the tool's fault: fixing it is its author's work.
    throw error instanceof ToolHostError && error.type === "LoadError" ? error : callerNotTool(error);
  }
}

async function share(options: ShareOptions): Promise<string> {
  const name = checkName(options.toolName);
  const animaPaths = new PathConfinement(options.animaDir);

  const source = await readPersonalTool(animaPaths, name);
  const permissions = await loadPermissions(options.animaDir);
  if (!permissions.toolCreation.shared) {
    // The Anima cannot grant it itself (its permissions file is not writable by it): the operator acts.
    throw new ToolHostError("PermissionDenied", "Shared tool creation is not permitted.", grantHint(permissions, "shared"), "host");
  }
  // The JavaScript scanner would misread Python source, and a Python tool has no helpers to find.
  const helpers = (source.file.endsWith(".py") ? [] : await sharedSourceChecker().importsOf(source.bytes.toString("utf8"), options.anima)).filter(
    (use) => use.specifier !== undefined && isRelativeSpecifier(use.specifier),
  );
  if (helpers.length > 0) {
    const list = helpers.map((use) => `"${use.specifier}" (line ${use.line})`).join(", ");
    throw new ToolHostError(
      "InvalidArguments",
      `Tool '${name}' imports helper files (${list}); only single-file tools can be shared`,
      `inline the helpers into tools/${source.file}, then share again`,
    );
  }
  const collisions = (await options.collisions?.(name)) ?? [];
  if (collisions.length > 0) {
    throw new ToolHostError(
      "InvalidArguments",
      `Tool '${name}' cannot be shared: its names collide with installed tools: ${collisions.join("; ")}`,
      "rename as said (the tool's file and its schema names), then share again",
    );
  }
  let problems: string[];
  try {
    problems = await options.validate(join(options.animaDir, "tools", source.file));
  } catch (error) {
    // The host too busy to check it (validate's queue full) says nothing about the tool: try again.
    if (error instanceof ToolHostError && error.type === "Busy") throw error;
    problems = [error instanceof Error ? error.message : String(error)];
  }
  if (problems.length > 0) {
    throw new ToolHostError(
      "LoadError",
      `Tool '${name}' did not pass validation: ${problems.join("; ")}`,
      `fix it, check with: animaworks-tool validate tools/${source.file}`,
    );
  }
  const again = await readPersonalTool(animaPaths, name);
  if (again.file !== source.file || !again.bytes.equals(source.bytes)) {
    throw new ToolHostError("ExecutionError", `Tool '${name}' changed while it was being shared; nothing was shared`, "share it again");
  }

  const record: ShareRecord = {
    version: 1,
    tool: name,
    file: source.file,
    sha256: sha256Hex(source.bytes),
    bytes: source.bytes.length,
    shared_by: options.anima,
    shared_at: (options.now ?? (() => new Date()))().toISOString(),
  };
  await publish(options.dataDir, name, source.file, source.bytes, record, options.beforePublish);
  options.onShared?.(name);
  return `Shared tool '${name}' to common_tools/. All animas can now use it after refresh_tools.`;
}

function checkName(raw: unknown): string {
  if (typeof raw !== "string" || raw === "") {
    throw new ToolHostError(
      "InvalidArguments",
      "tool_name is required: the personal tool's file name without the extension",
      'e.g. share_tool(tool_name="my_tool")',
    );
  }
  const shown = raw.length > 80 ? `${raw.slice(0, 80)}…` : raw;
  if (!SHARE_NAME_PATTERN.test(raw)) {
    throw new ToolHostError("InvalidArguments", `Invalid tool name '${shown}'. Must be a valid identifier`, "Use only letters, digits, and underscores");
  }
  if (raw.startsWith("_")) {
    throw new ToolHostError(
      "InvalidArguments",
      `Invalid tool name '${shown}': files starting with "_" are helpers and are never loaded as tools`,
      "rename the tool so it starts with a letter",
    );
  }
  if (!TOOL_NAME_PATTERN.test(raw)) throw new ToolHostError("InvalidArguments", `Invalid tool name '${shown}': at most 64 characters`);
  if (RESERVED_NAMES.has(raw)) {
    throw new ToolHostError(
      "InvalidArguments",
      `Invalid tool name '${raw}': it is an animaworks-tool command, so the tool could never be called`,
      "rename the tool",
    );
  }
  return raw;
}

/** The personal tool's file and bytes, read through verified descriptors: no link, no hard link, bounded. */
async function readPersonalTool(paths: PathConfinement, name: string): Promise<{ file: string; bytes: Buffer }> {
  const notFound = (): ToolHostError =>
    new ToolHostError(
      "NotFound",
      `Tool file not found: tools/${name}.ts (nor ${TOOL_EXTENSIONS.filter((ext) => ext !== ".ts").join(", ")})`,
      "Check tool name with refresh_tools first",
    );
  try {
    return await withExactDir(paths, "tools", OPERATION, { create: false }, async (dirFdPath) => {
      const present: string[] = [];
      for (const ext of TOOL_EXTENSIONS) {
        if (await lstat(`${dirFdPath}/${name}${ext}`).catch(() => undefined)) present.push(`${name}${ext}`);
      }
      if (present.length === 0) throw notFound();
      if (present.length > 1) {
        throw new ToolHostError(
          "InvalidArguments",
          `more than one file defines tool '${name}' (${present.map((f) => `tools/${f}`).join(", ")})`,
          "keep one of them",
        );
      }
      const file = present[0] as string;
      const content = await readRegularFile(dirFdPath, file, `tools/${file}`, OPERATION, MAX_TOOL_SOURCE_BYTES);
      if (!content) throw notFound();
      return { file, bytes: content.bytes };
    });
  } catch (error) {
    if (error instanceof ToolHostError && error.type === "NotFound") throw notFound();
    throw error;
  }
}

async function publish(dataDir: string, name: string, file: string, bytes: Buffer, record: ShareRecord, beforePublish?: () => Promise<void>): Promise<void> {
  const exists = (what: string): ToolHostError =>
    new ToolHostError("InvalidArguments", `A shared tool named '${name}' already exists (${what})`, "Choose a different name or remove the existing tool");
  const dataPaths = new PathConfinement(dataDir);
  await withExactDir(dataPaths, SHARED_DIR, OPERATION, { create: true }, async (dirFdPath) => {
    for (const ext of TOOL_EXTENSIONS) {
      if (await lstat(`${dirFdPath}/${name}${ext}`).catch(() => undefined)) throw exists(`${SHARED_DIR}/${name}${ext}`);
    }
    const recordName = recordFileName(name);
    if (await lstat(`${dirFdPath}/${recordName}`).catch(() => undefined)) {
      throw exists(`${SHARED_DIR}/${recordName} records it: another share is in progress, or one was interrupted`);
    }
    await beforePublish?.();

    // 1. The record: the exclusive reservation of the name, whatever the extension.
    await linkExclusive(dirFdPath, recordName, encodeRecord(record), () => exists(`${SHARED_DIR}/${recordName}: another share won the race`));
    // 2. The tool. Fails only if a file of that exact name appeared by other means; then undo step 1.
    try {
      await linkExclusive(dirFdPath, file, bytes, () => exists(`${SHARED_DIR}/${file}`));
    } catch (error) {
      await unlink(`${dirFdPath}/${recordName}`).catch(() => {});
      throw error;
    }
    await syncDir(dirFdPath);
  });
}

/** Writes a complete hidden temp file, then link(2)s it to `name`: all or nothing, and never over an existing file. */
async function linkExclusive(dirFdPath: string, name: string, bytes: Uint8Array, onExists: () => ToolHostError): Promise<void> {
  let temp: string;
  try {
    temp = await writeTempFile(dirFdPath, name, bytes, 0o644);
  } catch (error) {
    throw fsError(error, OPERATION, `${SHARED_DIR}/${name}`);
  }
  try {
    await link(`${dirFdPath}/${temp}`, `${dirFdPath}/${name}`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") throw onExists();
    throw fsError(error, OPERATION, `${SHARED_DIR}/${name}`);
  } finally {
    await unlink(`${dirFdPath}/${temp}`).catch(() => {});
  }
}
