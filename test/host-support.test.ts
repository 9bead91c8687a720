import { describe, expect, it } from "vitest";
import { closestName, unknownTool } from "../src/host-support.js";

/** Issue #35: a mistyped tool name gets a "did you mean", and only a likely one. */
describe("unknown tool names", () => {
  it("suggest the closest known name within a third of the name's length in edits", () => {
    expect(closestName("textstats", ["text_stats", "web_fetch", "file_search"])).toBe("text_stats");
    expect(closestName("web_fecth", ["text_stats", "web_fetch", "file_search"])).toBe("web_fetch");
    expect(closestName("Notes", ["notes", "nodes"])).toBe("notes");
    expect(closestName("calendar", ["text_stats", "web_fetch"])).toBeUndefined();
    expect(closestName("x", [])).toBeUndefined();
  });

  it("say it in the error, with every available tool in the hint", () => {
    const error = unknownTool("web_fecth", ["web_fetch", "text_stats"]);
    expect(error).toMatchObject({
      type: "ToolNotFound",
      message: 'unknown tool "web_fecth"; did you mean "web_fetch"?',
      hint: "available tools: text_stats, web_fetch",
    });
    expect(unknownTool("zzz_unrelated", ["web_fetch"]).message).toBe('unknown tool "zzz_unrelated"');
  });
});
