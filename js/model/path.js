/**
 * The `path` trait (docs/widget-protocol.md): the interior path of one position, computed
 * lazily by Python for the selected token (the `path` command → the `path` trait), read and
 * checked against the shown result. Pure: no DOM.
 * @module path
 */
import { answerTrait } from "./answer-trait.js";

/**
 * @typedef {object} LazyPath
 * @property {number} position
 * @property {number} m interpolation steps per segment
 * @property {Float64Array} flat f along each segment, (k·(m+1)) row-major (NaN where null)
 * @property {Float64Array|null} terms the midpoint Riemann terms (k·m), or null
 * @property {number} seconds how long Python took
 *
 * @typedef {{path: LazyPath|null, error: string|null}} PathTrait the path of the shown result, or why
 *   the trait (of this result) could not be read (Python's errors come in answers)
 */

/** @param {unknown} v */
const isInt = (v) => typeof v === "number" && Number.isInteger(v);

/**
 * A list of k rows of n numbers (null → NaN) as one flat Float64Array, or an error message.
 * @param {unknown} rows @param {number} k @param {number} n @param {string} name
 * @returns {Float64Array|string}
 */
function matrix(rows, k, n, name) {
  if (!Array.isArray(rows) || rows.length !== k) return `${name} must have one row per segment (${k})`;
  const out = new Float64Array(k * n);
  for (let j = 0; j < k; j++) {
    const row = rows[j];
    if (!Array.isArray(row) || row.length !== n) return `${name}[${j}] must have ${n} values`;
    for (let q = 0; q < n; q++) {
      const v = row[q];
      if (v !== null && typeof v !== "number") return `${name}[${j}][${q}] is not a number`;
      out[j * n + q] = v === null ? NaN : v;
    }
  }
  return out;
}

/**
 * Read the `path` trait against the result. A path of another result (its `result_id` is
 * not the result's `id`) is not shown (null, no error); one of this result that is not of the
 * documented form, or does not fit the result, is reported.
 * @param {any} trait the trait
 * @param {import("./result.js").Result|null} r
 * @returns {PathTrait}
 */
export function readPathTrait(trait, r) {
  const none = { path: null, error: null };
  if (!r) return none;
  const bad = (/** @type {string} */ why) => ({ path: null, error: `Could not read the interior path: ${why}` });
  const got = answerTrait(trait, r, "path");
  if (got.kind === "error") return bad(got.why);
  if (got.kind !== "mine") return none; // nothing, or another result's
  const raw = got.raw;
  if (!isInt(raw.position) || raw.position < 0) return bad("position must be an integer >= 0");
  if (!isInt(raw.steps) || raw.steps < 1) return bad("steps must be an integer >= 1");
  if (!Array.isArray(raw.labels) || raw.labels.some((/** @type {unknown} */ l) => typeof l !== "string")) return bad("labels must be strings");
  if (raw.position >= r.T) return bad(`position ${raw.position}, the result has ${r.T} positions`);
  if (raw.labels.length !== r.k || raw.labels.some((/** @type {string} */ l, /** @type {number} */ j) => l !== r.segmentLabels[j]))
    return bad("its segment labels are not the result's");
  if (isInt(raw.target_id) && raw.target_id !== r.targetIds[raw.position]) return bad(`target id ${raw.target_id}, the result's ${r.targetIds[raw.position]}`);
  const m = raw.steps;
  const flat = matrix(raw.path, r.k, m + 1, "path");
  if (typeof flat === "string") return bad(flat);
  let terms = null;
  if (raw.terms !== null && raw.terms !== undefined) {
    const t = matrix(raw.terms, r.k, m, "terms");
    if (typeof t === "string") return bad(t);
    terms = t;
  }
  const seconds = typeof raw.seconds === "number" ? raw.seconds : NaN;
  return { path: { position: raw.position, m, flat, terms, seconds }, error: null };
}
