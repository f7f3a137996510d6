// The span math and the whole-answer decoding, on the Python payload (js/testing/payload.json:
// a tiny Llama with answer=" w9 w11", versus=" w7"); every expected number was computed by
// js/testing/make_payload.py with numpy.
import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { decodeResult } from "../model/result.js";
import { spanLedger, answerSpan, isAnswerSpan, extendSpan, spanBounds, largestEntries, tableTokens } from "./span.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));
const want = golden.expected.answers;

/** @param {(raw: any) => void} [edit] */
function decoded(edit) {
  const raw = structuredClone(golden.state.result);
  if (edit) edit(raw);
  return /** @type {import("../model/result.js").Result} */ (decodeResult(raw));
}

/** @param {any} L @returns {import("./span.js").SpanLedger} */
function ok(L) {
  expect(L.error).toBeUndefined();
  return L;
}

describe("the whole answers of the payload", () => {
  it("decode into Python's values (float32, exactly)", () => {
    const r = decoded();
    expect(r.answersError).toBeNull();
    const a = /** @type {import("../model/answers.js").Ledger} */ (r.answer);
    expect(a.text).toBe(want.answer_text);
    expect(a.tokens).toEqual(want.answer_tokens);
    expect(a.positions).toEqual(want.answer_positions);
    expect(Array.from(a.logprobContributions)).toEqual(want.answer_logprob_contributions);
    expect(Array.from(a.lensProbs)).toEqual(want.answer_lens_probs);
    expect(a.logprob).toBe(want.answer_logprob);
    expect(r.versus?.text).toBe(want.versus_text);
    const c = /** @type {import("../model/answers.js").AnswerComparison} */ (r.answerComparison);
    expect(Array.from(c.logprobContributions)).toEqual(want.comparison_logprob_contributions);
    expect(c.logprobGap).toBe(want.comparison_logprob_gap);
    expect(c.onset).toBe(want.comparison_onset);
    expect(r.lensLogprobs?.length).toBe(r.T * (r.k + 1));
  });

  it("a malformed part is reported, and the rest of the result stands", () => {
    const r = decoded((raw) => {
      raw.answer.logprob_split.shape = [5, 5];
    });
    expect(r.answersError).toContain("answer.logprob_split");
    expect(r.answer).toBeNull();
    expect(r.answerComparison).toBeNull();
    expect(r.T).toBe(golden.expected.tokens.length);
    expect(decoded((raw) => (raw.versus = null)).answersError).toContain("needs both");
  });

  it("a payload from before whole answers has none (and no error)", () => {
    const r = decoded((raw) => {
      delete raw.answer;
      delete raw.versus;
      delete raw.comparison;
      delete raw.lens_logprobs;
    });
    expect([r.answer, r.versus, r.answerComparison, r.lensLogprobs, r.answersError]).toEqual([null, null, null, null, null]);
    expect(answerSpan(r)).toBeNull();
  });
});

