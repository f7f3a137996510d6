import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import {
  formatToken,
  formatTokenParts,
  tokenUnits,
  escapeChar,
  quoteToken,
  SPACE,
  NEWLINE,
  TAB,
  EMPTY,
  ELLIPSIS,
  DOT_SPACE,
  DEFAULT_MAX_LEN,
} from "./tokens.js";

const golden = JSON.parse(readFileSync(new URL("../testing/golden.json", import.meta.url), "utf8"));

describe("formatToken mirrors iglens_viz/views/token_format.py", () => {
  it("uses the same symbols", () => {
    expect([SPACE, DOT_SPACE, NEWLINE, TAB, EMPTY, ELLIPSIS, DEFAULT_MAX_LEN]).toEqual(["\u2423", "\u00b7", "\u21b5", "\u21e5", "\u2205", "\u2026", 16]);
  });

  it("matches the docstring examples", () => {
    expect(formatToken(" the")).toBe("\u2423the");
    expect(formatToken("\n\n")).toBe("\u21b5\u21b5");
    expect(formatToken("")).toBe("\u2205");
    expect(formatToken("internationalisation", { maxLen: 8 })).toBe("interna\u2026");
  });

  it(`agrees with Python on ${golden.format_token.length} golden cases`, () => {
    const bad = [];
    for (const c of golden.format_token) {
      const got = formatToken(c.text, c.opts);
      if (got !== c.expected) bad.push({ text: c.text, opts: c.opts, got, expected: c.expected });
    }
    expect(bad).toEqual([]);
  });

  it("keeps inner spaces, marks edge spaces, escapes controls and bidi overrides", () => {
    expect(formatToken(" a b ")).toBe("\u2423a b\u2423");
    expect(formatToken(" a b ", { allSpaces: true })).toBe("\u2423a\u2423b\u2423");
    expect(formatToken("\t\r")).toBe("\u21e5\\r");
    expect(formatToken("\u202e")).toBe("\\u202e");
    expect(formatToken("\x07")).toBe("\\x07");
    expect(formatToken("a\u00a0b")).toBe("a\u237db"); // a no-break space: a mark, not a literal \xa0
    expect(formatToken("a\u2009b")).toBe("a\\u2009b");
    expect(formatToken("\u{F0000}")).toBe("\\U000f0000");
    expect(formatToken(null)).toBe(EMPTY);
    expect(formatToken(42)).toBe("42");
  });

  it("never splits an escape when truncating", () => {
    expect(formatToken("\x07\x07\x07", { maxLen: 6 })).toBe("\\x07\u2026");
    expect(formatToken("ab\x07", { maxLen: 4 })).toBe("ab\u2026");
  });

  it("rejects maxLen < 1", () => {
    expect(() => formatToken("x", { maxLen: 0 })).toThrow(RangeError);
  });

  it("escapeChar uses Python's widths", () => {
    expect(escapeChar("\n")).toBe("\\x0a");
    expect(escapeChar("\u200b")).toBe("\\u200b");
    expect(escapeChar("\u{1F600}")).toBe("\\U0001f600");
  });

  it("tokenUnits gives one unit per code point", () => {
    expect(tokenUnits(" \u{1F600} ")).toEqual([SPACE, "\u{1F600}", SPACE]);
  });

  it("formatTokenParts joins to formatToken and flags marks", () => {
    for (const c of golden.format_token) {
      const parts = formatTokenParts(c.text, c.opts);
      expect(parts.map((p) => p.text).join("")).toBe(c.expected);
    }
    expect(formatTokenParts(" the")).toEqual([
      { text: SPACE, mark: true },
      { text: "the", mark: false },
    ]);
    expect(formatTokenParts("")).toEqual([{ text: EMPTY, mark: true }]);
  });

  it("quoteToken shows the raw token faithfully", () => {
    expect(quoteToken(" Paris")).toBe('" Paris"');
    expect(quoteToken("a\nb")).toBe('"a\\nb"');
    expect(quoteToken("\u202e")).toBe('"\\u202e"');
  });
});
