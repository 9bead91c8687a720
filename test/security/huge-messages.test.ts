import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { type Harness, MODES, expectError, expectHealthy, startHost } from "./harness.js";

/** Tool-controlled messages are cut before they leave the sandbox, and escaped on the terminal. */
for (const mode of MODES) {
  describe(`huge tool messages (${mode})`, () => {
    let h: Harness;
    beforeAll(() => {
      h = startHost({ mode, timeoutMs: 5_000, memoryLimitMb: 128, loadTimeoutMs: 5_000 });
      h.install("mallory", "huge_error");
      h.install("mallory", "huge_load_error");
    });
    afterAll(() => h.close());

    it("a call's error message is cut at 4,000 characters", async () => {
      const result = await h.call("mallory", "huge_error_run");
      expectError(result, "ExecutionError", /\[cut: \d+ more characters\]$/);
      expect(result.status === "error" && result.message.length).toBeLessThanOrEqual(4_000);
      // The note counts what the first cut dropped (11 MiB), not what a later pass would have.
      const dropped = Number(/\[cut: (\d+) more characters\]$/.exec(result.status === "error" ? result.message : "")?.[1]);
      expect(dropped).toBeGreaterThan(11 * 1024 * 1024 - 4_000);
      await expectHealthy(h, "mallory");
    });

    it("a load error is cut too, and `list` prints it without raw escapes", async () => {
      const io = { stdout: [] as string[], stderr: [] as string[] };
      const code = await main(["--data-dir", h.data.dir, "--anima", "mallory", "list"], { stdout: (t) => io.stdout.push(t), stderr: (t) => io.stderr.push(t) });
      expect(code).toBe(0);
      const text = io.stdout.join("\n");
      expect(text).toMatch(/huge_load_error/);
      expect(text).not.toMatch(/\u001b/);
      expect(text).toMatch(/\\u001b/);
      expect(text.length).toBeLessThan(20_000);
    });
  });
}
