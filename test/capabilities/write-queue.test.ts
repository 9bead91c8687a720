import { describe, expect, it } from "vitest";
import { serialised } from "../../src/capabilities/write-queue.js";

/** A promise and the function that settles it: the test decides when an operation ends. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = (): void => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe("write queue (one Anima's changes run one at a time)", () => {
  it("runs the operations of one directory one at a time, in call order; a failed one lets the next run", async () => {
    const log: string[] = [];
    const first = gate();
    const a = serialised("/animas/eve", async () => {
      log.push("a starts");
      await first.opened;
      log.push("a ends");
      throw new Error("a failed");
    });
    const b = serialised("/animas/eve", async () => {
      log.push("b runs");
      return "b";
    });
    // Another Anima's directory does not wait for eve's.
    expect(await serialised("/animas/bob", async () => "bob")).toBe("bob");
    expect(log).toEqual(["a starts"]);
    first.open();
    await expect(a).rejects.toThrow("a failed");
    expect(await b).toBe("b");
    expect(log).toEqual(["a starts", "a ends", "b runs"]);
  });
});
