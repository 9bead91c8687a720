/**
 * Secret masking for logs and the audit trail (docs/design.md §7, docs/animaworks-reference.md §6 and checklist 107).
 */

export const MASK = "****";

/** Values shorter than this are not redacted from free text: a 1-3 character "secret" would blank out ordinary words. */
export const MIN_REDACTED_SECRET_CHARS = 4;

/**
 * AnimaWorks' masked form: the first four characters then `****`, or just `****` for values of four
 * characters or fewer. Counted in code points, so a surrogate pair is never cut in half.
 */
export function maskSecret(value: string): string {
  const chars = Array.from(value);
  return chars.length > 4 ? `${chars.slice(0, 4).join("")}${MASK}` : MASK;
}

/**
 * Replaces every occurrence of any known secret in `text` with `****`. Longer secrets win where they
 * overlap (a secret that contains another is removed whole, not leaving its remainder). Each secret is
 * also matched in its JSON-escaped spelling, because audit records and tool output are often JSON in
 * which a quote, backslash or control character inside a secret appears escaped.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  return secretRedactor(secrets)(text);
}

/** `redactSecrets` for many texts with the same secrets: the pattern is built once (a record's every field). */
export function secretRedactor(secrets: readonly string[]): (text: string) => string {
  const pattern = redactionPattern(secrets);
  return pattern === undefined ? (text) => text : (text) => text.replace(pattern, MASK);
}

function redactionPattern(secrets: readonly string[]): RegExp | undefined {
  const spellings = new Set<string>();
  for (const secret of secrets) {
    if (typeof secret !== "string" || Array.from(secret).length < MIN_REDACTED_SECRET_CHARS) continue;
    spellings.add(secret);
    spellings.add(JSON.stringify(secret).slice(1, -1));
  }
  if (spellings.size === 0) return undefined;
  // Alternation tries alternatives left to right at each position, so sorting longest first makes the
  // longest secret win; literals only, so the pattern cannot backtrack catastrophically.
  const alternatives = [...spellings].sort((a, b) => b.length - a.length).map(escapeRegExp);
  return new RegExp(alternatives.join("|"), "g");
}

function escapeRegExp(literal: string): string {
  return literal.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}
