import { describe, expect, it } from "vitest";
import { validateSource } from "../../src/lifecycle/validate.js";

// A tool file is scanned on the host's main thread (validate, share, and refresh for every tool that
// fails to load, also inside the shared daemon and behind MCP's refresh_tools): the scan's work must grow
// with the file, not with its lines times its matches. Before: the secrets check counted newlines from
// the start of the file for every key-shaped string, and a 980 KB file of 500,000 lines and 30,000 of
// them held the daemon's event loop ≈ 3 minutes (every Anima's calls waited). These files finish within
// the test's time limit only when the scan is linear.

const LINES = 200_000;
const KEYS = 30_000;

/** LINES comment lines, then KEYS Slack-token-shaped strings, on one line (`oneLine`) or one a line. */
function secretScanLineBomb(comment: string, oneLine: boolean): string {
  const keys = Array.from({ length: KEYS }, (_, i) => `xoxb-${String(i).padStart(10, "0")}`);
  return `${comment}\n`.repeat(LINES) + (oneLine ? `${comment} ${keys.join(" ")}\n` : keys.map((key) => `${comment} ${key}\n`).join(""));
}

describe("a tool file made to make the source scan quadratic (secret_scan_line_bomb)", () => {
  for (const [fileName, comment] of [
    ["slow.ts", "//"],
    ["slow.py", "#"],
  ] as const) {
    it(`${fileName}, keys on one line: one finding for that line, in linear time`, { timeout: 20_000 }, () => {
      const findings = validateSource(fileName, secretScanLineBomb(comment, true), { staticSchemas: true }).filter((f) => f.check === "secrets");
      expect(findings.map((f) => f.line)).toEqual([LINES + 1]);
      expect(findings[0]?.message).toContain('"xoxb****"'); // masked: never the key itself
    });

    it(`${fileName}, a key a line: the first 100 at their lines and one finding counting the rest, in linear time`, { timeout: 20_000 }, () => {
      const findings = validateSource(fileName, secretScanLineBomb(comment, false), { staticSchemas: true }).filter((f) => f.check === "secrets");
      const listed = findings.filter((f) => f.message.startsWith("a Slack token"));
      expect(listed.map((f) => f.line)).toEqual(Array.from({ length: 100 }, (_, i) => LINES + 1 + i));
      expect(findings.filter((f) => f.message.startsWith("… and"))).toEqual([
        expect.objectContaining({
          line: LINES + 100,
          message: `… and ${KEYS - 100} more of a Slack token (xox…-) in the file (only the first 100 are listed)`,
        }),
      ]);
    });
  }

  it("a token-shaped run made to backtrack (jwt_backtracking_bomb): linear, and a real token is still found", { timeout: 20_000 }, () => {
    // `\beyJ[\w-]{10,}\.` tried from every `eyJ` of one run of key characters scans the rest of the run
    // each time: 7 s for 128 KB, minutes for this 1 MiB file. A real token after it is still reported.
    const token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PYcBkBDaabBc";
    const source = `// ${"-eyJ".repeat(262_000)}\nconst fixture = 1; // ${token}\n`;
    const findings = validateSource("bomb.ts", source, { staticSchemas: false }).filter((f) => f.check === "secrets");
    expect(findings).toEqual([expect.objectContaining({ line: 2, message: expect.stringContaining('a JSON Web Token is written in the file ("eyJh****")') })]);
  });

  it("lists at most 100 tokens and counts the rest, as for every known format", () => {
    const token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PYcBkBDaabBc";
    const source = Array.from({ length: 150 }, (_, i) => `// ${i} ${token}`).join("\n");
    const findings = validateSource("tokens.ts", source, { staticSchemas: false }).filter((f) => f.check === "secrets");
    expect(findings.filter((f) => f.message.startsWith("a JSON Web Token"))).toHaveLength(100);
    expect(findings.at(-1)).toMatchObject({ line: 100, message: "… and 50 more of a JSON Web Token in the file (only the first 100 are listed)" });
  });

  it("keeps each finding at the line its key is on", () => {
    const source = ["const a = 1;", "// ghp_" + "A".repeat(36), "", "/* sk-ant-" + "b".repeat(30) + " */"].join("\n");
    const lines = validateSource("lines.ts", source, { staticSchemas: false })
      .filter((f) => f.check === "secrets")
      .map((f) => f.line);
    expect(lines).toEqual([2, 4]);
  });
});
