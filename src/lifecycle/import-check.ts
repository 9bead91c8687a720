import { isBuiltin } from "node:module";
import { posix } from "node:path";
import { TOOL_API_MODULE } from "../contract/tool-api.js";
import { type ImportUse, isRelativeSpecifier } from "./source-scan.js";

/**
 * validate's `imports` check (validate.ts): what a tool may import in the sandbox — relative files in its
 * own folder and the tool API module — and, for anything else, why not, in words an author can act on.
 */

/** Why the import `use` cannot work in the sandbox, or undefined when it can. */
export function importProblem(use: ImportUse): string | undefined {
  const how = use.kind === "require" ? "require()" : use.kind === "dynamic-import" ? "import()" : use.kind === "export-from" ? "export … from" : "import";
  if (use.specifier === undefined) {
    return `${how} with a computed module name cannot be bundled; import files by their literal relative path`;
  }
  const specifier = use.specifier;
  if (specifier === TOOL_API_MODULE) return undefined;
  if (isRelativeSpecifier(specifier)) {
    // A tool sits at the top of its tools folder, so climbing above the file's own folder leaves it.
    const normal = posix.normalize(specifier);
    if (normal === ".." || normal.startsWith("../")) return `${how} "${specifier}" leaves the tool's folder; tools may import only files in their own folder`;
    return undefined;
  }
  const why = isBuiltin(specifier)
    ? "Node built-ins are not available in the sandbox"
    : /^[a-z][a-z0-9+.-]*:/i.test(specifier)
      ? "URL imports are not allowed"
      : specifier.startsWith("/")
        ? "absolute paths are not allowed"
        : "npm packages are not available in the sandbox";
  return `${how} "${specifier}" is not allowed: ${why}. Tools may import only relative files in their own folder and "${TOOL_API_MODULE}"`;
}
