import { isAbsolute, relative, sep } from "node:path";

/** Whether `path` lies inside `folder` (not the folder itself), both real paths: what a tool may read. */
export function isInside(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}
