import { execFileSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { type Harness, assertNoLeak, expectError, expectHealthy, expectOk, startHost } from "./harness.js";

/**
 * Builds are hermetic: files an Anima can put into its tools folder (a tsconfig.json, a jsconfig.json,
 * a package.json, a FIFO) change nothing about how its tools are built, and nothing outside the folder
 * is read. These once leaked another Anima's secret and the host's environment into a LoadError, hung
 * every later build of the folder (a FIFO) and grew a build to 1.2 GB (/dev/zero).
 */
const SECRET = "EVE2-SECRET-TOKEN-3141592653";
const TOOL = `
export function get_tool_schemas() { return [{ name: "plain_run", description: "r", input_schema: { type: "object", properties: {} } }]; }
export function dispatch() { return "built as the host says"; }
`;

describe("hermetic builds", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  function setUp(files: Record<string, string>): Harness {
    h = startHost({ mode: "in-process", timeoutMs: 3_000, loadTimeoutMs: 3_000, animas: ["eve", "eve2"] });
    h.data.write("animas/eve2/secret.txt", SECRET);
    h.data.write("animas/eve/tools/plain.ts", TOOL);
    for (const [path, content] of Object.entries(files)) h.data.write(`animas/eve/tools/${path}`, content);
    return h;
  }

  it.each([
    ["tsconfig.json extending another Anima's secret", { "tsconfig.json": JSON.stringify({ extends: "../../eve2/secret.txt" }) }],
    ["tsconfig.json extending the host's environment", { "tsconfig.json": JSON.stringify({ extends: "/proc/self/environ" }) }],
    ["tsconfig.json extending /dev/zero", { "tsconfig.json": JSON.stringify({ extends: "/dev/zero" }) }],
    ["jsconfig.json extending another Anima's secret", { "jsconfig.json": JSON.stringify({ extends: "../../eve2/secret.txt" }) }],
    [
      "tsconfig.json remapping the tool API onto a secret",
      { "tsconfig.json": JSON.stringify({ compilerOptions: { baseUrl: ".", paths: { "@animaworks/tool": ["../../eve2/secret.txt"] } } }) },
    ],
    [
      "package.json with odd module settings",
      { "package.json": JSON.stringify({ type: "commonjs", browser: { "./plain.ts": "../../eve2/secret.txt" }, main: "/dev/zero" }) },
    ],
  ])("%s: ignored; the tool builds and runs", async (_label, files) => {
    const host = setUp(files);
    const result = await host.call("eve", "plain_run");
    expect(expectOk(result)).toBe("built as the host says");
    assertNoLeak(result, host.data);
    expect(JSON.stringify(result)).not.toContain(SECRET);
  });

  it("a FIFO named tsconfig.json hangs nothing", async () => {
    const host = setUp({});
    execFileSync("mkfifo", [`${host.data.dir}/animas/eve/tools/tsconfig.json`]);
    // A build that read the FIFO would block until the test's timeout: answering at all is the behaviour.
    expect(expectOk(await host.call("eve", "plain_run"))).toBe("built as the host says");
  });

  it("importing a FIFO or an oversized file fails fast as LoadError, quoting nothing", async () => {
    const host = setUp({
      "pipe_user.ts": `import x from "./pipe.ts";\nexport function get_tool_schemas() { return [{ name: "pipe_user_run", description: "r" }]; }\nexport function dispatch() { return String(x); }\n`,
      "big_user.ts": `import x from "./big.json";\nexport function get_tool_schemas() { return [{ name: "big_user_run", description: "r" }]; }\nexport function dispatch() { return String(x).length; }\n`,
      "big.json": JSON.stringify("s".repeat(5 * 1024 * 1024)),
    });
    execFileSync("mkfifo", [`${host.data.dir}/animas/eve/tools/pipe.ts`]);
    // Refused by name (a build that read the FIFO would block until the test's timeout, and a load that
    // timed out would say so, not name the file).
    const pipe = await host.call("eve", "pipe_user_run");
    expectError(pipe, "LoadError", /pipe\.ts/);
    const big = await host.call("eve", "big_user_run");
    expectError(big, "LoadError", /big\.json is larger than 4194304 bytes/);
    expect(JSON.stringify(big)).not.toContain("ssssssss");
    await expectHealthy(host, "eve");
  });
});
