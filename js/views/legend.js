/**
 * The colour legend, one definition for every view that has one (the token strip and the
 * layer heatmap): a title, a gradient bar, and ticks (nice numbers, or segment labels for an
 * ordinal scale).
 * @module views/legend
 */
import { h, clear } from "../dom.js";
import { legendTicks, cssGradient } from "../colorscale.js";

/**
 * An empty legend element (decorative: the values are also given in words elsewhere).
 * @param {string} extraClass e.g. "iglens-strip-legend"
 */
export function createLegend(extraClass) {
  return h("div", { class: `iglens-legend ${extraClass}`, "aria-hidden": "true" });
}

/**
 * Fill a legend element: the title, a gradient bar and its ticks.
 * @param {HTMLElement} el
 * @param {import("../colorscale.js").Scale} scale
 * @param {string} title
 * @param {string[]|null} [ordinalLabels] label the ticks with these category names (first,
 *   middle and last) instead of numbers: the segment labels of an onset scale
 */
export function drawLegend(el, scale, title, ordinalLabels = null) {
  clear(el);
  const bar = h("div", { class: "iglens-legend-bar" });
  bar.style.background = cssGradient(scale);
  const ticks = h("div", { class: "iglens-legend-ticks" });
  /** @type {Array<{t: number, label: string}>} */
  let marks;
  if (ordinalLabels) {
    const n = ordinalLabels.length;
    const picks = n <= 1 ? [0] : [0, Math.round((n - 1) / 2), n - 1].filter((v, q, a) => a.indexOf(v) === q);
    marks = picks.filter((j) => j < n).map((j) => ({ t: n <= 1 ? 0.5 : j / (n - 1), label: ordinalLabels[j] }));
  } else {
    marks = legendTicks(scale, 3);
  }
  for (const { t, label } of marks) {
    const tick = h("span", { class: "iglens-legend-tick", text: label });
    tick.style.left = `${(100 * t).toFixed(2)}%`;
    ticks.appendChild(tick);
  }
  el.appendChild(h("span", { class: "iglens-legend-title", text: title }));
  el.appendChild(h("div", { class: "iglens-legend-scale" }, bar, ticks));
}
