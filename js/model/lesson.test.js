// What the student view shows, read from the decoded result (js/model/lesson.js), on synthetic
// results of js/testing/fixture.js (and the opening position on the Python payload). Pure: no DOM.
import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { makeState } from "../testing/fixture.js";
import { decodeResult, lensRow, topAt, depthText } from "./result.js";
import { lessonData, lessonPosition, openingPosition, lessonSeries, COLUMN_TOP, HEADER_TOP } from "./lesson.js";

/** @param {Parameters<typeof makeState>[0]} [o] */
const result = (o = {}) => /** @type {import("./result.js").Result} */ (decodeResult(makeState({ T: 8, nBlocks: 6, ...o }).result));

// The Vietnam lesson's tokens (the chat template, then the answer "The capital of Vietnam is
// Hoi An."): the answer's first four targets repeat the question's words.
const PROMPT = ["<|im_start|>", "user", "\n", "What", " is", " the", " capital", " of", " Vietnam", "?", "<|im_end|>", "\n", "<|im_start|>", "assistant", "\n"];
const ANSWER = ["The", " capital", " of", " Vietnam", " is", " Ho", "i", " An", ".", "<|im_end|>"];
/** @param {string[]} answer @param {Parameters<typeof makeState>[0]} [o] */
const asked = (answer, o = {}) => {
  const tokens = [...PROMPT, ...answer];
  return result({ T: tokens.length, tokens, promptLength: PROMPT.length, ...o });
};

describe("lessonPosition: the selection, else where the result opens", () => {
  it("the selection while there is one", () => {
    expect(lessonPosition(asked(ANSWER), 3)).toBe(3);
  });

  it("none (Escape): the answer's first content token, as Python opens the widget (issue 32)", () => {
    const r = asked(ANSWER);
    expect(r.answerStart).toBe(PROMPT.length - 1); // "\n" predicts "The"
    // "The", " capital", " of", " Vietnam", " is" are the question's words (any case, any
    // leading space): the first target that is not is " Ho", predicted at " is"
    const at = PROMPT.length + ANSWER.indexOf(" is");
    expect(r.tokens[at]).toBe(" is");
    expect(r.targetTokens[at]).toBe(" Ho");
    expect(openingPosition(r)).toBe(at);
    expect(lessonPosition(r, -1)).toBe(at);
  });

  it("a special token is never the point; an answer of the question's words opens where the answer starts", () => {
    expect(openingPosition(asked(["<|im_end|>", " Hanoi", "."]))).toBe(PROMPT.length); // past <|im_end|>: " Hanoi"
    expect(openingPosition(asked(["The", " capital", "?"]))).toBe(PROMPT.length - 1);
  });

  it("Python's own opening of the tiny Llama's payload (js/testing/payload.json: the widget's selection)", () => {
    const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));
    expect(openingPosition(/** @type {import("./result.js").Result} */ (decodeResult(golden.state.result)))).toBe(golden.state.selected);
  });

  it("without an answer: the last position, or the nearest earlier one with a target", () => {
    const r = result();
    expect(r.answerStart).toBe(r.T);
    expect(openingPosition(r)).toBe(r.T - 1);
    expect(openingPosition(result({ lastHasNoTarget: true }))).toBe(r.T - 2);
  });
});

describe("lessonData", () => {
  it("the column: every boundary's top tokens, named by depth; the header: the output's top 5", () => {
    const r = result();
    const d = lessonData(r, 4);
    expect(d.column.map((c) => c.label)).toEqual(r.boundaries.map(depthText));
    d.column.forEach((c, L) => expect(c.top.map((g) => g.raw)).toEqual(topAt(r, 4, L, COLUMN_TOP).map((t) => t.text)));
    expect(d.top.map((g) => g.p)).toEqual(topAt(r, 4, r.k, HEADER_TOP).map((t) => t.p));
    expect(d.top.filter((g) => g.isTarget).every((g) => g.raw === r.tokenText[String(r.targetIds[4])])).toBe(true);
    expect(d.walk.top1.map((t) => t?.p)).toEqual(d.column.map((c) => c.top[0]?.p));
  });

  it("without a whole answer the token is the subject; a one-token answer at the position is not drawn twice", () => {
    const r = result();
    const alone = lessonSeries(r, 4);
    expect(alone.map((c) => c.key)).toEqual(["token"]);
    expect(Array.from(alone[0].probs)).toEqual(Array.from(lensRow(r, 4)));
    const probs = new Float32Array(r.k + 1).fill(0.5);
    const one = { ...r, answer: /** @type {any} */ ({ text: "x", n: 1, positions: [4], lensProbs: probs }) };
    expect(lessonSeries(one, 4).map((c) => c.key)).toEqual(["answer"]);
    expect(lessonSeries(one, 3).map((c) => c.key)).toEqual(["answer", "token"]);
    const versus = { ...one, versus: /** @type {any} */ ({ text: "y", lensProbs: probs }) };
    expect(lessonSeries(versus, 4).map((c) => [c.key, c.name])).toEqual([
      ["answer", "the whole answer"],
      ["versus", "the other answer"],
    ]);
  });

  it("lens values that are differences (a contrast) draw no token curve", () => {
    const r = result({ contrast: true });
    expect(r.signedProbs).toBe(true);
    expect(lessonSeries(r, 4)).toEqual([]);
  });
});
