import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../../project-root.js";

let cached: string | undefined;

/** Compiled prelude parts (`sandbox/*.ts` → `dist/sandbox/*.js`), in the order they run. */
const PARTS = ["memory-guards.js", "json-guard.js", "capabilities.js", "result-framing.js", "tool-errors.js", "tool-global.js", "prelude.js"];

/** The host ↔ isolate contract as compiled (src/contract/*.ts → dist/src/contract/*.js), inlined in this order. */
const CONTRACT = ["isolate.js", "tool-globals.js"];

/**
 * The prelude script, read once per process. It installs the prelude and leaves one global function,
 * `__awBind(bridge)` (`BIND_GLOBAL` of src/contract/isolate.ts), which the host calls once per context
 * before any tool code runs: it deletes itself, removes every global a tool may not hold (the allow-list
 * `TOOL_GLOBALS` of src/contract/tool-globals.ts), connects the prelude to the host's bridge (isolated-vm
 * callbacks) and returns the entry object, which the host keeps as a reference (sandbox/prelude.ts
 * `exposeBinder`). So the same
 * script runs in each new context or is baked into a V8 startup snapshot (which cannot hold host
 * callbacks), and a context made from the snapshot only binds.
 *
 * The contract's constants come first, then the parts, all inside one strict function scope, so the
 * helpers one part declares for the next (and the late-bound bridge) never become globals a tool could
 * reach (strict frames give `caller` and call sites nothing to hand out).
 */
export function readPrelude(): string {
  cached ??= `(function () {
"use strict";
${CONTRACT.map((part) => inlineContract(readFileSync(join(PROJECT_ROOT, "dist", "src", "contract", part), "utf8"))).join("\n")}
${PARTS.map((part) => readFileSync(join(PROJECT_ROOT, "dist", "sandbox", part), "utf8")).join("\n")}
exposeBinder(globalThis);
})();
`;
  return cached;
}

/**
 * The compiled contract as statements of the prelude's scope: each `export const` becomes a `const`. The
 * contract holds types and plain constants only (its rules); anything else that survives compilation (an
 * import, another kind of export) is refused here rather than inlined.
 */
export function inlineContract(compiled: string): string {
  const body = compiled.replace(/^export (?=const [A-Za-z_$][\w$]* = )/gm, "");
  if (/^\s*(?:import|export)\b/m.test(body)) {
    throw new Error("src/contract/*.ts must hold only types and exported constants: they are inlined into the prelude");
  }
  return body;
}

/**
 * A description of a bound context's shape: the own keys of the global, of every object it holds and of
 * their prototypes, in name order. A context made from the startup snapshot is used only if its shape, once bound,
 * equals that of a context that ran the script (isolate-runner.ts): whatever V8 might re-install on
 * deserialisation that the prelude does not remove again shows up here, and the snapshot is not used.
 */
export const SHAPE_PROBE = `(() => {
  const shape = {};
  const seen = new Set();
  const describe = (name, value) => {
    if (value === null || (typeof value !== "object" && typeof value !== "function") || seen.has(value)) return;
    seen.add(value);
    shape[name] = Reflect.ownKeys(value).map(String).sort().join(",");
  };
  describe("globalThis", globalThis);
  for (const key of Reflect.ownKeys(globalThis)) {
    const value = Reflect.getOwnPropertyDescriptor(globalThis, key).value;
    describe(String(key), value);
    if (typeof value === "function" && value.prototype) describe(String(key) + ".prototype", value.prototype);
  }
  // By name: V8 14 installs some globals (SuppressedError, DisposableStack, …) later in a context made
  // from a snapshot, so the global's key order differs while its shape does not.
  return JSON.stringify(Object.keys(shape).sort().map((name) => [name, shape[name]]));
})()`;
