/**
 * Several results side by side, and pinned positions (docs/widget-protocol.md: the
 * `comparison`, `pinned` and `view` traits). Pure: no DOM.
 *
 * - `comparison`: `{}` (one result), or `{labels, results, limit, result_id}`: one label per result
 *   (`labels[0]` names the `result` trait), the other results' payloads (`results[r − 1]`
 *   is result r), the shared colour limit (max |contribution| over every result,
 *   computed by Python) and the `id` of the base result it was made with (shown only
 *   beside that result).
 * - `pinned`: a list of `[r, i]` pairs (result r, position i) whose curves the compare view
 *   overlays; a bare int i means `[0, i]`.
 * @module comparison
 */
import { decodeResult } from "./result.js";
import { isObject, answerTrait } from "./answer-trait.js";
import { VIEWS } from "./protocol.js";

/** The view names, in the switcher's order ("lesson": the student view; iglens_viz.protocol.state.VIEWS). */
export { VIEWS };

/** The most pins the compare view keeps (one colour each). */
export const MAX_PINS = 8;

/**
 * Okabe–Ito, colour-blind-safe categorical colours for pinned curves (light, dark).
 * @type {{light: string[], dark: string[]}}
 */
export const PIN_COLORS = {
  light: ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#332288", "#6b6b6b"],
  dark: ["#56b4e9", "#ff8c42", "#2fd1a0", "#e59ccf", "#f0c94b", "#9ad0ff", "#b8a8ff", "#c9d1d9"],
};

/**
 * @typedef {object} Comparison
 * @property {import("./result.js").Result[]} results every result: [the `result` trait, ...the others]
 * @property {string[]} labels one per result ("" for a lone result)
 * @property {number} limit the shared colour limit
 * @property {boolean} multi more than one result
 * @property {string|null} error why the comparison could not be read (the lone result is still shown)
 */

/**
 * Read the `comparison` trait against the decoded `result`.
 * @param {any} raw the trait (`{}` or `{labels, results, limit}`)
 * @param {import("./result.js").Result|null} first the decoded `result` trait
 * @returns {Comparison}
 */
export function readComparison(raw, first) {
  const alone = (/** @type {string|null} */ error) => ({
    results: first ? [first] : [],
    labels: first ? [""] : [],
    limit: first ? first.contribLimit : 1,
    multi: false,
    error,
  });
  if (!first) return alone(null);
  if (!isObject(raw) || !("results" in raw)) return alone(null);
  const got = answerTrait(raw, first, "comparison");
  if (got.kind === "error") return alone(got.why);
  if (got.kind !== "mine") return alone(null); // the comparison of another result: not shown
  try {
    if (!Array.isArray(raw.results) || raw.results.length < 1) throw new TypeError("comparison.results must be a non-empty list of result payloads");
    const others = raw.results.map((/** @type {any} */ p, /** @type {number} */ q) => {
      const r = decodeResult(p);
      if (!r) throw new TypeError(`comparison.results[${q}] is not a result payload`);
      return r;
    });
    const results = [first, ...others];
    const labels = raw.labels;
    if (!Array.isArray(labels) || labels.length !== results.length || !labels.every((l) => typeof l === "string")) {
      throw new TypeError(`comparison.labels must be ${results.length} strings (one per result)`);
    }
    const limit = Number(raw.limit);
    if (!(limit > 0) || !Number.isFinite(limit)) throw new RangeError(`comparison.limit must be a positive number, got ${JSON.stringify(raw.limit)}`);
    return { results, labels: labels.slice(), limit, multi: true, error: null };
  } catch (err) {
    return alone(err instanceof Error ? err.message : String(err));
  }
}

/**
 * The shared limit of several results: max |contribution| over all of them (1 when all zero),
 * the same rule as one result's `contribLimit`.
 * @param {import("./result.js").Result[]} results
 */
export function sharedLimit(results) {
  let vmax = 0;
  for (const r of results) {
    const c = r.contributions;
    for (let n = 0; n < c.length; n++) if (Number.isFinite(c[n]) && Math.abs(c[n]) > vmax) vmax = Math.abs(c[n]);
  }
  return vmax > 0 ? vmax : 1;
}

/**
 * The `pinned` trait as valid, unique `[r, i]` pairs (at most MAX_PINS): a bare int i is
 * `[0, i]`; pairs naming a missing result, a position out of range or without a target are
 * dropped (leftovers of another result).
 * @param {any} raw
 * @param {import("./result.js").Result[]} results
 * @returns {Array<[number, number]>}
 */
export function readPins(raw, results) {
  /** @type {Array<[number, number]>} */
  const out = [];
  if (!Array.isArray(raw)) return out;
  const seen = new Set();
  for (const p of raw) {
    const pair = Array.isArray(p) ? p : [0, p];
    const [rr, i] = [Number(pair[0]), Number(pair[1])];
    if (!Number.isInteger(rr) || !Number.isInteger(i) || rr < 0 || rr >= results.length) continue;
    const r = results[rr];
    if (i < 0 || i >= r.T || !r.hasTarget[i]) continue;
    const key = `${rr}:${i}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push([rr, i]);
    if (out.length >= MAX_PINS) break;
  }
  return out;
}

/**
 * Pins with (r, i) toggled: removed when present, else appended (the oldest dropped beyond
 * MAX_PINS).
 * @param {Array<[number, number]>} pins @param {number} r @param {number} i
 * @returns {Array<[number, number]>}
 */
export function togglePin(pins, r, i) {
  const has = pins.some(([a, b]) => a === r && b === i);
  if (has) return pins.filter(([a, b]) => !(a === r && b === i));
  const next = [...pins, /** @type {[number, number]} */ ([r, i])];
  return next.length > MAX_PINS ? next.slice(next.length - MAX_PINS) : next;
}

/**
 * The cumulative contribution of position i after each boundary: [0, c_0, c_0 + c_1, …]
 * (k+1 values; the last is Σ contributions, which completeness makes Δp). Float64 sums.
 * @param {import("./result.js").Result} r @param {number} i
 * @returns {number[]}
 */
export function cumulativeContribution(r, i) {
  const out = [0];
  let acc = 0;
  for (let j = 0; j < r.k; j++) {
    acc += r.contributions[i * r.k + j];
    out.push(acc);
  }
  return out;
}
