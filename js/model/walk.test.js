// The walk through the layers (js/model/walk.js) and the student view's percentages: which blocks
// are notable, their sentences, the readout and the cursor's steps. Pure: no DOM.
// The numbers below are the real model's at "[41] ␣is → ␣Ho" of the Vietnam prompt
// (rounded), where the lesson happens.
import { describe, it, expect } from "vitest";
import { notableBlocks, readout, crossing, largestRise, stepCursor, playNext, isWord, MAX_SENTENCES } from "./walk.js";
import { fmtPercentPlain } from "../lib/format.js";

/** Boundaries 0 … 6 and their names. */
const labels = ["embeddings", "block 1", "block 2", "block 3", "block 4", "block 5", "block 6"];

/** @param {Array<[string, number]|null>} tops */
const top1 = (tops) => tops.map((t) => (t ? { text: t[0], p: t[1] } : null));

describe("fmtPercentPlain: percentages a student reads", () => {
  it("whole percent from 10%, one decimal below, <0.1% for the tiny ones, never an exponent", () => {
    expect(fmtPercentPlain(0.4528)).toBe("45%");
    expect(fmtPercentPlain(0.4102)).toBe("41%");
    expect(fmtPercentPlain(0.0582)).toBe("5.8%");
    expect(fmtPercentPlain(0.094)).toBe("9.4%");
    expect(fmtPercentPlain(0.0996)).toBe("10%");
    expect(fmtPercentPlain(3.7e-33)).toBe("<0.1%");
    expect(fmtPercentPlain(0.0009)).toBe("<0.1%");
    expect(fmtPercentPlain(0.001)).toBe("0.1%");
    expect(fmtPercentPlain(0)).toBe("0%");
    expect(fmtPercentPlain(0.9971)).toBe("99.7%");
    expect(fmtPercentPlain(0.99996)).toBe(">99.9%");
    expect(fmtPercentPlain(1)).toBe("100%");
    expect(fmtPercentPlain(-0.25)).toBe("\u221225%");
    expect(fmtPercentPlain(NaN)).toBe("\u2013");
  });
});

describe("the rules", () => {
  it("a word has a letter or a digit", () => {
    expect(isWord("\u2423Ho")).toBe(true);
    expect(isWord("1889")).toBe(true);
    expect(isWord("\u2423(")).toBe(false);
    expect(isWord(".")).toBe(false);
    expect(isWord("\u237d")).toBe(false);
  });

  it("a crossing names the highest threshold passed going up, the lowest left going down", () => {
    expect(crossing(0.05, 0.2)).toEqual({ up: true, t: 0.1 });
    expect(crossing(0.05, 0.6)).toEqual({ up: true, t: 0.5 });
    expect(crossing(0.6, 0.3)).toEqual({ up: false, t: 0.5 });
    expect(crossing(0.6, 0.05)).toEqual({ up: false, t: 0.1 });
    expect(crossing(0.2, 0.4)).toBeNull();
    expect(crossing(NaN, 0.4)).toBeNull();
  });

  it("the largest rise is one block's, at least one percentage point", () => {
    expect(largestRise([0, 0.001, 0.094, 0.016, 0.453])).toBe(4);
    expect(largestRise([0.2, 0.205, 0.2])).toBe(-1);
    expect(largestRise([0.5, 0.4, 0.3])).toBe(-1);
  });
});

