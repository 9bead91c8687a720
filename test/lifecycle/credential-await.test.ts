import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runValidate, validateSource } from "../../src/lifecycle/validate.js";

// getCredential() returns a Promise; a draft ported from Python's get_credential() often forgets the
// await. validate warns at the call, and only at calls (never at text in strings or comments).

const scratch = mkdtempSync(join(tmpdir(), "awt-credential-await-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const SCHEMAS = 'export function get_tool_schemas() { return [{ name: "t_run", description: "Runs.", input_schema: { type: "object", properties: {} } }]; }';

/** The credential warnings of a tool `t` whose body is `lines` (line 1 is the import, line 2 the schemas). */
function warnings(lines: string[]): Array<{ line: number | undefined; column: number | undefined; message: string }> {
  const source = ['import { fetch, getCredential, get_credential } from "@animaworks/tool";', SCHEMAS, ...lines].join("\n");
  return validateSource("t.ts", source)
    .filter((f) => f.check === "credentials")
    .map((f) => ({ line: f.line, column: f.column, message: f.message }));
}

describe("validate: getCredential() without await", () => {
  it("warns where the Promise is used as the value: assigned, concatenated, put in an object or passed on", () => {
    const found = warnings([
      /* 3 */ "export async function dispatch(name, args) {",
      /* 4 */ '  const key = getCredential("weather", "t");',
      /* 5 */ '  const headers = { Authorization: "Bearer " + get_credential("weather", "t") };',
      /* 6 */ '  const url = `https://api.example.com/?key=${getCredential("weather", "t")}`;',
      /* 7 */ '  return fetch(url + key, { headers, body: getCredential("other", "t"), timeoutMs: 5000 });',
      /* 8 */ "}",
    ]);
    expect(found.map((f) => `${f.line}:${f.column}`)).toEqual(["4:15", "5:48", "6:47", "7:44"]);
    expect(found[0]?.message).toBe(
      'getCredential() returns a Promise: used without await, the value here is the Promise, not the credential (sent on, it reads "[object Promise]"); write await getCredential(…)',
    );
    expect(found[1]?.message).toMatch(/^get_credential\(\) returns a Promise: .* write await get_credential\(…\)$/);
  });

  it("is a warning: the draft still validates (exit 0)", async () => {
    const path = join(scratch, "t.ts");
    writeFileSync(
      path,
      [SCHEMAS, "export async function dispatch() {", '  const key = getCredential("weather", "t");', '  return "Bearer " + key;', "}"].join("\n"),
    );
    expect(await runValidate(path)).toMatchObject({
      exitCode: 0,
      text: `${path}:3:15: warning [credentials] getCredential() returns a Promise: used without await, the value here is the Promise, not the credential (sent on, it reads "[object Promise]"); write await getCredential(…)\n${path}: 0 errors, 1 warning`,
    });
  });

  it("says nothing of awaited, returned, chained or combined calls", () => {
    expect(
      warnings([
        "export async function dispatch(name, args) {",
        '  const key = await getCredential("weather", "t");',
        '  const trimmed = (await getCredential("weather", "t")).trim();',
        '  const grouped = await (getCredential("weather", "t"));',
        '  const [a, b] = await Promise.all([getCredential("a", "t"), getCredential("b", "t")]);',
        '  getCredential("c", "t").then((value) => value.length);',
        '  const pending = getCredential("d", "t");',
        "  const d = await pending;",
        '  const lookup = () => getCredential("e", "t");',
        '  if (name === "t_other") return getCredential("f", "t");',
        "  return { key, trimmed, grouped, a, b, d, lookup };",
        "}",
        'export const load = async () => { return getCredential("g", "t"); };',
      ]),
    ).toEqual([]);
  });

  it("says nothing of the name in strings, templates, comments or declarations", () => {
    expect(
      warnings([
        '// const key = getCredential("weather", "t");',
        '/* const key = getCredential("weather", "t"); */',
        'const note = \'const key = getCredential("weather", "t")\';',
        'const hint = `const key = getCredential("weather", "t")`;',
        "const api = { getCredential(name) { return name; } };",
        "function getCredentialLocal() { return getCredential.length; }",
        "export function dispatch() { return [note, hint, api]; }",
      ]),
    ).toEqual([]);
  });

  it("a variable holding the call that is never awaited is still the mistake", () => {
    expect(
      warnings([
        "export async function dispatch() {",
        '  const pending = getCredential("d", "t");',
        '  return fetch("https://api.example.com/", { headers: { key: pending }, timeoutMs: 1000 });',
        "}",
      ]).map((f) => f.line),
    ).toEqual([4]);
  });
});
