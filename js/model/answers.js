/**
 * The whole-answer parts of the `result` payload (docs/widget-protocol.md, "answer, versus,
 * comparison: whole answers"): `lens_logprobs`, `answer`, `versus` and `comparison`, decoded
 * and checked against the result's T and k. Pure: no DOM. A malformed part is an error the
 * answers panel reports; the rest of the result stands.
 * @module answers
 */
import { decodeArray, isPayload } from "./codec.js";
import { shapeOf } from "./payload-schema.js";

/**
 * @typedef {import("./codec.js").TypedArray} TypedArray
 *
 * @typedef {object} Ledger a whole answer's ledgers, as Python sent them
 * @property {string} text the answer as text (untrusted: insert as text only)
 * @property {string[]} tokens its n tokens (untrusted)
 * @property {number[]} positions the position predicting each token, in its own sequence
 * @property {number} n tokens
 * @property {TypedArray} tokenLogprobs (n·(k+1)) log f_i at every boundary
 * @property {TypedArray} lensLogprobs (k+1) log F_L
 * @property {TypedArray} lensProbs (k+1) F_L, the joint lens probability
 * @property {TypedArray} logprobSplit (k·n) segment j's log contribution of token i at [j·n + i]
 * @property {TypedArray} logprobContributions (k) Σ = log p − log F_0
 * @property {TypedArray} probContributions (k) Σ = p − F_0
 * @property {number} logprob log p(answer) at the output (NaN when Python sent null)
 * @property {number} prob p(answer) at the output
 * @property {number} onset block of the probability ledger's largest entry (-1 none, as when
 *   the ledger is zero at float precision: {@link probUnderflow})
 * @property {number} logprobOnset block of the log ledger's largest entry (-1 none)
 *
 * @typedef {object} AnswerComparison the differential ledger of log p(answer) − log p(versus)
 * @property {TypedArray} logprobContributions (k)
 * @property {TypedArray} probContributions (k)
 * @property {TypedArray} lensLogprobGaps (k+1) log F_L(a) − log F_L(b)
 * @property {number} logprobGap log p(a) − log p(b) at the output
 * @property {number} startLogprobGap log F_0(a) − log F_0(b): the log entries sum to logprobGap − this
 * @property {number} probGap p(a) − p(b) at the output
 * @property {number} onset the block moving the log gap most towards the output's preference (-1 none)
 * @property {number} probOnset the same rule on the probability entries (-1 when both ledgers
 *   are zero at float precision)
 *
 * @typedef {object} Answers
 * @property {TypedArray|null} lensLogprobs (T·(k+1)) log p(target) at every boundary; null with a contrast
 * @property {Ledger|null} answer
 * @property {Ledger|null} versus
 * @property {AnswerComparison|null} comparison
 */

