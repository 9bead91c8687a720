import { afterEach, describe, expect, it } from "vitest";
import { resolveConfig } from "../../src/config.js";
import { SHARED_SCOPE, configCredentialKey } from "../../src/credentials/store.js";
import { ConfigCredentialStore, LegacyCredentialStore } from "../../src/credentials/stores.js";
import { Vault } from "../../src/credentials/vault.js";
import type { LogRecord } from "../../src/host-options.js";
import { jsonSyntaxProblem } from "../../src/json-syntax.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { thrownToolError } from "../helpers/errors.js";

// The files that hold credentials are read for tools (getCredential's errors reach them) and for every
// Anima's CLI (config.json): their parse errors must say what is wrong and where, never quote the text.
// V8's own message does quote it: `Unexpected token 'S', ..."api_key": SHARED-KE"... is not valid JSON`
// (config_parse_error_excerpt: an operator's one missing quote showed a secret to every tool).

const SECRET = "SHARED-KEY-0123456789";
/** A value left unquoted: V8's message quotes the text around it. */
const UNQUOTED = `{\n  "credentials": { "svc": { "api_key": ${SECRET} } }\n}\n`;
/** A missing comma: V8's message gives the line and column. */
const NO_COMMA = `{\n  "credentials": { "svc": { "api_key": "${SECRET}" "x": 1 } }\n}\n`;

describe("parse errors of the files that hold credentials (config_parse_error_excerpt)", () => {
  let data: TempDataDir | undefined;
  afterEach(() => data?.cleanup());

  it("says the kind of error and its line, or nothing of the text", () => {
    const problem = (text: string): string => {
      try {
        JSON.parse(text);
      } catch (error) {
        return jsonSyntaxProblem(error);
      }
      throw new Error("parsed");
    };
    expect(problem(UNQUOTED)).toBe("a syntax error");
    expect(problem(NO_COMMA)).toBe("expected ',' or '}' after property value at line 2 column 64");
    expect(problem("{")).toBe("expected property name or '}' at line 1 column 2");
    expect(problem("")).toBe("the text ends early");
    expect(problem('{"a": "b"} SECRET')).toBe("unexpected non-whitespace character after JSON at line 1 column 12");
    expect(problem('{"a": "\\q"}')).toBe("bad escaped character at line 1 column 9");
  });

  it("config.json: getCredential's error and the host's configuration error quote none of it", async () => {
    for (const text of [UNQUOTED, NO_COMMA]) {
      data?.cleanup();
      data = makeDataDir({ "config.json": text });
      const store = new ConfigCredentialStore(`${data.dir}/config.json`);
      const lookup = (await store.get(SHARED_SCOPE, configCredentialKey("svc")).catch((error: unknown) => error)) as Error;
      expect(lookup.message).toMatch(/^config\.json is not valid JSON \((a syntax error|expected .* at line 2 column \d+)\)/);
      const dir = data.dir;
      const config = thrownToolError(() => resolveConfig({ dataDir: dir }, {}));
      expect(config.message).toMatch(/config\.json is not valid JSON: (a syntax error|expected .* at line 2 column \d+)$/);
      for (const shown of [lookup.message, config.message, config.hint ?? ""]) expect(shown).not.toContain("SHARED-");
    }
  });

  it("vault.json and shared/credentials.json: the warnings quote none of it", async () => {
    for (const text of [UNQUOTED, NO_COMMA]) {
      data?.cleanup();
      data = makeDataDir({ "vault.json": text, "shared/credentials.json": text });
      const warnings: string[] = [];
      const log = (record: LogRecord): void => void warnings.push(record.message);
      const vault = new Vault(data.dir, { log });
      await vault.generateKey();
      expect(await vault.get("shared", "T")).toBeUndefined();
      expect(await new LegacyCredentialStore(`${data.dir}/shared/credentials.json`, log).get(SHARED_SCOPE, "X")).toBeUndefined();
      expect(warnings).toHaveLength(2);
      for (const warning of warnings) {
        expect(warning).toMatch(/is not valid JSON \((a syntax error|expected .* at line 2 column \d+)\)/);
        expect(warning).not.toContain("SHARED-");
      }
    }
  });
});
