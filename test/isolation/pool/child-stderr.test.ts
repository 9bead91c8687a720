import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { MAX_STDERR_LINES_PER_WINDOW, forwardStderr } from "../../../src/isolation/pool/child-stderr.js";

describe("a sandbox process's stderr", () => {
  it("reaches the host's log line by line, named, with control characters escaped and a flood cut off", async () => {
    const stream = new PassThrough();
    const lines: string[] = [];
    forwardStderr(stream, 42, (message) => lines.push(message));
    stream.write("<--- Last few GCs --->\n\nhalf a ");
    stream.write("line\n\u001b[2Jclear screen\n");
    for (let i = 0; i < MAX_STDERR_LINES_PER_WINDOW * 2; i++) stream.write(`flood ${i}\n`);
    stream.end("no newline at the end");
    await new Promise((resolve) => stream.on("end", resolve));
    expect(lines.slice(0, 3)).toEqual([
      "sandbox process 42: <--- Last few GCs --->",
      "sandbox process 42: half a line",
      "sandbox process 42: \\u001b[2Jclear screen",
    ]);
    expect(lines).toHaveLength(MAX_STDERR_LINES_PER_WINDOW);
    expect(lines.at(-1)).toBe("sandbox process 42: further output dropped for up to a minute");
  });
});
