import { createRequire } from "node:module";

/**
 * The JSON Schema `format`s tool schemas may use: ajv-formats' full set, with `url` replaced.
 *
 * ajv-formats' `url` is a regular expression whose nested quantifiers backtrack on a crafted string
 * (`http://` and 80,000 colons: 14 s), and a string under a tool's schema is a caller's argument or the
 * tool's own result, checked on the host's thread (url_format_stall). The replacement is linear: no
 * whitespace, an http, https or ftp scheme, and a URL the WHATWG parser accepts with a host. Unlike the
 * expression it accepts private and loopback hosts: a format says what a string looks like; where a
 * tool may connect is the fetch capability's network policy. The other formats ajv-formats defines
 * are functions or expressions without nested unbounded quantifiers.
 */

const require = createRequire(import.meta.url);

/** The module id generated validators load the formats from (ajv/ajv.ts `standaloneRequire`). */
export const FORMATS_MODULE = "animaworks:formats";

const URL_SCHEME = /^(?:https?|ftp):\/\//i;
const WHITESPACE = /\s/u;

export function isUrl(value: string): boolean {
  if (!URL_SCHEME.test(value) || WHITESPACE.test(value)) return false;
  const url = URL.parse(value);
  return url !== null && url.hostname !== "";
}

let formats: Record<string, unknown> | undefined;

/** Every format by name, as ajv's `addFormat` takes them (and as generated validators read them). */
export function toolFormats(): Record<string, unknown> {
  formats ??= {
    ...(require("ajv-formats/dist/formats") as { fullFormats: Record<string, unknown> }).fullFormats,
    url: { type: "string", validate: isUrl },
  };
  return formats;
}
