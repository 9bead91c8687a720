/**
 * The limits of the `fs` capability, with their defaults: a leaf module, so that the configuration
 * (which lets an operator change them) and the capability (which enforces them) both depend on it and
 * not on each other.
 */

export interface PathLimits {
  /** Longest path accepted, in characters. Default: 1,024. */
  maxPathChars: number;
  /** Most path segments accepted. Default: 32. */
  maxPathDepth: number;
}

export const DEFAULT_PATH_LIMITS: PathLimits = { maxPathChars: 1_024, maxPathDepth: 32 };

export interface FsLimits extends PathLimits {
  /** Largest file `readFile` returns, in bytes (checked on bytes actually read). Default: 10 MiB. */
  maxReadBytes: number;
  /** Largest single write, in bytes. Default: 10 MiB. */
  maxWriteBytes: number;
  /** Disk space the Anima's directory may use, in bytes. Default: 1 GiB. */
  quotaBytes: number;
  /** Files and folders the Anima's directory may hold. Default: 100,000. */
  maxFiles: number;
}

export const DEFAULT_FS_LIMITS: FsLimits = {
  ...DEFAULT_PATH_LIMITS,
  maxReadBytes: 10 * 1024 * 1024,
  maxWriteBytes: 10 * 1024 * 1024,
  quotaBytes: 1024 * 1024 * 1024,
  maxFiles: 100_000,
};
