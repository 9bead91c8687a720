import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { endpointPaths } from "../../src/endpoint/paths.js";
import { fuzzParameters } from "../property/settings.js";

// endpointPaths names its files by appending to the normalized endpoint folder (the thin client's
// served path pays for every join): the names must be the ones join would give, for any data dir a
// caller resolves and any machine name, including names that sanitize to "." or "..".

describe("endpoint paths", () => {
  it("are the endpoint folder joined with the machine's file names", () => {
    const segment = fc.oneof(fc.constantFrom(".", "..", "", "state", "a b", "x/"), fc.string({ maxLength: 6 }));
    const dataDir = fc.array(segment, { maxLength: 5 }).map((parts) => join("/", ...parts));
    const machine = fc.oneof(fc.constantFrom("", ".", "..", "...", "vm", "host/../x", "é.local"), fc.string({ maxLength: 80 }));
    fc.assert(
      fc.property(dataDir, machine, (dir, hostname) => {
        const paths = endpointPaths(dir, hostname);
        const name = hostname.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 64) || "localhost";
        expect(paths.dir).toBe(join(dir, "state", "animaworks-tool", "endpoint"));
        for (const [key, suffix] of [
          ["socket", "sock"],
          ["lock", "lock"],
          ["starting", "starting"],
          ["log", "log"],
          ["noticed", "daemon-noticed"],
        ] as const) {
          expect(paths[key]).toBe(join(paths.dir, `${name}.${suffix}`));
        }
      }),
      fuzzParameters(300),
    );
  });
});
