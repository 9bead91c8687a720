/*
 * What a tool's global holds. Runs inside the isolate as part of the prelude (one function scope with
 * prelude.ts, src/isolation/isolate/prelude-source.ts): the allow-list is applied when the host binds a
 * context, and the one host-only global V8 installs is taken before it goes.
 */

/**
 * Leaves on the global only what `TOOL_GLOBALS` names (and in `Intl` only `TOOL_INTL_MEMBERS`): what
 * would let a tool allocate outside the V8 heap limit, block outside the timeout or run code after the
 * call ended is gone (src/contract/tool-globals.ts `REMOVED_GLOBALS` says why for each), and so is any global
 * a newer V8 adds before it is reviewed. Also removes `ArrayBuffer.prototype.resize`, whose memory comes
 * from V8's page allocator, outside the limit (memory-guards.ts).
 *
 * Runs only when the host binds a context (`exposeBinder`), never while the prelude script runs: V8 13+
 * aborts the whole process (a failed CHECK, not an exception) when it makes a context from a startup
 * snapshot whose global lost `Atomics`, and it re-installs some removed globals in such a context anyway.
 * A key that cannot be deleted (non-configurable) throws, so the bind fails rather than leave it.
 */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
function removeUnreviewedGlobals(global: Record<string, unknown>, flavour: ContextFlavour): void {
  const allowed = new Set<PropertyKey>(flavour === "python" ? [...TOOL_GLOBALS, ...PYTHON_BOOT_GLOBALS] : TOOL_GLOBALS);
  for (const key of Reflect.ownKeys(global)) {
    if (allowed.has(key)) continue;
    // V8 installs its collector non-configurable: it cannot be deleted, only emptied for good.
    const removed =
      key === COLLECT_GARBAGE_GLOBAL ? Reflect.defineProperty(global, key, { value: undefined, writable: false }) : Reflect.deleteProperty(global, key);
    if (!removed) throw new Error(`the global ${String(key)} cannot be removed`);
  }
  const intl = global["Intl"] as Record<PropertyKey, unknown> | undefined;
  if (intl) {
    const intlAllowed = new Set<PropertyKey>([...TOOL_INTL_MEMBERS, Symbol.toStringTag]);
    for (const key of Reflect.ownKeys(intl)) {
      if (!intlAllowed.has(key) && !Reflect.deleteProperty(intl, key)) throw new Error(`Intl.${String(key)} cannot be removed`);
    }
  }
  const arrayBuffer = global["ArrayBuffer"] as { prototype: Record<string, unknown> } | undefined;
  if (arrayBuffer) delete arrayBuffer.prototype["resize"];
}

/**
 * The garbage collection V8 installs under `COLLECT_GARBAGE_GLOBAL` (a sandbox process's flag), taken at
 * bind before `removeUnreviewedGlobals` empties it, as a function of no arguments that runs a full
 * collection which also gives memory back ("last resort": V8 shrinks its spaces and releases free pages).
 * Undefined without the flag, and for a Python context, whose interpreter's FinalizationRegistry would
 * run Python finalisers outside a call after a host-requested collection.
 */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
function collectorOf(global: Record<string, unknown>, flavour: ContextFlavour): (() => void) | undefined {
  const collect = global[COLLECT_GARBAGE_GLOBAL];
  if (typeof collect !== "function" || flavour !== "tool") return undefined;
  // Own properties of an object made here: a patched Object.prototype changes nothing V8 reads.
  const options = Object.freeze({ type: "major", execution: "sync", flavor: "last-resort" });
  const apply = Reflect.apply;
  return () => void apply(collect, undefined, [options]);
}
