import { constants } from "node:fs";
import { lstat, mkdir, open, readdir, rename, unlink } from "node:fs/promises";
import { sep } from "node:path";
import { ToolHostError } from "../errors.js";
import { READ_BUFFERS, UndecodedText } from "../isolation/wire/bulk-channel.js";
import { type ConfinedPath, PathConfinement, decodeName, fsError, violation } from "./paths.js";
import { QuotaTracker } from "./quota.js";
import { depthBelow, removeEntry } from "./fs-tree.js";
import { serialised } from "./write-queue.js";
import { DEFAULT_FS_LIMITS, type FsLimits } from "../fs-limits.js";

/**
 * The `fs` capability: file operations confined to the calling Anima's directory (path rules in
 * paths.ts). Every argument arrives as untrusted plain data and is checked here.
 *
 * The host's own files inside the Anima's directory are write-protected: permissions, the host's state,
 * the Anima's tool sources (tools must not rewrite tools; that is the lifecycle's job) and AnimaWorks'
 * protected identity files. No operation creates links.
 */
/** First path segments (relative to the Anima's directory) that tools may read but never change. */
const PROTECTED_ENTRIES = new Set([
  "permissions.json",
  "permissions.md",
  "permissions.md.bak",
  "state",
  "tools",
  "identity.md",
  "bootstrap.md",
  "status.json",
  "activity_log",
]);

/**
 * Files whose presence grants a capability in AnimaWorks (docs/animaworks-reference.md §1.2): `skills/newstaff/SKILL.md`
 * or `skills/newstaff.md` enables `create_anima`. Tools can neither create, change, rename into nor
 * remove them, nor anything that would (the `newstaff` folder; removing or renaming `skills/` itself).
 * Ordinary skill files stay writable. Paths arrive normalised (paths.ts), so `./skills//newstaff/..`
 * spellings meet the same check; the file system is case-sensitive, as AnimaWorks' own check is.
 */
const GRANTING_SKILLS = new Set(["newstaff", "newstaff.md"]);

function grantsCapability(relative: string, op: string): boolean {
  const [first, second] = relative.split(sep);
  if (first !== "skills") return false;
  if (second === undefined) return op === "fs.rm" || op === "fs.rename";
  return GRANTING_SKILLS.has(second);
}

export type FileType = "file" | "directory" | "symlink" | "other";
export interface FileStat {
  type: FileType;
  size: number;
  mtimeMs: number;
}

export class FsCapability {
  private readonly paths: PathConfinement;
  private readonly quota: QuotaTracker;

  constructor(
    readonly animaDir: string,
    private readonly limits: FsLimits = DEFAULT_FS_LIMITS,
  ) {
    this.paths = new PathConfinement(animaDir, limits);
    this.quota = QuotaTracker.for(animaDir, limits);
  }

  async readFile(path: unknown, encoding: unknown = "utf8"): Promise<string> {
    const text = await this.readText(path, encoding);
    const decoded = text.decode();
    text.recycle(READ_BUFFERS);
    return decoded;
  }

  /**
   * The file's bytes, to be decoded as `encoding` where the text is used: in a sandbox process when the
   * answer goes to one (bulk-channel.ts), so that the host's event loop never decodes or copies 10 MiB.
   */
  async readText(path: unknown, encoding: unknown = "utf8"): Promise<UndecodedText> {
    const op = "fs.readFile";
    if (encoding !== "utf8" && encoding !== "base64") throw violation("InvalidArguments", `${op}: encoding must be "utf8" or "base64"`);
    const target = this.paths.resolve(path, op);
    const handle = await this.paths.openFile(target, constants.O_RDONLY, op);
    try {
      // Counted on bytes actually read, not on the size stat reports (files grow; /proc lies).
      const limit = this.limits.maxReadBytes;
      const chunks: Buffer[] = [];
      const owned: Buffer[] = [];
      let total = 0;
      try {
        for (;;) {
          const buffer = READ_BUFFERS.take();
          owned.push(buffer);
          const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
          total += bytesRead;
          // A short read keeps a copy of its bytes, and its buffer goes back at once.
          if (bytesRead < buffer.length / 2) {
            if (bytesRead > 0) chunks.push(Buffer.from(buffer.subarray(0, bytesRead)));
            READ_BUFFERS.give(owned.pop() as Buffer);
          } else {
            chunks.push(buffer.subarray(0, bytesRead));
          }
          if (bytesRead === 0) break;
          if (total > limit) throw tooLarge(op, target, limit);
        }
      } catch (error) {
        // Nothing but this read saw these buffers.
        for (const buffer of owned) READ_BUFFERS.give(buffer);
        throw error;
      }
      return new UndecodedText(chunks, encoding, owned);
    } finally {
      await handle.close();
    }
  }

