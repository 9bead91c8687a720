import type { Token } from "./lexer.js";
import type { CheckName, Finding } from "./findings.js";
import { type PyImport, type PyValue, callArguments, describeValue, importsOf, isName, isOp, parameters, pyLiteral } from "./python-syntax.js";
import { type PyScan, type PyStatement, type PyToken, scanPython } from "./python-scan.js";
import { SCHEMA_NAME_PATTERN } from "../registry/schemas.js";
import { findSecrets } from "./secrets.js";

/**
 * validate's checks on a Python tool (`tools/my_tool.py`, the AnimaWorks seed's format): the Validation
 * Checklist of the seed's tool-creator skill, read statically from the text (python-scan.ts), each
 * finding at its line. The two templates of that skill pass without a finding.
 *
 * What a Python tool here may import is the standard library, httpx, and the part of AnimaWorks' `core`
 * the host provides (core.tools, core.tools._base with get_credential and ToolConfigError).
 */

/** Top-level module names of the Python 3.14 standard library (sys.stdlib_module_names). */
export const PYTHON_STDLIB = new Set(
  `__future__ _abc _aix_support _android_support _apple_support _ast _asyncio _bisect _blake2 _bz2 _codecs _codecs_cn _codecs_hk
  _codecs_iso2022 _codecs_jp _codecs_kr _codecs_tw _collections _collections_abc _colorize _compat_pickle _compression _contextvars
  _csv _ctypes _curses _curses_panel _datetime _dbm _decimal _elementtree _frozen_importlib _frozen_importlib_external _functools
  _gdbm _hashlib _heapq _hmac _imp _interpchannels _interpqueues _interpreters _io _ios_support _json _locale _lsprof _lzma
  _markupbase _md5 _multibytecodec _multiprocessing _opcode _opcode_metadata _operator _osx_support _overlapped _pickle _posixshmem
  _posixsubprocess _py_abc _py_warnings _pydatetime _pydecimal _pyio _pylong _pyrepl _queue _random _remote_debugging _scproxy
  _sha1 _sha2 _sha3 _signal _sitebuiltins _socket _sqlite3 _sre _ssl _stat _statistics _string _strptime _struct _suggestions
  _symtable _sysconfig _thread _threading_local _tkinter _tokenize _tracemalloc _types _typing _uuid _warnings _weakref _weakrefset
  _winapi _wmi _zoneinfo _zstd abc annotationlib antigravity argparse array ast asyncio atexit base64 bdb binascii bisect builtins
  bz2 cProfile calendar cmath cmd code codecs codeop collections colorsys compileall compression concurrent configparser contextlib
  contextvars copy copyreg csv ctypes curses dataclasses datetime dbm decimal difflib dis doctest email encodings ensurepip enum
  errno faulthandler fcntl filecmp fileinput fnmatch fractions ftplib functools gc genericpath getopt getpass gettext glob graphlib
  grp gzip hashlib heapq hmac html http idlelib imaplib importlib inspect io ipaddress itertools json keyword linecache locale
  logging lzma mailbox marshal math mimetypes mmap modulefinder msvcrt multiprocessing netrc nt ntpath nturl2path numbers opcode
  operator optparse os pathlib pdb pickle pickletools pkgutil platform plistlib poplib posix posixpath pprint profile pstats pty pwd
  py_compile pyclbr pydoc pydoc_data pyexpat queue quopri random re readline reprlib resource rlcompleter runpy sched secrets
  select selectors shelve shlex shutil signal site smtplib socket socketserver sqlite3 sre_compile sre_constants sre_parse ssl stat
  statistics string stringprep struct subprocess symtable sys sysconfig syslog tabnanny tarfile tempfile termios textwrap this
  threading time timeit tkinter token tokenize tomllib trace traceback tracemalloc tty turtle turtledemo types typing unicodedata
  unittest urllib uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xml xmlrpc zipapp zipfile zipimport zlib
  zoneinfo`.split(/\s+/),
);
/** The modules of AnimaWorks' `core` package this host provides to Python tools. */
const PROVIDED_CORE = new Set(["core", "core.tools", "core.tools._base"]);
/** HTTP clients a tool author may reach for; httpx or urllib.request do their work here. */
const HTTP_CLIENTS = new Set(["requests", "aiohttp", "urllib3", "httplib2", "pycurl", "treq", "grequests", "niquests"]);
/** httpx functions that make a request, and the clients whose requests all take the client's timeout. */
const HTTPX_CALLS = new Set(["get", "post", "put", "patch", "delete", "head", "options", "request", "stream", "Client", "AsyncClient"]);

