/**
 * web_fetch — fetches a web page and returns its readable text (core tool).
 *
 *   animaworks-tool web_fetch text https://example.com/article --max-chars 5000
 *
 * The request goes through the host's `fetch` capability: only the public internet (or what the
 * Anima's policy allows), redirects re-checked at every hop, a response size cap, a timeout.
 */
import { fetch, ToolError, type ExecutionProfile, type ToolArgs, type ToolSchema } from "@animaworks/tool";

export const EXECUTION_PROFILE: ExecutionProfile = { text: { expected_seconds: 10, timeout_seconds: 60 } };

export function get_tool_schemas(): ToolSchema[] {
  return [
    {
      name: "web_fetch_text",
      description: "Fetch a web page (http/https) and return its title and readable text, without markup.",
      input_schema: {
        type: "object",
        properties: {
          url: { type: "string", description: "The page to fetch", maxLength: 2048 },
          max_chars: { type: "integer", minimum: 100, maximum: 200_000, default: 20_000, description: "Longest text returned" },
        },
        required: ["url"],
      },
    },
  ];
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

/** Markup to plain text: drops scripts, styles and tags, keeps block breaks, decodes common entities. */
export function htmlToText(html: string): { title: string; text: string } {
  const title = decodeEntities((/<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1] ?? "").replace(/\s+/g, " ").trim());
  const text = decodeEntities(
    html
      .replace(/<(script|style|noscript|template|svg|title)[\s\S]*?<\/\1\s*>/gi, " ")
      .replace(/<!--[\s\S]*?-->/g, " ")
      .replace(/<\/?(p|div|br|li|h[1-6]|tr|section|article|header|footer|pre|blockquote)\b[^>]*>/gi, "\n")
      .replace(/<[^>]+>/g, " "),
  )
    .replace(/[ \t\f\r]+/g, " ")
    .replace(/ *\n\s*/g, "\n")
    .trim();
  return { title, text };
}

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, code: string) => {
    if (code[0] === "#") {
      const value = code[1] === "x" || code[1] === "X" ? parseInt(code.slice(2), 16) : parseInt(code.slice(1), 10);
      return Number.isFinite(value) && value > 0 && value < 0x110000 ? String.fromCodePoint(value) : whole;
    }
    return ENTITIES[code.toLowerCase()] ?? whole;
  });
}

export async function dispatch(name: string, args: ToolArgs<{ url: string; max_chars?: number }>) {
  if (name !== "web_fetch_text") throw new ToolError(`Unknown tool: ${name}`);
  const response = await fetch(args.url, { timeoutMs: 30_000, headers: { Accept: "text/html, text/plain;q=0.9" } });
  if (!response.ok) throw new ToolError(`${args.url} answered HTTP ${response.status} ${response.statusText}`);
  const type = response.headers["content-type"] ?? "";
  const { title, text } = /html/i.test(type) || /^\s*</.test(response.body) ? htmlToText(response.body) : { title: "", text: response.body };
  const max = args.max_chars ?? 20_000;
  return { url: response.url, title, text: text.length > max ? `${text.slice(0, max)}…` : text, truncated: text.length > max };
}
