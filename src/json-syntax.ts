/**
 * What is wrong with a JSON text, without any of the text: for files that hold secrets (config.json,
 * vault.json, shared/credentials.json), whose parse errors reach tools (getCredential) and every Anima's
 * CLI. V8's own message quotes the text around the error (`Unexpected token 'S', ..."api_key": SHARED-KE"...
 * is not valid JSON`): here only the kind of error and where it is are kept.
 */
export function jsonSyntaxProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : "";
  if (message === "Unexpected end of JSON input") return "the text ends early";
  // "Expected ',' or '}' after property value in JSON at position 19 (line 1 column 20)": V8's words for
  // the kind of error name JSON's punctuation only, never the text.
  const located =
    /^((?:Expected [^"]*? in|Unexpected non-whitespace character after|Bad control character in string literal in|Bad escaped character in|Unterminated string in) JSON) at position \d+(?: \(line (\d+) column (\d+)\))?$/.exec(
      message,
    );
  if (located) {
    const kind = lowerFirst((located[1] as string).replace(/ in JSON$/, ""));
    return located[2] !== undefined ? `${kind} at line ${located[2]} column ${located[3]}` : kind;
  }
  return "a syntax error";
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