export function validatePythonSource(fileName: string, text: string, options: { name?: string } = {}): Finding[] {
  const scan = scanPython(text);
  const module = readModule(options.name ?? fileName.replace(/\.py$/, ""), scan);
  const imports = scan.statements.flatMap((statement, index) => importsOf(scan.tokens, statement, index));
  // Spread into a literal, not into push(): a generated file can have more findings than a call takes arguments.
  const findings: Finding[] = [
    ...scan.problems.map((problem): Finding => ({ level: "error", check: "source", ...problem })),
    ...futureImport(scan),
    ...declaration(module),
    ...dispatchFindings(module),
    ...profileFindings(module),
    ...importFindings(scan, imports),
    ...timeouts(scan.tokens, imports),
  ];
  // The secret heuristics read lexer.ts tokens: an f-string is a template with substitutions.
  const tokens = scan.tokens.map((t): Token => ({ ...t, kind: t.kind === "op" ? "punct" : t.kind === "string" && t.dynamic ? "template" : t.kind }));
  for (const hit of findSecrets(text, tokens)) {
    findings.push({ level: "error", check: "secrets", line: hit.line, message: hit.message.replaceAll("getCredential()", "get_credential()") });
  }
  return findings;
}

/** The file as the checks see it: its top-level functions and module-level assignments. */
interface Module {
  tool: string;
  scan: PyScan;
  /** Top-level `def`s by name (the last of a name: it is the one Python keeps): header statement and name token. */
  defs: Map<string, { index: number; name: PyToken }>;
  /** Module-level `NAME = …` (the last of a name): the tokens of the value. */
  values: Map<string, { start: number; end: number }>;
}

const at = (token: PyToken | undefined): Pick<Finding, "line" | "column"> => (token ? { line: token.line, column: token.column } : {});
const finding = (level: Finding["level"], check: CheckName, token: PyToken | undefined, message: string): Finding => ({ level, check, ...at(token), message });

function readModule(tool: string, scan: PyScan): Module {
  const { tokens, statements } = scan;
  const defs: Module["defs"] = new Map();
  const values: Module["values"] = new Map();
  // Module level: not in a function or class body (a `def` under a top-level `if` still is).
  const moduleLevel: boolean[] = [];
  for (const [index, statement] of statements.entries()) {
    const keyword = statements[statement.parent]?.header?.keyword;
    const level = statement.parent === -1 || (moduleLevel[statement.parent] === true && keyword !== "def" && keyword !== "class");
    moduleLevel.push(level);
    const name = definedName(scan, statement);
    if (level && name) defs.set(name.value, { index, name });
    const target = tokens[statement.start] as PyToken;
    if (!level || statement.header || target.kind !== "name" || !(isOp(tokens[statement.start + 1], "=") || isOp(tokens[statement.start + 1], ":"))) continue;
    for (let j = statement.start + 1; j < statement.end; j++) {
      const token = tokens[j] as PyToken;
      if (token.close !== undefined) j = token.close;
      else if (isOp(token, "=")) {
        values.set(target.value, { start: j + 1, end: statement.end });
        break;
      }
    }
  }
  return { tool, scan, defs, values };
}

/** The name a `def` header defines. */
function definedName(scan: PyScan, statement: PyStatement): PyToken | undefined {
  if (statement.header?.keyword !== "def") return undefined;
  const name = scan.tokens[isName(scan.tokens[statement.start], "async") ? statement.start + 2 : statement.start + 1];
  return name?.kind === "name" ? name : undefined;
}

/** `from __future__ import annotations` after the docstring: the seed's templates start so. */
function futureImport(scan: PyScan): Finding[] {
  const { statements, tokens } = scan;
  const isFuture = (statement: PyStatement | undefined): boolean =>
    statement !== undefined && isName(tokens[statement.start], "from") && isName(tokens[statement.start + 1], "__future__");
  const first = statements[0];
  let k = first && tokens.slice(first.start, first.end).every((token) => token.kind === "string") ? 1 : 0;
  let found = false;
  for (; isFuture(statements[k]); k++) {
    const statement = statements[k] as PyStatement;
    found ||= tokens.slice(statement.start, statement.end).some((token) => isName(token, "annotations"));
  }
  const findings: Finding[] = [];
  if (!found) {
    findings.push({
      level: "warning",
      check: "source",
      line: tokens[statements[k]?.start ?? -1]?.line ?? 1,
      message:
        "the file does not start with from __future__ import annotations (after its docstring): the seed's tools do, so that annotations such as list[dict] are not evaluated as the tool loads; add it as the first statement",
    });
  }
  for (const late of statements.slice(k).filter(isFuture)) {
    const message = "from __future__ imports must come first (after the module docstring): Python refuses the file; move it to the top";
    findings.push(finding("error", "source", tokens[late.start], message));
  }
  return findings;
}

