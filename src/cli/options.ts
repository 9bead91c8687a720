/**
 * The one reader of command-line options (the CLI's own options, `submit`/`jobs`/`serve`, `daemon`,
 * `audit`, `validate`): it splits argv into known options, unknown option-like tokens, positionals and
 * the `--` marker; each command says what those mean for it (its own messages). An action's own flags are
 * typed by its schema instead (flags.ts).
 *
 * Hand-written rather than node:util's parseArgs: the thin client (src/cli/client.ts) reads the
 * CLI's options on every call, and parseArgs costs ≈ 0.5 ms to load there (a call through a running
 * host costs ≈ 13 ms in all); nor does parseArgs keep unknown options in place, which the CLI's global
 * options need (they may stand among an action's flags). So this module imports nothing.
 *
 * Rules: an option is a token starting with `-` (not `-` alone, not `--`); its name is the token up to
 * any `=`. A known `value` option takes the text after `=`, else the next token whatever it is (so
 * `--args-file -` and `--anima=` work); a known `flag` is the exact token (`--json=1` is not one).
 */
export type OptionKind = "value" | "flag";

/** Known options by their full spelling (`--anima`, `-j`). */
export type OptionSpec = Readonly<Record<string, OptionKind>>;

export type ArgToken = { index: number } & (
  | {
      kind: "option";
      name: string;
      /** A value option's value (undefined when argv ended first); a flag's is always undefined. */
      value: string | undefined;
    }
  /** An option-like token that is not a known option (or a flag written with `=`); `name` is it up to any `=`. */
  | { kind: "unknown"; name: string; text: string }
  | { kind: "positional"; text: string }
  /** `--`; the tokens after it are scanned on (as positionals and options alike) unless the reader stops. */
  | { kind: "end" }
);

export interface ScanOptions {
  /** Only tokens starting with `--` are options; `-x` is a positional. Default: false. */
  longOnly?: boolean;
}

/** The tokens of `argv` in order; `index` is where each starts in argv (a reader may stop and take `argv.slice(index)`). */
export function* scanArgs(argv: readonly string[], spec: OptionSpec, scan: ScanOptions = {}): Generator<ArgToken> {
  for (let index = 0; index < argv.length; index++) {
    const text = argv[index] as string;
    if (text === "--") {
      yield { kind: "end", index };
      continue;
    }
    if (!text.startsWith(scan.longOnly ? "--" : "-") || text === "-") {
      yield { kind: "positional", text, index };
      continue;
    }
    const eq = text.indexOf("=");
    const name = eq >= 0 ? text.slice(0, eq) : text;
    const kind = Object.hasOwn(spec, name) ? spec[name] : undefined;
    if (kind === "value") {
      const start = index;
      const value = eq >= 0 ? text.slice(eq + 1) : argv[++index];
      yield { kind: "option", name, value, index: start };
    } else if (kind === "flag" && eq < 0) {
      yield { kind: "option", name, value: undefined, index };
    } else {
      yield { kind: "unknown", name, text, index };
    }
  }
}