  /** Replaces the file atomically (temp file + rename): readers never see half a file. */
  async writeFile(path: unknown, data: unknown, encoding: unknown = "utf8"): Promise<void> {
    const op = "fs.writeFile";
    const target = this.writable(path, op);
    const bytes = this.payload(data, encoding, op);
    // Serialised: the size credited back below must be that of the file the rename replaces.
    await this.serialised(() => this.replaceFile(target, bytes, op));
  }

  private async replaceFile(target: ConfinedPath, bytes: Buffer, op: string): Promise<void> {
    await this.paths.withParent(target, op, async (dirFdPath, name) => {
      const existing = await lstat(`${dirFdPath}/${name}`).catch(() => undefined);
      if (existing?.isDirectory()) throw violation("InvalidArguments", `${op}: "${target.relative}" is a directory`);
      if (existing && !existing.isFile() && !existing.isSymbolicLink())
        throw violation("SandboxViolation", `${op}: "${target.relative}" is not a regular file`);
      await this.quota.reserve(bytes.length - (existing?.isFile() ? existing.size : 0), existing ? 0 : 1);
      // node:crypto is loaded on a write, not by every call (it costs a one-shot CLI run ≈ 10 ms).
      const temp = `.${name}.${process.getBuiltinModule("node:crypto").randomBytes(6).toString("hex")}.tmp`;
      try {
        const handle = await open(`${dirFdPath}/${temp}`, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
        try {
          await handle.writeFile(bytes);
        } finally {
          await handle.close();
        }
        await rename(`${dirFdPath}/${temp}`, `${dirFdPath}/${name}`);
      } catch (error) {
        await unlink(`${dirFdPath}/${temp}`).catch(() => {});
        throw fsError(error, op, target.relative);
      }
    });
  }

  async appendFile(path: unknown, data: unknown, encoding: unknown = "utf8"): Promise<void> {
    const op = "fs.appendFile";
    const target = this.writable(path, op);
    const bytes = this.payload(data, encoding, op);
    await this.serialised(async () => {
      const handle = await this.openForAppend(target, op);
      try {
        await this.quota.reserve(bytes.length, 0);
        await handle.write(bytes);
      } finally {
        await handle.close();
      }
    });
  }

  /**
   * Opens an existing file for appending, else creates it. A create is an entry of the quota whatever
   * call makes it (an empty append once created files past the entry limit), so the entry is reserved
   * before the exclusive create, and given back if the create fails.
   */
  private async openForAppend(target: ConfinedPath, op: string): Promise<import("node:fs/promises").FileHandle> {
    try {
      return await this.paths.openFile(target, constants.O_WRONLY | constants.O_APPEND, op);
    } catch (error) {
      if (!(error instanceof ToolHostError && error.type === "NotFound")) throw error;
    }
    await this.quota.reserve(0, 1);
    try {
      return await this.paths.openFile(target, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_EXCL, op);
    } catch (error) {
      await this.quota.reserve(0, -1);
      throw error;
    }
  }

  /**
   * The folder's entries, sorted by name. An entry whose name is not valid UTF-8 is left out: its name
   * as a string would carry U+FFFD in place of the bytes, a name that readFile, stat or rm could never
   * open, so listing it would only hand the tool a broken path. `notice` (the host's log, for the call)
   * hears how many were left out; such entries are still removed by a recursive rm of a folder above
   * them and counted by the quota (both walk with byte names).
   */
  async readdir(path: unknown = ".", notice?: (message: string) => void): Promise<Array<{ name: string; type: FileType }>> {
    const op = "fs.readdir";
    const target = this.paths.resolve(path, op);
    return this.paths.withDir(target, op, async (dirFdPath) => {
      const entries = await readdir(dirFdPath, { withFileTypes: true, encoding: "buffer" }).catch((error: unknown) => {
        throw fsError(error, op, target.relative);
      });
      const listed: Array<{ name: string; type: FileType }> = [];
      const unlisted: Buffer[] = [];
      for (const entry of entries) {
        const name = decodeName(entry.name);
        if (name === undefined) unlisted.push(entry.name);
        else listed.push({ name, type: typeOf(entry) });
      }
      if (unlisted.length > 0) notice?.(unlistedNotice(target.relative, unlisted));
      return listed.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    });
  }

  /** Describes the path itself; a link is reported as a link, never followed. */
  async stat(path: unknown): Promise<FileStat> {
    const op = "fs.stat";
    const target = this.paths.resolve(path, op);
    if (target.relative === ".") return this.paths.withDir(target, op, async (dirFdPath) => toStat(await lstat(`${dirFdPath}/.`)));
    return this.paths.withParent(target, op, async (dirFdPath, name) => {
      try {
        return toStat(await lstat(`${dirFdPath}/${name}`));
      } catch (error) {
        throw fsError(error, op, target.relative);
      }
    });
  }

  async exists(path: unknown): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (error) {
      if (error instanceof ToolHostError && error.type === "NotFound") return false;
      throw error;
    }
  }

