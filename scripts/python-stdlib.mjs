// Build step: the Python standard library with its bytecode, dist/python/python_stdlib.zip, which Python
// tools' interpreters boot from (src/isolation/isolate/python-boot.ts). Pyodide ships the standard
// library as source only, so every import of a fresh interpreter compiles it: ≈ 2.7 s of a boot with the
// modules the runtime imports, ≈ 1.2 s with this zip. Each module gets an unchecked hash-based .pyc beside
// its .py (PEP 552: the zip is never edited, so nothing is checked against the source at import).
//
// Made by Pyodide itself (the same CPython that will load it), in this build's own process: trusted code
// only. Skipped when the zip was made for the installed Pyodide version already (dist/python/stdlib.json).
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));
const version = JSON.parse(readFileSync(require.resolve("pyodide/package.json"), "utf8")).version;
const outDir = join(root, "dist", "python");
const stampPath = join(outDir, "stdlib.json");
const zipPath = join(outDir, "python_stdlib.zip");
const stamp = existsSync(stampPath) && existsSync(zipPath) ? JSON.parse(readFileSync(stampPath, "utf8")) : undefined;
if (stamp?.pyodide === version) process.exit(0);

const { loadPyodide } = require("pyodide");
const pyodide = await loadPyodide();
const zipped = pyodide.runPython(`
import importlib.util, io, marshal, sys, zipfile

source = zipfile.ZipFile(next(path for path in sys.path if path.endswith(".zip")))
out = io.BytesIO()
target = zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED)
for info in source.infolist():
    data = source.read(info.filename)
    target.writestr(info, data)
    if info.filename.endswith(".py"):
        try:
            code = compile(data, info.filename, "exec", dont_inherit=True)
        except SyntaxError:
            continue  # test data and templates that are not meant to compile
        flags = (1).to_bytes(4, "little")  # hash-based, unchecked
        target.writestr(info.filename + "c", importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(data) + marshal.dumps(code))
target.close()
out.getvalue()
`);
const bytes = zipped.toJs();
zipped.destroy();
mkdirSync(outDir, { recursive: true });
writeFileSync(`${zipPath}.tmp`, bytes);
renameSync(`${zipPath}.tmp`, zipPath);
writeFileSync(stampPath, `${JSON.stringify({ pyodide: version })}\n`);
console.log(`dist/python/python_stdlib.zip: the standard library of Pyodide ${version} with bytecode (${(bytes.length / 2 ** 20).toFixed(1)} MiB)`);
