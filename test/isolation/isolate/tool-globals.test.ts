import ivm from "isolated-vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COLLECT_GARBAGE_GLOBAL, REMOVED_GLOBALS, REMOVED_INTL_MEMBERS, TOOL_GLOBALS, TOOL_INTL_MEMBERS } from "../../../src/contract/tool-globals.js";
import { IsolateRunner } from "../../../src/isolation/isolate/isolate-runner.js";
import type { CapabilityReply } from "../../../src/isolation/wire/messages.js";
import { type ProbeTool, buildProbeTool } from "../../helpers/probe-tool.js";

/**
 * What a tool's global holds is an allow-list (src/contract/tool-globals.ts `TOOL_GLOBALS`): when V8 adds a
 * global (V8 14 added Temporal, Iterator, Float16Array, SuppressedError, DisposableStack,
 * AsyncDisposableStack), the first test here fails until someone decides whether tools get it. Moving
 * to a new Node is: bump the pin, run the suite, decide what these tests name.
 */
const ownKeysOf = (code: string): string[] => {
  const isolate = new ivm.Isolate({ memoryLimit: 16 });
  try {
    return JSON.parse(isolate.createContextSync().evalSync(`JSON.stringify(Reflect.ownKeys(${code}).map(String))`) as string) as string[];
  } finally {
    isolate.dispose();
  }
};

describe("the globals V8 offers (reviewed per Node/V8 version)", () => {
  it("each global of a fresh context is either given to tools or removed on purpose", () => {
    const reviewed = new Set<string>([...TOOL_GLOBALS, ...Object.keys(REMOVED_GLOBALS)]);
    const unreviewed = ownKeysOf("globalThis").filter((name) => !reviewed.has(name));
    expect(
      unreviewed,
      `V8 ${process.versions.v8} offers globals nobody decided on: add each to TOOL_GLOBALS or REMOVED_GLOBALS (src/contract/tool-globals.ts)`,
    ).toEqual([]);
  });

  it("each member of Intl is either given to tools or removed on purpose", () => {
    const reviewed = new Set<string>([...TOOL_INTL_MEMBERS, ...Object.keys(REMOVED_INTL_MEMBERS), "Symbol(Symbol.toStringTag)"]);
    expect(ownKeysOf("Intl").filter((name) => !reviewed.has(name))).toEqual([]);
  });

  it("names nothing twice, and removes nothing it also gives", () => {
    expect(new Set(TOOL_GLOBALS).size).toBe(TOOL_GLOBALS.length);
    expect(TOOL_GLOBALS.filter((name) => name in REMOVED_GLOBALS)).toEqual([]);
    expect(TOOL_INTL_MEMBERS.filter((name) => name in REMOVED_INTL_MEMBERS)).toEqual([]);
  });
});

/** Reports the global's keys, Intl's, and every isolated-vm object reachable from the global or from capability answers. */
const PROBE = `
import { fs } from "@animaworks/tool";
const IVM_CLASSES = ["Reference", "ExternalCopy", "Callback", "Isolate", "Context", "Script", "Module", "NativeModule", "Dereference"];
function ivmObjectsIn(roots) {
  const found = [];
  const seen = new Set();
  const queue = roots.map((root) => [root.name, root.value]);
  while (queue.length > 0 && seen.size < 20000) {
    const [path, value] = queue.shift();
    if (value === null || (typeof value !== "object" && typeof value !== "function") || seen.has(value)) continue;
    seen.add(value);
    let names = [];
    try { names = [Object.prototype.toString.call(value).slice(8, -1), value.constructor && value.constructor.name]; } catch { names = ["?"]; }
    if (names.some((name) => IVM_CLASSES.includes(name))) found.push(path + ": " + names.join(" "));
    queue.push([path + ".__proto__", Object.getPrototypeOf(value)]);
    for (const key of Reflect.ownKeys(value)) {
      const descriptor = Reflect.getOwnPropertyDescriptor(value, key);
      for (const part of ["value", "get", "set"]) if (descriptor && descriptor[part] !== undefined) queue.push([path + "." + String(key), descriptor[part]]);
    }
  }
  return { found, walked: seen.size };
}
export function get_tool_schemas() {
  return [{ name: "probe_run", description: "what the global offers", input_schema: { type: "object", properties: {} } }];
}
export async function dispatch() {
  const answers = [await fs.stat("x"), await fs.readdir(".")];
  return {
    globals: Reflect.ownKeys(globalThis).map(String).sort(),
    intl: Reflect.ownKeys(Intl).map(String).sort(),
    temporal: typeof Temporal,
    collector: (() => {
      const descriptor = Reflect.getOwnPropertyDescriptor(globalThis, ${JSON.stringify(COLLECT_GARBAGE_GLOBAL)});
      try { globalThis[${JSON.stringify(COLLECT_GARBAGE_GLOBAL)}] = () => 0; } catch {}
      return { type: typeof globalThis[${JSON.stringify(COLLECT_GARBAGE_GLOBAL)}], writable: descriptor.writable, configurable: descriptor.configurable };
    })(),
    float16Guarded: Float16Array.prototype.constructor === Float16Array && Float16Array.toString().indexOf("[native code]") === -1,
    ivm: ivmObjectsIn([{ name: "globalThis", value: globalThis }, { name: "answers", value: answers }]),
  };
}
`;

