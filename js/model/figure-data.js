/**
 * What the figures show, computed from a result: the grid's cell values and colour scales,
 * the compare view's curves and pin labels. Shared by the views (views/grid, views/compare)
 * and the exported figures (figures/), below both, so no module imports upward.
 * @module figure-data
 */
import { divergingScale, sequentialScale } from "../lib/colorscale.js";
import { formatToken } from "../lib/tokens.js";
import { contribution, topAt, idText, lensRow } from "./result.js";
import { cumulativeContribution } from "./comparison.js";

/** The grid's colourings: the top-1 token's probability, or the IG-Lens contribution. */
export const GRID_COLORS = /** @type {const} */ (["probability", "contribution"]);

/**
 * Short label of boundary j: "emb" (0), "12" (after block 12), "12.a" (after block 12's
 * attention, under sub-layer boundaries).
 * @param {number} depth
 */
export function boundaryLabel(depth) {
  if (depth === 0) return "emb";
  return Number.isInteger(depth) ? String(depth) : `${Math.ceil(depth)}.a`;
}

/**
 * The value a cell is coloured by: the top-1 probability at boundary j, or the contribution
 * of the segment that ends at boundary j (NaN at the embeddings and without a target).
 * @param {import("./result.js").Result} r @param {number} i @param {number} j
 * @param {(typeof GRID_COLORS)[number]} mode
 */
export function cellValue(r, i, j, mode) {
  if (mode === "contribution") return j > 0 && r.hasTarget[i] ? contribution(r, i, j - 1) : NaN;
  const t = topAt(r, i, j, 1)[0];
  return t ? t.p : NaN;
}

/**
 * The colour scale of a grid colouring.
 * @param {import("./result.js").Result} r @param {(typeof GRID_COLORS)[number]} mode
 * @param {"light"|"dark"} theme @param {number} [limit] contribution limit (default: the result's)
 */
export function gridScale(r, mode, theme, limit) {
  return mode === "contribution" ? divergingScale(limit ?? r.contribLimit, theme) : sequentialScale(theme, 0, 1);
}

/** The y quantities of the overlay chart. */
export const COMPARE_Y = /** @type {const} */ (["delta", "p"]);

/** "A", "B", … for result r (empty for a lone result). @param {number} r @param {boolean} multi */
export const resultLetter = (r, multi) => (multi ? String.fromCharCode(65 + (r % 26)) : "");

/**
 * The values of one curve: the cumulative contribution (k+1 values from 0 to Σ = Δp) or
 * the lens value at each boundary.
 * @param {import("./result.js").Result} r @param {number} i @param {(typeof COMPARE_Y)[number]} y
 * @returns {number[]}
 */
export function curveValues(r, i, y) {
  return y === "p" ? Array.from(lensRow(r, i)) : cumulativeContribution(r, i);
}

/**
 * A pin in words: "A [7] ' tok' → ' target'".
 * @param {import("./comparison.js").Comparison} cmp @param {number} rr @param {number} i
 * @param {number} [maxLen]
 */
export function pinText(cmp, rr, i, maxLen = 12) {
  const r = cmp.results[rr];
  const letter = resultLetter(rr, cmp.multi);
  const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen }) : "\u2013";
  return `${letter ? letter + " " : ""}[${i}] ${formatToken(r.tokens[i], { maxLen })} \u2192 ${tgt}`;
}

/** The tallest a row label's line is (px); shorter rows label every n-th row only. */
export const LABEL_LINE = 12;

/**
 * Which rows of a compare panel carry a token label: all when a row holds a line, else
 * every n-th (the live panels and the exported figure alike).
 * @param {number} T @param {number} rowH @returns {number[]}
 */
export function labelledRows(T, rowH) {
  const every = Math.max(1, Math.ceil(LABEL_LINE / Math.max(rowH, 1e-6)));
  const rows = [];
  for (let i = 0; i < T; i += every) rows.push(i);
  return rows;
}
