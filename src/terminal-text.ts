/**
 * Text that reaches an operator's terminal (the CLI's output, the host's log lines) but was written by
 * someone else: a tool, an Anima, a file name in its folder. Escaped as `\uXXXX`, such text can neither
 * move the cursor, retitle or recolour the terminal, nor disguise what it says. A leaf module: the CLI,
 * discovery and lifecycle messages use the same escapes.
 */

/** "1 record", "2 records": a count and its noun (`plural` for a noun that does not take an "s"). */
export function counted(count: number, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : plural}`;
}

/** Control characters (C0 but newline and tab, DEL, C1) and bidirectional overrides. */
const UNSAFE_IN_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** The same, and newline and tab too: a name is one token of a line. */
const UNSAFE_IN_NAME = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const escape = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/** Multi-line text (a load error, a progress message): lines stay lines, everything else is escaped. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE_IN_TEXT, escape);
}

/**
 * A name (a file or tool name, a path) put inside a line: every control character escaped, newlines and
 * tabs included, so that a file named `x⏎skipped  y: …` cannot start a report line of its own.
 */
export function printableName(name: string): string {
  return name.replace(UNSAFE_IN_NAME, escape);
}

/** Line breaks, those terminals honour beyond newline included. */
const LINE_BREAKS = /[\n\r\u000b\u000c\u0085\u2028\u2029]/g;

/**
 * Report lines joined, with every line break inside one of them escaped (`\u000a`): a line holds text
 * a tool or an Anima wrote (a load error, a tool's name, a denial's target), and a newline in it would
 * print lines of its own — a forged section for another Anima. The other control characters are
 * `terminalSafe`'s, which the CLI applies to all it prints.
 */
export function joinReportLines(lines: readonly string[]): string {
  return lines.map(oneLine).join("\n");
}

/** One line of a report, a table or a notice, with every line break inside it escaped (see joinReportLines). */
export function oneLine(text: string): string {
  return text.replace(LINE_BREAKS, escape);
}

/**
 * A log line's text for a terminal or a stream: its control characters escaped (`terminalSafe`) and its
 * line breaks too (`oneLine`), so that a tool's message can neither drive the terminal nor start a line
 * of its own, such as a forged `[error] animaworks.host (alice/…): …` about another Anima.
 */
export function logLineText(text: string): string {
  return oneLine(terminalSafe(text));
}

/** A name inside a log line (a logger, an Anima, a tool): every control character and line break escaped. */
export function logLineName(name: string): string {
  return oneLine(printableName(name));
}