/** get_tool_schemas(): defined at the top level, returning a list of schemas, each named, described and with an input schema, each handled. */
function declaration(module: Module): Finding[] {
  const { tool, scan, defs } = module;
  const { tokens, statements } = scan;
  const findings: Finding[] = [];
  const schemasDef = defs.get("get_tool_schemas");
  if (!schemasDef) {
    const nested = statements.find((statement) => definedName(scan, statement)?.value === "get_tool_schemas");
    const message = nested
      ? "get_tool_schemas() is defined inside a class or function; define it at the top level of the module (def get_tool_schemas() -> list[dict]:)"
      : "get_tool_schemas() is not defined; every tool must define it at the top level of the module, returning the list of its schemas";
    return [finding("error", "exports", nested ? tokens[nested.start] : undefined, message)];
  }
  const returns = statements
    .slice(schemasDef.index + 1, statements[schemasDef.index]?.header?.blockEnd)
    .filter((statement) => statement.inDef === schemasDef.index && isName(tokens[statement.start], "return"));
  if (returns.length === 0) {
    findings.push(finding("error", "schemas", schemasDef.name, "get_tool_schemas() has no return statement, so it returns None; return the list of schemas"));
  }
  const schemas: PyValue[] = [];
  // A module-level list returned again adds nothing: read once (R `return S` re-read S R times, R × |S|
  // work from a few KB: red team round 18).
  const namesRead = new Set<unknown>();
  for (const statement of returns) {
    // `return SCHEMAS`: the value of the module-level SCHEMAS = […].
    const single = statement.end - statement.start === 2 ? tokens[statement.start + 1] : undefined;
    const named = single?.kind === "name" ? module.values.get(single.value) : undefined;
    if (named !== undefined) {
      if (namesRead.has(named)) continue;
      namesRead.add(named);
    }
    const returned = named ? pyLiteral(tokens, named.start, named.end) : pyLiteral(tokens, statement.start + 1, statement.end);
    if (returned?.kind === "list") {
      if (returned.complete && returned.items.length === 0) {
        findings.push(finding("error", "schemas", returned.token, "get_tool_schemas() returns an empty list: declare at least one schema"));
      }
      for (const item of returned.items) schemas.push(item);
    } else if (returned === undefined || !["expression", "tuple"].includes(returned.kind)) {
      const hint = returned?.kind === "dict" ? " (one schema? put it in a list: return [{…}])" : "";
      findings.push(
        finding(
          "error",
          "schemas",
          tokens[statement.start],
          `get_tool_schemas() must return a list of schemas; this returns ${describeValue(returned)}${hint}`,
        ),
      );
    }
  }

  const names = new Map<string, PyToken>();
  for (const [index, schema] of schemas.entries()) {
    if (schema.kind === "expression") continue;
    if (schema.kind !== "dict") {
      const message = `schema #${index + 1} must be a dict with "name", "description" and "input_schema"; it is ${describeValue(schema)}`;
      findings.push(finding("error", "schemas", schema.token, message));
      continue;
    }
    // null: certainly missing (the dict is all written out); undefined: not known.
    const entry = (key: string): PyValue | undefined | null => {
      const found = schema.entries.find((e) => e.key === key);
      return found ? found.value : schema.complete ? null : undefined;
    };
    const name = entry("name");
    const known = name?.kind === "str" && !name.dynamic ? name : undefined;
    const label = known ? `schema "${known.value}"` : `schema #${index + 1}`;
    if (name === null) findings.push(finding("error", "schemas", schema.token, `${label} has no "name"; name it ${tool}_<action>`));
    if (known) {
      const problem = nameProblem(tool, known.value, names);
      if (problem) findings.push(finding("error", "schemas", known.token, problem));
      if (!names.has(known.value)) names.set(known.value, known.token);
    }
    const description = entry("description");
    if (description === null || (description?.kind === "str" && !description.dynamic && description.value.trim() === "")) {
      findings.push(finding("warning", "description", schema.token, `${label} has no description; the model chooses tools by it (one or two sentences)`));
    }
    if (entry("input_schema") === null && entry("parameters") === null) {
      const message = `${label} has neither "input_schema" nor "parameters"; add "input_schema": {"type": "object", "properties": {…}} (properties may be empty)`;
      findings.push(finding("error", "input-schema", schema.token, message));
    }
  }
  if (!defs.has("dispatch")) {
    for (const [name, token] of names) {
      if (defs.has(name)) continue;
      const message = `no handler for schema "${name}": define dispatch(name, args) (recommended), or a function named ${name}, at the top level`;
      findings.push(finding("error", "handlers", token, message));
    }
  }
  return findings;
}