describe("notableBlocks: one sentence per notable block", () => {
  const walk = {
    labels,
    // the lens column's top guesses: punctuation early, then words, ␣Ho at the output
    top1: top1([
      ["\u2423is", 1],
      [".", 0.83],
      [",", 0.4],
      ["\u2423ph", 0.118],
      ["\u2423Prince", 0.133],
      ["\u2423Prince", 0.125],
      ["\u2423Ho", 0.453],
    ]),
    series: [
      { name: "the whole answer", probs: [0, 0, 0, 0, 0, 1e-12, 0.0607] },
      { name: "\u2423Ho", probs: [0, 0, 0, 0.0005, 0.094, 0.016, 0.453] },
    ],
  };

  it("the new top guesses (words only), the crossings and the biggest rises, in depth order", () => {
    const events = notableBlocks(walk);
    expect(events.map((e) => e.L)).toEqual([3, 4, 6]);
    expect(events[0]).toEqual({ L: 3, kinds: ["top"], sentence: "block 3: \u2423ph becomes the top guess, 12%" });
    expect(events[1].sentence).toBe("block 4: \u2423Prince becomes the top guess, 13%");
    expect(events[2].kinds).toEqual(["top", "cross", "rise"]);
    expect(events[2].sentence).toBe(
      "block 6: \u2423Ho becomes the top guess, 45%; \u2423Ho passes 10%; the biggest rise of the whole answer (+6 percentage points) and of \u2423Ho (+44 percentage points)",
    );
  });

  it("a probability falling below a threshold is said too", () => {
    const down = { ...walk, series: [{ name: "the whole answer", probs: [0, 0.2, 0.6, 0.3, 0.3, 0.3, 0.3] }] };
    const events = notableBlocks(down);
    const at = (/** @type {number} */ L) => events.find((e) => e.L === L)?.sentence;
    expect(at(1)).toBe("block 1: the whole answer passes 10%"); // "." is no word: no new top guess
    expect(at(2)).toBe("block 2: the whole answer passes 50%; the biggest rise of the whole answer (+40 percentage points)");
    expect(at(3)).toBe("block 3: \u2423ph becomes the top guess, 12%; the whole answer falls below 50%");
  });

  it("at most MAX_SENTENCES: every crossing and rise, then the latest top-guess changes", () => {
    const n = 20;
    const many = {
      labels: Array.from({ length: n + 1 }, (_, L) => (L ? `block ${L}` : "embeddings")),
      top1: Array.from({ length: n + 1 }, (_, L) => ({ text: `w${L}`, p: 0.2 })),
      series: [{ name: "the whole answer", probs: Array.from({ length: n + 1 }, (_, L) => (L >= 3 ? 0.3 : 0)) }],
    };
    const events = notableBlocks(many);
    expect(events.length).toBe(MAX_SENTENCES);
    expect(events[0].L).toBe(3); // the crossing and the rise are kept
    expect(events.slice(1).map((e) => e.L)).toEqual([14, 15, 16, 17, 18, 19, 20]);
  });
});

describe("the readout and the cursor", () => {
  it("the readout says the block, the top guess and each probability in percent, each number once", () => {
    const w = {
      labels,
      top1: top1([null, null, null, null, [".", 0.4], ["\u2423Prince", 0.125], ["\u2423Ho", 0.453]]),
      series: [
        { name: "the whole answer", probs: [0, 0, 0, 0, 0, 1e-12, 0.0607] },
        { name: "\u2423Ho", probs: [0, 0, 0, 0, 0.094, 0.016, 0.453] },
      ],
    };
    // at the output ␣Ho is the top guess: "␣Ho 45%" is said once, not again after the answer's
    // value (issue 32: "␣Ho 45% · the answer 6.1% · ␣Ho 45%")
    expect(readout(w, 6)).toEqual({ label: "block 6", guess: "\u2423Ho 45%", values: [{ name: "the whole answer", text: "6.1%" }] });
    // where another token is the top guess, ␣Ho's own probability is said
    expect(readout(w, 5)).toEqual({
      label: "block 5",
      guess: "\u2423Prince 13%",
      values: [
        { name: "the whole answer", text: "<0.1%" },
        { name: "\u2423Ho", text: "1.6%" },
      ],
    });
    // the same text at another probability (two tokens shown alike) is not a repeat: both stay
    expect(readout({ ...w, top1: top1([null, null, null, null, ["\u2423Ho", 0.2], null, null]) }, 4).values).toEqual([
      { name: "the whole answer", text: "0%" },
      { name: "\u2423Ho", text: "9.4%" },
    ]);
  });

  it("steps stay within the boundaries; play goes to the output and starts over from there", () => {
    expect(stepCursor(3, 1, 6)).toBe(4);
    expect(stepCursor(6, 1, 6)).toBe(6);
    expect(stepCursor(0, -1, 6)).toBe(0);
    expect(playNext(2, 6, true)).toBe(3);
    expect(playNext(5, 6, false)).toBe(6);
    expect(playNext(6, 6, false)).toBeNull();
    expect(playNext(6, 6, true)).toBe(0);
  });
});