describe("spanLedger", () => {
  it("sums a span's lens_logprobs rows: the entries, their split, F_L and the telescoping identity", () => {
    const r = decoded();
    const [lo, hi] = want.span;
    const L = ok(spanLedger(r, { anchor: lo, end: hi }));
    expect(L.source).toBe("positions");
    expect(L.positions).toEqual([1, 2, 3]);
    expect(L.tokens).toEqual(golden.expected.target_tokens.slice(lo, hi + 1));
    want.span_contributions.forEach((/** @type {number} */ v, /** @type {number} */ j) => expect(L.contributions[j]).toBeCloseTo(v, 12));
    want.span_split.forEach((/** @type {number} */ v, /** @type {number} */ q) => expect(L.split[q]).toBeCloseTo(v, 12));
    want.span_lens_probs.forEach((/** @type {number} */ v, /** @type {number} */ q) => expect(L.lensProbs[q] / v).toBeCloseTo(1, 12));
    expect(L.logprob).toBeCloseTo(want.span_logprob, 12);
    expect(L.logprob0).toBeCloseTo(want.span_logprob0, 12);
    expect(Math.abs(L.sum - (L.logprob - L.logprob0))).toBeLessThan(1e-12);
  });

  it("the same span from either end", () => {
    const r = decoded();
    const a = ok(spanLedger(r, { anchor: 3, end: 1 }));
    const b = ok(spanLedger(r, { anchor: 1, end: 3 }));
    expect(Array.from(a.contributions)).toEqual(Array.from(b.contributions));
    expect(spanBounds({ anchor: 3, end: 1 })).toEqual({ lo: 1, hi: 3 });
  });

  it("the whole answer's span is the payload's answer ledger, as Python sent it", () => {
    const r = decoded();
    const span = /** @type {import("./span.js").Span} */ (answerSpan(r));
    expect(span).toEqual({ anchor: want.answer_positions[0], end: want.answer_positions.at(-1) });
    expect(isAnswerSpan(r, span.anchor, span.end)).toBe(true);
    expect(isAnswerSpan(r, span.anchor, span.end + 1)).toBe(false);
    const L = ok(spanLedger(r, span));
    expect(L.source).toBe("answer");
    expect(L.tokens).toEqual(want.answer_tokens);
    expect(Array.from(L.contributions)).toEqual(want.answer_logprob_contributions);
    expect(Array.from(L.split)).toEqual(want.answer_logprob_split);
    expect(L.logprob).toBe(want.answer_logprob);
    expect(L.logprob0).toBe(want.answer_lens_logprob0);
    // under the prediction-aware estimator the answer's ledger is the rows' differences too
    const rows = /** @type {any} */ (
      spanLedger(
        decoded((raw) => (raw.answer = raw.versus = raw.comparison = null)),
        span,
      )
    );
    rows.contributions.forEach((/** @type {number} */ v, /** @type {number} */ j) => expect(v).toBeCloseTo(want.answer_logprob_contributions[j], 5));
  });

  it("with a contrast (lens_logprobs null) a span has no ledger; the whole answer's still has", () => {
    const r = decoded((raw) => (raw.lens_logprobs = null));
    const L = /** @type {any} */ (spanLedger(r, { anchor: 1, end: 3 }));
    expect(L.error).toContain("needs a result without a contrast");
    expect([L.lo, L.hi]).toEqual([1, 3]);
    expect(ok(spanLedger(r, /** @type {any} */ (answerSpan(r)))).source).toBe("answer");
  });

  it("leaves out positions without a target and says so", () => {
    const r = decoded();
    r.hasTarget[2] = false;
    const L = ok(spanLedger(r, { anchor: 1, end: 3 }));
    expect(L.positions).toEqual([1, 3]);
    expect(L.skipped).toEqual([2]);
    r.hasTarget[1] = r.hasTarget[3] = false;
    expect(/** @type {any} */ (spanLedger(r, { anchor: 1, end: 3 })).error).toContain("No position of this span has a target");
  });

  it("largestEntries: the split's largest |entries|, largest first", () => {
    const L = ok(spanLedger(decoded(), { anchor: 1, end: 3 }));
    const top = largestEntries(L, 2);
    const all = want.span_split.map((/** @type {number} */ v) => Math.abs(v)).sort((/** @type {number} */ a, /** @type {number} */ b) => b - a);
    expect(top.map((e) => Math.abs(e.value))).toEqual([expect.closeTo(all[0], 12), expect.closeTo(all[1], 12)]);
  });
});

describe("extendSpan (Shift+arrow keys)", () => {
  it("starts at the focused token, moves the end, keeps the anchor, stops at the ends", () => {
    expect(extendSpan(null, 4, 1, 7)).toEqual({ anchor: 4, end: 5 });
    expect(extendSpan({ anchor: 4, end: 5 }, 5, 1, 7)).toEqual({ anchor: 4, end: 6 });
    expect(extendSpan({ anchor: 4, end: 6 }, 6, 1, 7)).toEqual({ anchor: 4, end: 6 });
    expect(extendSpan({ anchor: 4, end: 4 }, 4, -1, 7)).toEqual({ anchor: 4, end: 3 });
    expect(extendSpan(null, 0, -1, 7)).toEqual({ anchor: 0, end: 0 });
  });
});

describe("tableTokens (the split table's columns)", () => {
  it("all tokens when they fit; else those with the largest Σ|entry|, in the span's order", () => {
    // k = 2 segments × n = 4 tokens, split[j·n + q]: Σ|entry| per token = 1, 5, 0.5 (NaN skipped), 3
    const split = new Float64Array([0.5, -4, 0.5, 1, -0.5, 1, NaN, -2]);
    const L = /** @type {any} */ ({ n: 4, k: 2, split });
    expect(tableTokens(L, 4)).toEqual([0, 1, 2, 3]);
    expect(tableTokens(L, 2)).toEqual([1, 3]);
    expect(tableTokens(L, 3)).toEqual([0, 1, 3]);
  });
});
