import { describe, expect, it } from "vitest";
import { emptyOptions, takeGlobalOptions } from "../../src/cli/invocation.js";
import { type ArgToken, scanArgs } from "../../src/cli/options.js";

const SPEC = { "--name": "value", "--quiet": "flag", "-q": "flag" } as const;
const scan = (argv: string[], longOnly = false): ArgToken[] => [...scanArgs(argv, SPEC, { longOnly })];

describe("the option scanner every command reads its options with", () => {
  it("takes a value option's value after = or from the next token, whatever it is", () => {
    expect(scan(["--name=a", "--name", "-", "--name", "--", "--name="])).toEqual([
      { kind: "option", name: "--name", value: "a", index: 0 },
      { kind: "option", name: "--name", value: "-", index: 1 },
      { kind: "option", name: "--name", value: "--", index: 3 },
      { kind: "option", name: "--name", value: "", index: 5 },
    ]);
    expect(scan(["--name"])).toEqual([{ kind: "option", name: "--name", value: undefined, index: 0 }]);
  });

  it("tells flags, unknown options (a flag with = among them), positionals and -- apart, in order", () => {
    expect(scan(["-q", "--quiet=1", "--other=2", "-x", "-", "file", "--", "--quiet"])).toEqual([
      { kind: "option", name: "-q", value: undefined, index: 0 },
      { kind: "unknown", name: "--quiet", text: "--quiet=1", index: 1 },
      { kind: "unknown", name: "--other", text: "--other=2", index: 2 },
      { kind: "unknown", name: "-x", text: "-x", index: 3 },
      { kind: "positional", text: "-", index: 4 },
      { kind: "positional", text: "file", index: 5 },
      { kind: "end", index: 6 },
      { kind: "option", name: "--quiet", value: undefined, index: 7 },
    ]);
  });

  it("with longOnly, reads single-dash tokens as positionals", () => {
    expect(scan(["-q", "-5", "--quiet"], true).map((t) => t.kind)).toEqual(["positional", "positional", "option"]);
  });

  it("knows only the spec's own names (not Object.prototype's)", () => {
    expect(scan(["--toString", "--constructor"]).map((t) => t.kind)).toEqual(["unknown", "unknown"]);
  });
});

describe("the CLI's global options", () => {
  it("are taken wherever they stand, leaving everything else in place", () => {
    const options = emptyOptions();
    const rest = takeGlobalOptions(["greet", "--anima", "alice", "hello", "-j", "--limit", "5", "--json=1", "-jh", "--", "--anima", "bob"], options, false);
    expect(rest).toEqual(["greet", "hello", "--limit", "5", "--json=1", "-jh", "--", "--anima", "bob"]);
    expect(options).toMatchObject({ anima: "alice", json: true, help: false });
  });

  it("up to the first other token only, when leading", () => {
    const options = emptyOptions();
    expect(takeGlobalOptions(["--data-dir=/d", "--no-daemon", "list", "--anima", "x"], options, true)).toEqual(["list", "--anima", "x"]);
    expect(options).toMatchObject({ dataDir: "/d", noDaemon: true });
    expect(options.anima).toBeUndefined();
  });

  it("refuse a value option without its value", () => {
    expect(() => takeGlobalOptions(["list", "--anima"], emptyOptions(), false)).toThrow("option --anima needs a value");
  });
});
