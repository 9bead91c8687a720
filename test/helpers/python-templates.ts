import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./tools.js";

/** The two Python templates of the seed's tool-creator skill, copied verbatim (test/fixtures/python/). */
export const template = (file: string): string => readFileSync(join(REPO_ROOT, "test", "fixtures", "python", file), "utf8");

/**
 * A data dir's files with both templates as Anima alice's tools. The API template's only change is its
 * server's address (https://api.example.com → `apiBase`, a test's server on 127.0.0.1, which config.json
 * allows); its key `apiKey` is in config.json's credentials.
 */
export function seedTemplateFiles(apiBase: string, apiKey: string): Record<string, string> {
  return {
    "config.json": JSON.stringify({ credentials: { myapi: { api_key: apiKey } }, animaworks_tool: { allow_internal_hosts: ["127.0.0.1"] } }),
    "animas/alice/tools/my_tool.py": template("my_tool.py"),
    "animas/alice/tools/myapi.py": template("myapi.py").replaceAll("https://api.example.com", apiBase),
  };
}
