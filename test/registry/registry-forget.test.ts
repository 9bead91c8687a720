import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ToolBundler } from "../../src/bundling/bundler.js";
import type { DescribeOutcome, Executor } from "../../src/isolation/wire/messages.js";
import { LOAD_FAILURE_FORGET_AFTER_MS, ToolRegistry } from "../../src/registry/registry.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { simpleTool } from "../helpers/tools.js";

/** What the registry keeps loaded in memory, by file path (private: looked at only to count it). */
function kept(registry: ToolRegistry): Map<string, unknown> {
  return (registry as unknown as { loaded: Map<string, unknown> }).loaded;
}

const spun: DescribeOutcome = { ok: false, error: { type: "Timeout", fault: "tool", message: "the load ran past its timeout" } };

function good(name: string): DescribeOutcome {
  return { ok: true, module: { exports: { dispatch: "function" }, schemas: [{ name: `${name}_run` }], profile: null } };
}

describe("ToolRegistry: what it keeps loaded is bounded", () => {
  let data: TempDataDir;
  afterEach(() => {
    vi.useRealTimers();
    data?.cleanup();
  });

  function registryWith(answer: (name: string) => DescribeOutcome, maxLoaded?: number) {
    data = makeDataDir();
    const describe = vi.fn(async (request: { bundle: { code: string } }) => {
      const name = /(\w+)_run/.exec(request.bundle.code)?.[1] ?? "";
      return answer(name);
    });
    const executor = { describe, call: vi.fn(), close: async () => {}, stuckEntries: () => 0 } as unknown as Executor;
    const registry = new ToolRegistry({
      dataDir: data.dir,
      coreToolsDir: join(data.dir, "core"),
      loadTimeoutMs: 1_000,
      memoryLimitMb: 64,
      bundler: new ToolBundler(join(data.dir, "cache")),
      executor,
      ...(maxLoaded !== undefined ? { maxLoaded } : {}),
    });
    return { registry, describe };
  }

  it("a refresh forgets failed loads long past their retry, even of files since deleted (they were kept for ever)", async () => {
    const { registry } = registryWith(() => spun);
    vi.useFakeTimers({ toFake: ["hrtime"] });
    for (let i = 0; i < 20; i++) data.write(`common_tools/t${i}.ts`, simpleTool(`t${i}`));
    const sources = await registry.sources(undefined);
    for (let i = 0; i < 20; i++) expect((await registry.loadDeclared(sources.tools.get(`t${i}`)!)).state).toBe("error");
    rmSync(join(data.dir, "common_tools"), { recursive: true, force: true });
    registry.forget(); // their retries are not due: kept (a refresh does not cut a backoff short)
    expect(kept(registry).size).toBe(20);
    vi.advanceTimersByTime(10 * 60 * 60 * 1000); // hours later
    registry.forget();
    expect(kept(registry).size).toBe(0);
  });

  it("a refresh just after a retry fell due does not restart the doubling of the backoff", async () => {
    const { registry, describe } = registryWith(() => spun);
    vi.useFakeTimers({ toFake: ["hrtime"] });
    data.write("common_tools/spinload.ts", simpleTool("spinload"));
    const source = (await registry.sources(undefined)).tools.get("spinload")!;
    const load = async () => (await registry.loadDeclared(source)).state;
    await load(); // 1st failure: retry in 10 s
    vi.advanceTimersByTime(10_000);
    await load(); // 2nd: retry in 20 s
    vi.advanceTimersByTime(20_000 + LOAD_FAILURE_FORGET_AFTER_MS - 1); // due, and not forgotten yet
    registry.forget();
    await load(); // 3rd: retry in 40 s, not 10 s
    expect(describe).toHaveBeenCalledTimes(3);
    vi.advanceTimersByTime(39_999);
    registry.forget();
    await load();
    expect(describe).toHaveBeenCalledTimes(3);
  });

  it("keeps at most maxLoaded files' loads, dropping loads that are not waiting for a retry first", async () => {
    const { registry, describe } = registryWith((name) => (name === "flaky" ? spun : good(name)), 3);
    vi.useFakeTimers({ toFake: ["hrtime"] });
    const names = ["flaky", "a", "b", "c", "d"];
    for (const name of names) data.write(`common_tools/${name}.ts`, simpleTool(name));
    const sources = await registry.sources(undefined);
    for (const name of names) await registry.loadDeclared(sources.tools.get(name)!);
    expect(kept(registry).size).toBe(3);
    expect([...kept(registry).keys()].map((path) => path.replace(/^.*\//, ""))).toEqual(["flaky.ts", "c.ts", "d.ts"]);
    await registry.loadDeclared(sources.tools.get("flaky")!); // its backoff still holds
    expect(describe).toHaveBeenCalledTimes(5);
  });
});
