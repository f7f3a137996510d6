/**
 * The ledger of a span of positions: the joint lens probability F_L = Π_t f_t of the span's
 * targets at every boundary, its log Σ_t log f_t, and the log ledger's segment entries
 * Σ_t (log f_t(L_{j+1}) − log f_t(L_j)), split over the span's tokens. They telescope:
 * Σ_j entries = log p(span) − log F_0. Read from the payload's `lens_logprobs`; when the span is
 * exactly the whole answer's positions, the payload's `answer` ledger is used as Python sent
 * it (under the Riemann estimator its entries are integrals, not differences). Pure: no DOM.
 * @module span
 */

/**
 * A span of positions: the anchor (where it started: the selected token) and the moving end.
 * @typedef {{anchor: number, end: number}} Span
 *
 * @typedef {object} SpanLedger
 * @property {"answer"|"positions"} source the payload's `answer` ledger, or sums of `lens_logprobs` rows
 * @property {number} lo first position of the span
 * @property {number} hi last position of the span
 * @property {number[]} positions the span's positions with a target (the ledger's tokens)
 * @property {number[]} skipped the span's positions without one
 * @property {string[]} tokens the tokens the positions predict (untrusted text)
 * @property {number} n tokens
 * @property {number} k segments
 * @property {Float64Array|import("../model/codec.js").TypedArray} contributions (k) log-probability entry of each segment
 * @property {Float64Array|import("../model/codec.js").TypedArray} split (k·n) segment j's entry of token q at [j·n + q]
 * @property {Float64Array|import("../model/codec.js").TypedArray} lensLogprobs (k+1) log F_L
 * @property {Float64Array|import("../model/codec.js").TypedArray} lensProbs (k+1) F_L
 * @property {number} sum Σ contributions (float64)
 * @property {number} logprob log p(span) at the output: log F_k
 * @property {number} logprob0 log F_0, as the lens reads the embeddings
 *
 * @typedef {{error: string, lo: number, hi: number}} SpanError
 */

/** The span's first and last positions. @param {Span} span */
export function spanBounds(span) {
  return { lo: Math.min(span.anchor, span.end), hi: Math.max(span.anchor, span.end) };
}

/**
 * The whole answer's span (anchor at its first position), or null without an answer.
 * @param {import("../model/result.js").Result} r @returns {Span|null}
 */
export function answerSpan(r) {
  const a = r.answer;
  if (!a || !a.n) return null;
  return { anchor: a.positions[0], end: a.positions[a.n - 1] };
}

/**
 * The span covers exactly the answer's positions (contiguous, in order).
 * @param {import("../model/result.js").Result} r @param {number} lo @param {number} hi
 */
export function isAnswerSpan(r, lo, hi) {
  const a = r.answer;
  if (!a || a.n !== hi - lo + 1) return false;
  return a.positions.every((t, q) => t === lo + q);
}

/**
 * A position's row of `lens_logprobs` is usable: it has a target and every boundary is finite.
 * @param {import("../model/result.js").Result} r @param {number} t
 */
function usable(r, t) {
  const lp = r.lensLogprobs;
  if (!lp || !r.hasTarget[t]) return false;
  for (let L = 0; L <= r.k; L++) if (!Number.isFinite(lp[t * (r.k + 1) + L])) return false;
  return true;
}

/**
 * The ledger of the positions lo … hi (clamped to the result).
 * @param {import("../model/result.js").Result} r @param {Span} span
 * @returns {SpanLedger|SpanError}
 */