function nameProblem(tool: string, name: string, earlier: Map<string, PyToken>): string | undefined {
  const prefix = `${tool}_`;
  if (!SCHEMA_NAME_PATTERN.test(name)) return `schema name "${name}" must be 1-64 letters, digits, "_" or "-" (${tool}_<action>)`;
  if (!name.startsWith(prefix) || name.length === prefix.length) {
    return `schema "${name}" must be named ${tool}_<action> (the tool is ${tool}; e.g. ${tool}_query): animaworks-tool ${tool} <action> calls that schema`;
  }
  return earlier.has(name) ? `schema "${name}" is declared twice (first on line ${earlier.get(name)?.line})` : undefined;
}

/** dispatch(name, args): its parameters, and args.pop("anima_dir", None) in it. */
function dispatchFindings(module: Module): Finding[] {
  const dispatch = module.defs.get("dispatch");
  if (!dispatch) return [];
  const { tokens, statements } = module.scan;
  const header = statements[dispatch.index] as PyStatement;
  const open = header.start + (isName(tokens[header.start], "async") ? 3 : 2);
  const params = isOp(tokens[open], "(") ? parameters(tokens, open) : { positional: [], variadic: true };
  const args = params.positional[1];
  if (args === undefined) {
    if (params.variadic) return [];
    const count = `${params.positional.length} positional parameter${params.positional.length === 1 ? "" : "s"}`;
    return [finding("error", "handlers", dispatch.name, `dispatch() takes ${count}; the host calls dispatch(name, args)`)];
  }
  const end = statements[(header.header?.blockEnd ?? 0) - 1]?.end ?? header.end;
  let withoutDefault = false;
  for (let j = header.end; j < end; j++) {
    if (!isName(tokens[j], args) || !isOp(tokens[j + 1], ".") || !isName(tokens[j + 2], "pop") || !isOp(tokens[j + 3], "(")) continue;
    const key = tokens[j + 4];
    if (key?.kind !== "string" || key.dynamic || key.value !== "anima_dir") continue;
    if (isOp(tokens[j + 5], ",")) return [];
    withoutDefault = true;
  }
  const message = withoutDefault
    ? `${args}.pop("anima_dir") raises KeyError when the framework did not add it (a call from the CLI); write ${args}.pop("anima_dir", None)`
    : `dispatch() does not remove "anima_dir" from ${args}: the framework adds it to every call's arguments, and functions given them get an argument they do not take; start dispatch with ${args}.pop("anima_dir", None)`;
  return [finding("warning", "anima-dir", dispatch.name, message)];
}

/** EXECUTION_PROFILE, when present, maps actions to their profile: a dict. */
function profileFindings(module: Module): Finding[] {
  const range = module.values.get("EXECUTION_PROFILE");
  const value = range && pyLiteral(module.scan.tokens, range.start, range.end);
  if (value === undefined || value.kind === "dict" || value.kind === "expression") return [];
  const message = `EXECUTION_PROFILE must be a dict of actions, e.g. {"query": {"expected_seconds": 60, "background_eligible": True}}; it is ${describeValue(value)}`;
  return [finding("error", "profile", value.token, message)];
}

/** Only the standard library, httpx and core.tools(._base) are importable; httpx and core.tools are imported where used. */
function importFindings(scan: PyScan, imports: PyImport[]): Finding[] {
  const findings: Finding[] = [];
  for (const use of imports) {
    const root = use.module.split(".")[0] as string;
    const modules = use.module === "core" && use.names.length > 0 ? use.names.map(([name]) => `core.${name}`) : [use.module];
    const missing = root === "core" ? modules.find((module) => !PROVIDED_CORE.has(module)) : undefined;
    let problem: string | undefined;
    if (use.level > 0) {
      problem = `relative import (from ${".".repeat(use.level)}${use.module} import …): a Python tool is loaded as a single file, not as part of a package, so it fails; keep the tool's code in this file`;
    } else if (missing !== undefined) {
      problem = `\`${missing}\` is not available: of AnimaWorks' core, Python tools here get core.tools._base (get_credential, ToolConfigError) and core.tools only`;
    } else if (root !== "core" && root !== "httpx" && !PYTHON_STDLIB.has(root)) {
      const advice = HTTP_CLIENTS.has(root) ? "use httpx (with a timeout) or urllib.request" : "use the standard library instead";
      problem = `\`${root}\` is not available: Python tools here run with the standard library and httpx only; ${advice}`;
    } else if ((root === "httpx" || modules.some((module) => module.startsWith("core.tools"))) && eager(scan, use.statement)) {
      const message = `\`${root === "httpx" ? "httpx" : modules[0]}\` is imported at module level: AnimaWorks runs a tool's top-level code each time it loads the tool (to list its schemas too), so the seed imports dependencies inside the function that uses them; move this import there`;
      findings.push(finding("warning", "imports", use.token, message));
    }
    if (problem !== undefined) findings.push(finding("error", "imports", use.token, problem));
  }
  return findings;
}

