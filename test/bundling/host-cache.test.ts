import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createHost } from "../../src/host.js";
import { type TempDataDir, makeDataDir } from "../helpers/data-dir.js";
import { installFixtures, okOutput } from "../helpers/tools.js";

// Count real esbuild builds: the bundler imports esbuild lazily, and only when a bundle is not cached.
const esbuildBuilds = vi.hoisted(() => ({ count: 0 }));
vi.mock("esbuild", async (importOriginal) => {
  const original = await importOriginal<typeof import("esbuild")>();
  return {
    ...original,
    // The bundler builds through a context (so that a build can be cancelled at its deadline).
    context: (async (options: Parameters<typeof original.context>[0]) => {
      esbuildBuilds.count++;
      return original.context(options);
    }) as typeof original.context,
  };
});

describe("bundle and description caches across hosts", () => {
  let data: TempDataDir;
  afterEach(() => data?.cleanup());

  function newHost() {
    return createHost({ dataDir: data.dir, coreToolsDir: join(data.dir, "core"), isolation: "in-process", onLog: () => {} });
  }

  it("does not run esbuild again for an unchanged tool in a new host, and does after a helper edit", async () => {
    data = makeDataDir();
    data.anima("alice");
    const folder = join(data.dir, "animas", "alice", "tools");
    installFixtures("imports", folder, ["uses_helper", "_strings", "_table", "lib"]);

    const first = newHost();
    expect(okOutput(await first.call("alice", "uses_helper_run"))).toBe("HI!...|kg");
    await first.close();
    expect(esbuildBuilds.count).toBe(1);

    const second = newHost();
    expect(okOutput(await second.call("alice", "uses_helper_run"))).toBe("HI!...|kg");
    expect((await second.list("alice")).tools.map((t) => t.status)).toEqual(["ok"]);
    await second.close();
    expect(esbuildBuilds.count).toBe(1); // served from the on-disk cache

    writeFileSync(join(folder, "_strings.ts"), "export function shout(text: string): string {\n  return `${text.toUpperCase()}?`;\n}\n");
    const third = newHost();
    expect(okOutput(await third.call("alice", "uses_helper_run"))).toBe("HI?...|kg");
    await third.close();
    expect(esbuildBuilds.count).toBe(2);
  });

  it("picks up an edited tool after refresh() in a running host", async () => {
    data = makeDataDir();
    data.anima("alice");
    const folder = join(data.dir, "animas", "alice", "tools");
    installFixtures("imports", folder, ["uses_helper", "_strings", "_table", "lib"]);
    const host = newHost();
    try {
      expect(okOutput(await host.call("alice", "uses_helper_run"))).toBe("HI!...|kg");
      writeFileSync(join(folder, "lib", "_pad.ts"), 'export function pad(text: string, width: number): string {\n  return text.padEnd(width, "_");\n}\n');
      host.refresh();
      expect(okOutput(await host.call("alice", "uses_helper_run"))).toBe("HI!___|kg");
    } finally {
      await host.close();
    }
  });
});