export function spanLedger(r, span) {
  const b = spanBounds(span);
  const lo = Math.max(0, b.lo);
  const hi = Math.min(r.T - 1, b.hi);
  const k = r.k;
  if (r.answer && isAnswerSpan(r, lo, hi)) return answerLedger(r, lo, hi);
  if (!r.lensLogprobs) {
    return {
      lo,
      hi,
      error:
        "The span ledger needs a result without a contrast: with one, f is a difference of probabilities and has no log " +
        "(the payload's lens_logprobs is null). Attribute again without a contrast.",
    };
  }
  /** @type {number[]} */
  const positions = [];
  /** @type {number[]} */
  const skipped = [];
  for (let t = lo; t <= hi; t++) (usable(r, t) ? positions : skipped).push(t);
  if (!positions.length) return { lo, hi, error: "No position of this span has a target: pick positions that predict a token." };
  const lp = /** @type {import("../model/codec.js").TypedArray} */ (r.lensLogprobs);
  const n = positions.length;
  const lensLogprobs = new Float64Array(k + 1);
  const split = new Float64Array(k * n);
  const contributions = new Float64Array(k);
  positions.forEach((t, q) => {
    const row = t * (k + 1);
    for (let L = 0; L <= k; L++) lensLogprobs[L] += lp[row + L];
    for (let j = 0; j < k; j++) {
      const d = lp[row + j + 1] - lp[row + j];
      split[j * n + q] = d;
      contributions[j] += d;
    }
  });
  return {
    source: "positions",
    lo,
    hi,
    positions,
    skipped,
    tokens: positions.map((t) => targetText(r, t)),
    n,
    k,
    contributions,
    split,
    lensLogprobs,
    lensProbs: lensLogprobs.map(Math.exp),
    sum: total(contributions),
    logprob: lensLogprobs[k],
    logprob0: lensLogprobs[0],
  };
}

/**
 * The answer's span: the payload's `answer` ledger as Python sent it.
 * @param {import("../model/result.js").Result} r @param {number} lo @param {number} hi
 * @returns {SpanLedger}
 */
function answerLedger(r, lo, hi) {
  const a = /** @type {import("../model/answers.js").Ledger} */ (r.answer);
  return {
    source: "answer",
    lo,
    hi,
    positions: a.positions.slice(),
    skipped: [],
    tokens: a.tokens.slice(),
    n: a.n,
    k: r.k,
    contributions: a.logprobContributions,
    split: a.logprobSplit,
    lensLogprobs: a.lensLogprobs,
    lensProbs: a.lensProbs,
    sum: total(a.logprobContributions),
    logprob: a.logprob,
    logprob0: a.lensLogprobs[0],
  };
}

/** Σ in float64. @param {ArrayLike<number>} v */
function total(v) {
  let s = 0;
  for (let q = 0; q < v.length; q++) s += v[q];
  return s;
}

/** The token position t predicts (its target's text). @param {import("../model/result.js").Result} r @param {number} t */
function targetText(r, t) {
  const id = r.targetIds[t];
  return r.targetTokens[t] || r.tokenText[String(id)] || `<${id}>`;
}

/**
 * The span a Shift+Arrow key makes from the current one (or from the focused token).
 * @param {Span|null} span @param {number} focused the token with the keyboard focus (the anchor of a new span)
 * @param {number} step +1 or -1 @param {number} T positions
 * @returns {Span}
 */
export function extendSpan(span, focused, step, T) {
  const base = span ?? { anchor: focused, end: focused };
  return { anchor: base.anchor, end: Math.max(0, Math.min(T - 1, base.end + step)) };
}

/**
 * The largest |entries| of the split, at most `count`: [{j, q, value}], largest first.
 * @param {SpanLedger} L @param {number} count
 */
export function largestEntries(L, count) {
  const out = [];
  for (let j = 0; j < L.k; j++) for (let q = 0; q < L.n; q++) out.push({ j, q, value: L.split[j * L.n + q] });
  return out
    .filter((e) => Number.isFinite(e.value))
    .sort((a, b) => Math.abs(b.value) - Math.abs(a.value))
    .slice(0, count);
}

/**
 * The tokens a table of the split has room for: all of them when there are at most `max`,
 * else the `max` with the largest Σ_j |entry|, in the span's order.
 * @param {SpanLedger} L @param {number} max
 * @returns {number[]} token indices q
 */
export function tableTokens(L, max) {
  const all = Array.from({ length: L.n }, (_, q) => q);
  if (L.n <= max) return all;
  const weight = all.map((q) => {
    let w = 0;
    for (let j = 0; j < L.k; j++) {
      const v = L.split[j * L.n + q];
      if (Number.isFinite(v)) w += Math.abs(v);
    }
    return w;
  });
  return all
    .sort((a, b) => weight[b] - weight[a] || a - b)
    .slice(0, max)
    .sort((a, b) => a - b);
}