/** @param {unknown} v @param {string} name @param {number[]} shape */
function array(v, name, shape) {
  if (!isPayload(v)) throw new TypeError(`result.${name} must be an ndarray payload`);
  let a;
  try {
    a = decodeArray(v);
  } catch (err) {
    throw new TypeError(`result.${name}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (a.shape.length !== shape.length || a.shape.some((d, q) => d !== shape[q])) {
    throw new RangeError(`result.${name} must have shape ${JSON.stringify(shape)}, got ${JSON.stringify(a.shape)}`);
  }
  return a.data;
}

/** A JSON number, or NaN for Python's null (a non-finite float). @param {unknown} v @param {string} name */
function num(v, name) {
  if (v === null) return NaN;
  if (typeof v !== "number") throw new TypeError(`result.${name} must be a number, got ${JSON.stringify(v)}`);
  return v;
}

/** A block number, -1 for none. @param {unknown} v @param {string} name */
function block(v, name) {
  if (!Number.isInteger(v) || /** @type {number} */ (v) < -1) throw new TypeError(`result.${name} must be an integer >= -1, got ${JSON.stringify(v)}`);
  return /** @type {number} */ (v);
}

/**
 * Whether a ledger's probability entries are zero at float precision (a long answer's joint
 * probability below the smallest double at every depth): Python names no onset for it (-1),
 * and every F_L it sent is 0. The log ledger still holds the answer.
 * @param {Ledger} ledger
 */
export function probUnderflow(ledger) {
  return ledger.onset < 0 && ledger.lensProbs.every((p) => p === 0);
}

/**
 * One ledger (`answer` or `versus`), or null.
 * @param {any} raw @param {number} k @param {string} name
 * @returns {Ledger|null}
 */
export function decodeLedger(raw, k, name) {
  if (raw === null || raw === undefined) return null;
  if (typeof raw !== "object" || Array.isArray(raw)) throw new TypeError(`result.${name} must be an object or null`);
  if (typeof raw.text !== "string") throw new TypeError(`result.${name}.text must be a string`);
  if (!Array.isArray(raw.tokens) || !raw.tokens.length || !raw.tokens.every((/** @type {unknown} */ t) => typeof t === "string")) {
    throw new TypeError(`result.${name}.tokens must be a non-empty list of strings`);
  }
  const n = raw.tokens.length;
  const field = (/** @type {string} */ f) => array(raw[f], `${name}.${f}`, shapeOf("ledger", f, { k, A: n })); // Python's shapes
  const positions = Array.from(field("positions"));
  if (!positions.every((t) => Number.isInteger(t) && t >= 0)) throw new RangeError(`result.${name}.positions must be positions >= 0`);
  return {
    text: raw.text,
    tokens: raw.tokens.slice(),
    positions,
    n,
    tokenLogprobs: field("token_logprobs"),
    lensLogprobs: field("lens_logprobs"),
    lensProbs: field("lens_probs"),
    logprobSplit: field("logprob_split"),
    logprobContributions: field("logprob_contributions"),
    probContributions: field("prob_contributions"),
    logprob: num(raw.logprob, `${name}.logprob`),
    prob: num(raw.prob, `${name}.prob`),
    onset: block(raw.onset, `${name}.onset`),
    logprobOnset: block(raw.logprob_onset, `${name}.logprob_onset`),
  };
}

/**
 * The differential ledger (`comparison` of the result payload), or null.
 * @param {any} raw @param {number} k
 * @returns {AnswerComparison|null}
 */
export function decodeAnswerComparison(raw, k) {
  if (raw === null || raw === undefined) return null;
  if (typeof raw !== "object" || Array.isArray(raw)) throw new TypeError("result.comparison must be an object or null");
  const field = (/** @type {string} */ f) => array(raw[f], `comparison.${f}`, shapeOf("comparison", f, { k })); // Python's shapes
  return {
    logprobContributions: field("logprob_contributions"),
    probContributions: field("prob_contributions"),
    lensLogprobGaps: field("lens_logprob_gaps"),
    logprobGap: num(raw.logprob_gap, "comparison.logprob_gap"),
    startLogprobGap: num(raw.start_logprob_gap, "comparison.start_logprob_gap"),
    probGap: num(raw.prob_gap, "comparison.prob_gap"),
    onset: block(raw.onset, "comparison.onset"),
    probOnset: block(raw.prob_onset, "comparison.prob_onset"),
  };
}

/**
 * Every whole-answer part of a result payload. `answer` positions must be positions of the
 * result (< T); `versus` positions are of its own sequence, so they are not checked; a
 * comparison needs both answers.
 * @param {Record<string, any>} raw the result payload @param {number} T @param {number} k
 * @returns {Answers}
 */
export function decodeAnswers(raw, T, k) {
  const lensLogprobs = raw.lens_logprobs == null ? null : array(raw.lens_logprobs, "lens_logprobs", shapeOf("result", "lens_logprobs", { T, k }));
  const answer = decodeLedger(raw.answer, k, "answer");
  if (answer && answer.positions.some((t) => t >= T)) throw new RangeError(`result.answer.positions must be positions of the result (< T=${T})`);
  const versus = decodeLedger(raw.versus, k, "versus");
  const comparison = decodeAnswerComparison(raw.comparison, k);
  if (comparison && (!answer || !versus)) throw new TypeError("result.comparison needs both result.answer and result.versus");
  return { lensLogprobs, answer, versus, comparison };
}

/**
 * `decodeAnswers` that never throws, as the result's fields: a part that cannot be read leaves
 * none of them, and the reason in `answersError`.
 * @param {Record<string, any>} raw @param {number} T @param {number} k
 */
export function readAnswers(raw, T, k) {
  try {
    const a = decodeAnswers(raw, T, k);
    return {
      lensLogprobs: a.lensLogprobs,
      answer: a.answer,
      versus: a.versus,
      answerComparison: a.comparison,
      answersError: /** @type {string|null} */ (null),
    };
  } catch (err) {
    return { lensLogprobs: null, answer: null, versus: null, answerComparison: null, answersError: err instanceof Error ? err.message : String(err) };
  }
}
