import { lstat, rename, unlink } from "node:fs/promises";
import { sep } from "node:path";
import { type ConfinedPath, PathConfinement, fsError, violation } from "../capabilities/paths.js";
import { ToolHostError, callerNotTool } from "../errors.js";
import { grantHint, loadPermissions, permissionSetting } from "../policy/permissions.js";
import { KeyedMutex, nameOf, parentOf, readRegularFile, syncDir, withExactDir, writeTempFile } from "./safe-dir.js";

/**
 * The host's `write_memory_file` (docs/tool-creator.md Step 3, docs/animaworks-reference.md §7.1): writes a file in the Anima's
 * own directory on the Anima's behalf.
 *
 * - Paths follow the fs capability's confinement (`..`, absolute paths outside, sibling prefixes, NUL
 *   refused; an absolute path inside is fine; `./tools//x.ts` is `tools/x.ts`), and no symbolic link is
 *   followed anywhere on the way (safe-dir.ts).
 * - Anything under `tools/` (tool files and their helpers alike: a helper is code the tool runs) needs
 *   `tool_creation.personal`; a permissions file that cannot be read fails closed. Checked before
 *   anything is created, so a refusal writes nothing, not even a folder.
 * - Never writable this way: permissions.json / permissions.md (an Anima must not grant itself rights),
 *   the host's `state/`, and the files AnimaWorks protects from its Animas (identity.md, bootstrap.md,
 *   status.json, activity_log/).
 * - Every write is atomic: the new content goes to a hidden temporary file in the same verified folder,
 *   is flushed, then renamed over the target. Readers, watchers and the tool loader see the old file or
 *   the new one, never a part. Append is read-old + write-new, also atomic; appends to one file are
 *   serialised in this process (two processes appending to the same file at once can lose one append).
 *
 * Faults: no tool is involved, so a refusal is the caller's (its path, its content), except a permission
 * only the operator can grant (`host`, with a hint naming the permissions file in force).
 *
 * Not copied from AnimaWorks: its read-before-write guard and memory gate (they belong to its agent loop).
 */
export interface WriteMemoryOptions {
  animaDir: string;
  /** Relative to the Anima's directory (or absolute inside it). */
  path: unknown;
  content: unknown;
  /** Default: "overwrite". */
  mode?: unknown;
  /** Largest resulting file, in bytes. Default: 10 MiB. */
  maxFileBytes?: number;
}

export const DEFAULT_MAX_MEMORY_FILE_BYTES = 10 * 1024 * 1024;

/** First path segments that are never written by write_memory_file. */
export const WRITE_PROTECTED_ENTRIES: ReadonlySet<string> = new Set([
  "permissions.json",
  "permissions.md",
  "permissions.md.bak",
  "state",
  "identity.md",
  "bootstrap.md",
  "status.json",
  "activity_log",
]);

const OPERATION = "write_memory_file";
const writes = new KeyedMutex();

export async function writeMemoryFile(options: WriteMemoryOptions): Promise<string> {
  try {
    return await write(options);
  } catch (error) {
    throw callerNotTool(error);
  }
}

async function write(options: WriteMemoryOptions): Promise<string> {
  const mode = options.mode ?? "overwrite";
  if (mode !== "overwrite" && mode !== "append") throw new ToolHostError("InvalidArguments", `${OPERATION}: mode must be "overwrite" or "append"`);
  if (typeof options.content !== "string") throw new ToolHostError("InvalidArguments", `${OPERATION}: content must be a string`);
  const maxBytes = options.maxFileBytes ?? DEFAULT_MAX_MEMORY_FILE_BYTES;
  const paths = new PathConfinement(options.animaDir);
  const target = paths.resolve(options.path, OPERATION);
  if (typeof options.path === "string" && /[/\\]$/.test(options.path)) {
    throw new ToolHostError("InvalidArguments", `${OPERATION}: "${target.relative}" names a folder; give a file path`);
  }
  if (target.relative === ".") throw new ToolHostError("InvalidArguments", `${OPERATION}: the path names the Anima's directory itself; give a file path`);
  const first = target.relative.split(sep)[0] as string;
  if (WRITE_PROTECTED_ENTRIES.has(first)) {
    throw new ToolHostError("PermissionDenied", `${OPERATION}: "${target.relative}" belongs to the host and cannot be written by the Anima`);
  }
  if (first === "tools") await requirePersonalToolPermission(options.animaDir, target);

  const bytes = Buffer.from(options.content, "utf8");
  if (bytes.length > maxBytes) throw tooLarge(target, bytes.length, maxBytes);
  return writes.run(target.absolute, () =>
    withExactDir(paths, parentOf(target), OPERATION, { create: true }, async (dirFdPath) => {
      const name = nameOf(target);
      const existing = await lstat(`${dirFdPath}/${name}`).catch(() => undefined);
      if (existing?.isSymbolicLink()) throw violation("SandboxViolation", `${OPERATION}: "${target.relative}" is a symbolic link; links are not followed`);
      if (existing?.isDirectory()) throw new ToolHostError("InvalidArguments", `${OPERATION}: "${target.relative}" is a folder`);
      if (existing && !existing.isFile()) throw violation("SandboxViolation", `${OPERATION}: "${target.relative}" is not a regular file`);
      let content = bytes;
      if (mode === "append") {
        const old = await readRegularFile(dirFdPath, name, target.relative, OPERATION, maxBytes);
        if (old) content = Buffer.concat([old.bytes, bytes]);
        if (content.length > maxBytes) throw tooLarge(target, content.length, maxBytes);
      }
      const fileMode = existing ? existing.mode & 0o777 : 0o644;
      let temp: string;
      try {
        temp = await writeTempFile(dirFdPath, name, content, fileMode);
      } catch (error) {
        throw fsError(error, OPERATION, target.relative);
      }
      try {
        await rename(`${dirFdPath}/${temp}`, `${dirFdPath}/${name}`);
      } catch (error) {
        await unlink(`${dirFdPath}/${temp}`).catch(() => {});
        throw fsError(error, OPERATION, target.relative);
      }
      await syncDir(dirFdPath);
      if (mode === "append") return `Appended ${bytes.length} bytes to ${target.relative} (now ${content.length} bytes).`;
      return `Wrote ${target.relative} (${content.length} bytes).`;
    }),
  );
}

async function requirePersonalToolPermission(animaDir: string, target: ConfinedPath): Promise<void> {
  // A broken permissions file throws PermissionDenied naming the file: fail closed, nothing written.
  const permissions = await loadPermissions(animaDir);
  if (permissions.toolCreation.personal) return;
  // Only the operator can grant it: the Anima can neither write its permissions file nor change the call to get it.
  throw new ToolHostError(
    "PermissionDenied",
    `Tool creation is not permitted. Writing "${target.relative}" needs the personal tool permission (${permissionSetting(permissions, "personal")}).`,
    grantHint(permissions, "personal"),
    "host",
  );
}

function tooLarge(target: ConfinedPath, bytes: number, maxBytes: number): ToolHostError {
  return new ToolHostError("PermissionDenied", `${OPERATION}: "${target.relative}" would be ${bytes} bytes; at most ${maxBytes} bytes are allowed`);
}
