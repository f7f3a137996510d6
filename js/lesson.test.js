// What the student view shows, read from the decoded result (js/lesson.js), on synthetic
// results of js/testing/fixture.js. Pure: no DOM.
import { describe, it, expect } from "vitest";
import { makeState } from "./testing/fixture.js";
import { decodeResult, lensRow, topAt, depthText } from "./result.js";
import { lessonData, lessonPosition, lessonSeries, COLUMN_TOP, HEADER_TOP } from "./lesson.js";

/** @param {Parameters<typeof makeState>[0]} [o] */
const result = (o = {}) => /** @type {import("./result.js").Result} */ (decodeResult(makeState({ T: 8, nBlocks: 6, ...o }).result));

describe("lessonPosition", () => {
  it("the selection, else the answer's first position, else the last position", () => {
    const r = result();
    expect(lessonPosition(r, 3)).toBe(3);
    expect(lessonPosition(r, -1)).toBe(r.T - 1);
    const answered = { ...r, answer: /** @type {any} */ ({ positions: [5, 6] }) };
    expect(lessonPosition(answered, -1)).toBe(5);
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
      ["answer", "the answer"],
      ["versus", "the other answer"],
    ]);
  });

  it("lens values that are differences (a contrast) draw no token curve", () => {
    const r = result({ contrast: true });
    expect(r.signedProbs).toBe(true);
    expect(lessonSeries(r, 4)).toEqual([]);
  });
});