  async mkdir(path: unknown, recursive: unknown = true): Promise<void> {
    const op = "fs.mkdir";
    const target = this.writable(path, op);
    const segments = target.relative.split(sep);
    // Create one level at a time through the verified parent, so no level can be a link out.
    await this.serialised(async () => {
      for (let depth = recursive === false ? segments.length : 1; depth <= segments.length; depth++) {
        const level = this.paths.resolve(segments.slice(0, depth).join(sep), op);
        await this.paths.withParent(level, op, async (dirFdPath, name) => {
          const existing = await lstat(`${dirFdPath}/${name}`).catch(() => undefined);
          if (existing?.isDirectory()) {
            if (depth === segments.length && recursive === false) throw fsError({ code: "EEXIST" }, op, level.relative);
            return;
          }
          if (existing?.isSymbolicLink()) throw violation("SandboxViolation", `${op}: "${level.relative}" is a symbolic link; links are not followed`);
          if (existing) throw violation("InvalidArguments", `${op}: "${level.relative}" exists and is not a directory`);
          await this.quota.reserve(0, 1);
          await mkdir(`${dirFdPath}/${name}`).catch(async (error: unknown) => {
            // Made meanwhile by another process (a one-shot CLI run beside the daemon; within one process
            // mkdirs are serialised): a folder is what was asked for.
            const raced = (error as NodeJS.ErrnoException).code === "EEXIST" && (recursive !== false || depth < segments.length);
            if (raced && (await lstat(`${dirFdPath}/${name}`).catch(() => undefined))?.isDirectory()) return;
            throw fsError(error, op, level.relative);
          });
        });
      }
    });
  }

  /** Removes a file, or a folder with `recursive`. Links inside are removed, never followed. */
  async rm(path: unknown, recursive: unknown = false): Promise<void> {
    const op = "fs.rm";
    const target = this.writable(path, op);
    try {
      await this.serialised(() =>
        this.paths.withParent(target, op, (dirFdPath, name) => removeEntry(dirFdPath, name, recursive === true, this.limits.maxPathDepth)),
      );
    } catch (error) {
      throw fsError(error, op, target.relative);
    } finally {
      this.quota.invalidate();
    }
  }

  async rename(from: unknown, to: unknown): Promise<void> {
    const op = "fs.rename";
    const source = this.writable(from, op);
    const destination = this.writable(to, op);
    // Serialised: the depth measured is the folder's until it has moved.
    await this.serialised(() =>
      this.paths.withParent(source, op, (sourceDir, sourceName) =>
        this.paths.withParent(destination, op, async (destinationDir, destinationName) => {
          const existing = await lstat(`${destinationDir}/${destinationName}`).catch(() => undefined);
          if (existing?.isDirectory()) throw violation("InvalidArguments", `${op}: "${destination.relative}" is an existing directory`);
          await this.refuseTooDeep(sourceDir, sourceName, source, destination);
          await rename(`${sourceDir}/${sourceName}`, `${destinationDir}/${destinationName}`).catch((error: unknown) => {
            throw fsError(error, op, source.relative);
          });
        }),
      ),
    );
  }

  // ---- helpers ------------------------------------------------------------------------------------

  /** Runs an operation that changes what the directory holds after every earlier one (write-queue.ts). */
  private serialised<T>(operation: () => Promise<T>): Promise<T> {
    return serialised(this.animaDir, operation);
  }

