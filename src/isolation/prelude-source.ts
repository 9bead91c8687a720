import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "../config.js";

let cached: string | undefined;

/** Compiled prelude parts (`sandbox/*.ts` → `dist/sandbox/*.js`), in the order they run. */
const PARTS = ["memory-guards.js", "capabilities.js", "prelude.js"];

/** The global through which the host binds its bridge and receives the entry object (see `readPrelude`). */
export const BIND_GLOBAL = "__awBind";

/**
 * The prelude script, read once per process. It installs the prelude and leaves one global function,
 * `__awBind(bridge)`, which the host calls once per context before any tool code runs: it deletes itself,
 * removes again what V8 re-installs in a context made from a startup snapshot, connects the prelude to
 * the host's bridge (isolated-vm callbacks) and returns the entry object, which the host keeps as a
 * reference. So the same script runs in each new context or is baked into a V8 startup snapshot (which
 * cannot hold host callbacks), and a context made from the snapshot only binds.
 *
 * Its parts are joined inside one function scope, so the helpers one part declares for the next (and
 * the late-bound bridge) never become globals a tool could reach; the first part's "use strict"
 * directive makes the whole scope strict (strict frames give `caller` and call sites nothing to hand
 * out). The forwarding functions take their arguments by name, never by spread: a spread would iterate
 * through `Array.prototype[Symbol.iterator]`, which tool code may have replaced by then.
 */
export function readPrelude(): string {
  cached ??= `(function () {
${PARTS.map((part) => readFileSync(join(PROJECT_ROOT, "dist", "sandbox", part), "utf8")).join("\n")}
const late = { bridge: undefined };
globalThis.__awHost = {
  log: (level, message) => late.bridge.log(level, message),
  setTimer: (id, delayMs) => late.bridge.setTimer(id, delayMs),
  clearTimer: (id) => late.bridge.clearTimer(id),
  stop: (reason) => late.bridge.stop(reason),
  capability: (id, name, argsJson) => late.bridge.capability(id, name, argsJson),
};
const entry = installPrelude(globalThis);
Object.defineProperty(globalThis, "${BIND_GLOBAL}", {
  configurable: true,
  value: function (bridge) {
    delete globalThis.${BIND_GLOBAL};
    if (late.bridge !== undefined) throw new Error("already bound");
    removeUnguardedFeatures(globalThis);
    late.bridge = bridge;
    return entry;
  },
});
})();
`;
  return cached;
}

/**
 * A description of a bound context's shape: the own keys of the global, of every object it holds and of
 * their prototypes. A context made from the startup snapshot is used only if its shape, once bound,
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
  return JSON.stringify(shape);
})()`;