describe("a tool's global, once bound", () => {
  let probe: ProbeTool;
  const answers: Record<string, unknown> = { "fs.stat": { type: "file", size: 1, mtimeMs: 0 }, "fs.readdir": [{ name: "a.txt", type: "file" }] };
  const runner = new IsolateRunner({
    invokeCapability: async (_context, name): Promise<CapabilityReply> => ({ ok: true, value: JSON.stringify(answers[name] ?? null) }),
  });
  beforeAll(async () => {
    probe = await buildProbeTool(PROBE);
  });
  afterAll(async () => {
    await runner.close();
    probe.cleanup();
  });

  it("holds exactly the allow-list (and the bundle's own module), with or without the startup snapshot; no isolated-vm object is reachable", async () => {
    // Each Anima gets its own isolate; from the third on they are made from the snapshot.
    for (let i = 0; i < 5; i++) {
      const outcome = await runner.call(probe.request(`anima${i}`, { timeoutMs: 5_000, maxResultBytes: 1_000_000 }));
      if (!outcome.ok || outcome.value.kind === "none") throw new Error(JSON.stringify(outcome));
      const seen = JSON.parse(outcome.value.text) as {
        globals: string[];
        intl: string[];
        temporal: string;
        collector: unknown;
        float16Guarded: boolean;
        ivm: { found: string[]; walked: number };
      };
      // The host's collector (this process has it, as sandbox processes do) stays a key V8 will not let
      // go of, emptied: `collector` is what the tool finds there.
      expect(seen.globals).toEqual([...TOOL_GLOBALS, "__awToolModule", COLLECT_GARBAGE_GLOBAL].sort());
      expect(seen.collector).toEqual({ type: "undefined", writable: false, configurable: false });
      expect(seen.intl).toEqual([...TOOL_INTL_MEMBERS, "Symbol(Symbol.toStringTag)"].sort());
      expect(seen.temporal).toBe("undefined");
      expect(seen.float16Guarded).toBe(true);
      expect(seen.ivm.found).toEqual([]);
      expect(seen.ivm.walked).toBeGreaterThan(500);
    }
    expect(runner.usesStartupSnapshot).toBe(true);
  });

  it("the reachability walk does find an isolated-vm object where one is put (the check can fail)", async () => {
    const isolate = new ivm.Isolate({ memoryLimit: 16 });
    try {
      const context = isolate.createContextSync();
      await context.global.set("leaked", new ivm.Reference({ secret: 1 }));
      const walker = PROBE.slice(PROBE.indexOf("const IVM_CLASSES"), PROBE.indexOf("export function get_tool_schemas"));
      const found = JSON.parse(
        context.evalSync(`${walker}; JSON.stringify(ivmObjectsIn([{ name: "globalThis", value: globalThis }]).found)`) as string,
      ) as string[];
      expect(found.some((entry) => entry.startsWith("globalThis.leaked"))).toBe(true);
    } finally {
      isolate.dispose();
    }
  });
});