  /**
   * Invariant: no entry in the Anima's directory is nested deeper than `maxPathDepth`, the most a tool
   * can name. mkdir and writeFile keep it by the path check alone, but a rename moves a whole folder: one
   * moved under a chain of 30 folders, again and again, sank files hundreds of levels deep, below the
   * quota's walk, where no tool could name them. So a folder moves only where its deepest entry stays
   * within the limit. The source's walk is bounded by what is left (it holds at most that many descriptors);
   * the source, inside the directory, is itself within the limit while the invariant holds.
   */
  private async refuseTooDeep(sourceDir: string, sourceName: string, source: ConfinedPath, destination: ConfinedPath): Promise<void> {
    const op = "fs.rename";
    const levels = destination.relative.split(sep).length;
    const budget = this.limits.maxPathDepth - levels;
    const below = await depthBelow(sourceDir, sourceName, budget).catch((error: unknown) => {
      throw fsError(error, op, source.relative);
    });
    if (below <= budget) return;
    throw new ToolHostError(
      "PermissionDenied",
      `${op}: "${source.relative}" holds entries ${budget + 1} or more levels below it; at "${destination.relative}" (${levels} levels) they would be nested deeper than the ${this.limits.maxPathDepth}-level limit of paths`,
      "rename the folder to a shallower place, or move its deepest folders up first",
    );
  }

  private writable(path: unknown, op: string): ConfinedPath {
    const target = this.paths.resolve(path, op);
    const first = target.relative.split(sep)[0] as string;
    if (target.relative === "." || PROTECTED_ENTRIES.has(first)) {
      throw violation("PermissionDenied", `${op}: "${target.relative}" belongs to the host and cannot be changed by tools`);
    }
    if (grantsCapability(target.relative, op)) {
      throw violation(
        "PermissionDenied",
        `${op}: "${target.relative}" would change the newstaff skill, which grants create_anima in AnimaWorks; only the operator may add or remove it`,
      );
    }
    return target;
  }

  private payload(data: unknown, encoding: unknown, op: string): Buffer {
    if (typeof data !== "string") throw violation("InvalidArguments", `${op}: data must be a string (or bytes)`);
    if (encoding !== "utf8" && encoding !== "base64") throw violation("InvalidArguments", `${op}: encoding must be "utf8" or "base64"`);
    const bytes = Buffer.from(data, encoding);
    if (bytes.length > this.limits.maxWriteBytes) {
      throw violation("PermissionDenied", `${op}: ${bytes.length} bytes is more than the ${this.limits.maxWriteBytes}-byte limit of one write`);
    }
    return bytes;
  }
}

/** Names shown in a notice about entries left out of a listing, at most. */
const MAX_UNLISTED_SHOWN = 3;

/** The host-log line for entries readdir left out; their names are shown byte-escaped (never raw bytes, never control characters). */
function unlistedNotice(folder: string, unlisted: Buffer[]): string {
  const shown = unlisted
    .slice(0, MAX_UNLISTED_SHOWN)
    .map((name) => `"${escapeBytes(name)}"`)
    .join(", ");
  const more = unlisted.length > MAX_UNLISTED_SHOWN ? ` and ${unlisted.length - MAX_UNLISTED_SHOWN} more` : "";
  const count = unlisted.length === 1 ? "1 entry" : `${unlisted.length} entries`;
  return `fs.readdir: left out of the listing of "${folder}": ${count} whose name is not valid UTF-8 (${shown}${more}), which no path a tool gives can name; rename them outside tools (a recursive fs.rm of a folder above still removes them)`;
}

/** Printable ASCII as is, every other byte as \xNN: unambiguous, and safe in a log line. */
function escapeBytes(name: Buffer): string {
  let text = "";
  for (const byte of name) {
    // A backslash or quote is escaped too, so the shown name reads back to exactly these bytes.
    const plain = byte >= 0x20 && byte < 0x7f && byte !== 0x5c && byte !== 0x22;
    text += plain ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, "0")}`;
  }
  return text;
}

function tooLarge(op: string, target: ConfinedPath, limit: number): ToolHostError {
  return violation("PermissionDenied", `${op}: "${target.relative}" is larger than the ${limit}-byte read limit`);
}

function typeOf(entry: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): FileType {
  return entry.isFile() ? "file" : entry.isDirectory() ? "directory" : entry.isSymbolicLink() ? "symlink" : "other";
}

function toStat(info: import("node:fs").Stats): FileStat {
  return { type: typeOf(info), size: info.size, mtimeMs: info.mtimeMs };
}
