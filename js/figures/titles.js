/**
 * The title block of a figure: the model, the prompt, the target and the estimator (or, on a
 * slide, what the curve is about and the lens), each token text through `formatToken`, as
 * in the header; `drawTitle` draws it.
 * @module figures/titles
 */
import { formatToken } from "../lib/tokens.js";
import { lensFact, lensPhrase } from "../model/lens-name.js";

/**
 * The prompt of a result as text: the request's prompt when it is text, else the prompt
 * tokens joined.
 * @param {import("../model/result.js").Result} r
 */
export function promptText(r) {
  const p = r.request && r.request.prompt;
  if (typeof p === "string") return p;
  return r.tokens.slice(0, Math.min(r.T, r.answerStart + 1)).join("");
}

/**
 * The typed target (and contrast) as the header shows them: through the token formatter,
 * so a leading space shows as \u2423 and a control or bidi character as a visible escape.
 * @param {import("../model/result.js").Result} r
 */
export function targetText(r) {
  const tok = (/** @type {string} */ t) => formatToken(t, { maxLen: 40 });
  return `target: ${tok(r.controls.target)}${r.hasContrast && r.controls.contrast ? ` vs ${tok(r.controls.contrast)}` : ""}`;
}

/** The title's prompt line: the prompt through `formatToken`, quoted. @param {import("../model/result.js").Result} r */
export function promptLine(r) {
  return `prompt: \u201c${formatToken(promptText(r), { maxLen: 120 })}\u201d`;
}

/**
 * The title block of a result's figure: [heading, prompt line, target/lens/estimator line].
 * Token text (the prompt, the target, the contrast) and the lens's name go through `formatToken`;
 * the lens is named only when it is not the logit lens.
 * @param {import("../model/result.js").Result} r @param {string} view e.g. "layer heatmap"
 * @returns {string[]}
 */
export function titleLines(r, view) {
  const model = r.modelName || r.family || "model";
  const target = targetText(r);
  const lens = lensFact(r.lens); // "lens: shortcut" under a fitted lens (formatted), nothing under the logit lens
  return [
    `IG-Lens ${view} \u00b7 ${model}`,
    promptLine(r),
    `${target}${lens ? ` \u00b7 ${lens}` : ""} \u00b7 estimator: ${r.estimator}, m=${r.steps} \u00b7 boundaries: ${r.controls.boundaries} \u00b7 ${r.nBlocks} blocks, ${r.T} positions`,
  ];
}

/**
 * The title block of a slide (the student view's picture, the detail panel's curve), in plain
 * words: [heading, prompt line, what the curve is about and the lens it is read through].
 * Token text goes through `formatToken`; `subject` is already formatted.
 * @param {import("../model/result.js").Result} r @param {string} view e.g. "lesson" @param {string} subject
 * @returns {string[]}
 */
export function slideTitleLines(r, view, subject) {
  const model = r.modelName || r.family || "model";
  return [`IG-Lens ${view} \u00b7 ${model}`, promptLine(r), `${subject} \u00b7 read through the ${lensPhrase(r.lens)}`];
}

/**
 * Draw the title block; returns its height.
 * @param {import("./painters.js").Painter} p @param {string[]} lines @param {import("./theme.js").Theme} th
 */
export function drawTitle(p, lines, th) {
  let y = 18;
  lines.forEach((line, q) => {
    p.text(16, y, line, { size: q === 0 ? 16 : 12.5, weight: q === 0 ? 650 : 400, fill: q === 0 ? th.fg : th.muted });
    y += q === 0 ? 22 : 18;
  });
  return y + 4;
}