/** True when the statement runs as the module loads (in no function, and not under `if TYPE_CHECKING:`). */
function eager(scan: PyScan, index: number): boolean {
  let statement = scan.statements[index];
  if (statement === undefined || statement.inDef !== -1) return false;
  for (let parent = scan.statements[statement.parent]; parent !== undefined; parent = scan.statements[statement.parent]) {
    if (parent.header?.keyword === "if" && scan.tokens.slice(parent.start, parent.end).some((token) => token.value === "TYPE_CHECKING")) return false;
    statement = parent;
  }
  return true;
}

/** httpx requests and clients need timeout=; urlopen needs a timeout (keyword or third argument). */
function timeouts(tokens: PyToken[], imports: PyImport[]): Finding[] {
  // The names each form is called by here: the module's, and what `import … as` / `from … import` bind.
  const httpxModules = new Set(["httpx"]);
  const httpxFunctions = new Set<string>();
  const requestModules = new Set(["request"]);
  const urlopens = new Set(["urlopen"]);
  for (const use of imports) {
    if (use.module === "httpx" && use.alias !== undefined) httpxModules.add(use.alias);
    if (use.module === "urllib.request" && use.alias !== undefined && use.alias !== "urllib") requestModules.add(use.alias);
    for (const [name, bound] of use.names) {
      if (use.module === "httpx" && HTTPX_CALLS.has(name)) httpxFunctions.add(bound);
      if (use.module === "urllib" && name === "request") requestModules.add(bound);
      if (use.module === "urllib.request" && name === "urlopen") urlopens.add(bound);
    }
  }
  const findings: Finding[] = [];
  for (let j = 0; j < tokens.length; j++) {
    const token = tokens[j] as PyToken;
    if (token.kind !== "name" || isOp(tokens[j - 1], ".") || isName(tokens[j - 1], "def")) continue;
    const calls = (k: number, names: (value: string) => boolean): boolean =>
      isOp(tokens[k], ".") && tokens[k + 1]?.kind === "name" && names((tokens[k + 1] as PyToken).value) && isOp(tokens[k + 2], "(");
    let call: { label: string; open: number; httpx: boolean } | undefined;
    if (httpxModules.has(token.value) && calls(j + 1, (name) => HTTPX_CALLS.has(name))) {
      call = { label: `${token.value}.${(tokens[j + 2] as PyToken).value}`, open: j + 3, httpx: true };
    } else if ((httpxFunctions.has(token.value) || urlopens.has(token.value)) && isOp(tokens[j + 1], "(")) {
      call = { label: token.value, open: j + 1, httpx: httpxFunctions.has(token.value) };
    } else if (requestModules.has(token.value) && calls(j + 1, (name) => name === "urlopen")) {
      call = { label: `${token.value}.urlopen`, open: j + 3, httpx: false };
    } else if (token.value === "urllib" && isOp(tokens[j + 1], ".") && isName(tokens[j + 2], "request") && calls(j + 3, (name) => name === "urlopen")) {
      call = { label: "urllib.request.urlopen", open: j + 5, httpx: false };
    }
    if (!call) continue;
    const args = callArguments(tokens, call.open);
    // Arguments passed as *a / **k may hold the timeout.
    if (args === undefined || args.spread || args.keywords.has("timeout") || (!call.httpx && args.positional >= 3)) continue;
    const message = call.httpx
      ? `${call.label}() without timeout=: set one on every external call (recommended: timeout=30); httpx's own 5 s default is rarely what the service needs`
      : `${call.label}() without a timeout: it waits as long as the server keeps the connection open; pass timeout=30 (or what the service needs)`;
    findings.push(finding("error", "network-timeout", token, message));
  }
  return findings;
}
