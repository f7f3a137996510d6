/**
 * The colour legend, one definition for every view that has one (the token strip and the
 * layer heatmap): a title, a gradient bar, and ticks (nice numbers, or segment labels for an
 * ordinal scale).
 * @module views/legend
 */
import { h, clear } from "../lib/dom.js";
import { legendTicks, cssGradient } from "../lib/colorscale.js";

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
 * @param {import("../lib/colorscale.js").Scale} scale
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
    const present = !!el.closest?.(".iglens-present");
    marks = fitTicks(legendTicks(scale, 3), present ? 220 : 150, present ? 8.6 : 5.8);
  }
  for (const { t, label } of marks) {
    const tick = h("span", { class: "iglens-legend-tick", text: label });
    tick.style.left = `${(100 * t).toFixed(2)}%`;
    ticks.appendChild(tick);
  }
  el.appendChild(h("span", { class: "iglens-legend-title", text: title }));
  el.appendChild(h("div", { class: "iglens-legend-scale" }, bar, ticks));
}

/**
 * The numeric ticks whose labels fit the bar without touching: every tick when they fit,
 * else every second (third, …) counted from 0 (or the middle one), so that a symmetric
 * scale keeps 0 and its ends ("−0.4 0 0.4" rather than "−0.4−0.2 0 0.2 0.4"). The first
 * label is drawn left-aligned at its tick and the last right-aligned (widget.css), the
 * others centred.
 * @template {{t: number, label: string}} T
 * @param {T[]} marks ascending @param {number} width the bar's width (px)
 * @param {number} charW a label character's width (px) @param {number} [gap] px between labels
 * @returns {T[]}
 */
export function fitTicks(marks, width, charW, gap = 5) {
  if (marks.length <= 2) return marks;
  const zero = marks.findIndex((m) => m.label === "0");
  const centre = zero >= 0 ? zero : Math.floor(marks.length / 2);
  /** @param {T[]} kept */
  const fits = (kept) => {
    let right = -Infinity;
    return kept.every((m, q) => {
      const w = labelWidth(m.label, charW);
      const x = m.t * width;
      const left = q === 0 ? x : q === kept.length - 1 ? x - w : x - w / 2;
      const ok = left >= right + gap;
      right = left + w;
      return ok;
    });
  };
  for (let stride = 1; stride < marks.length; stride++) {
    const kept = marks.filter((_, q) => (q - centre) % stride === 0);
    if (kept.length >= 2 && fits(kept)) return kept;
  }
  return [marks[0], marks[marks.length - 1]];
}

/** A tick label's width: tabular digits and signs of `charW`, points and commas half. @param {string} label @param {number} charW */
export const labelWidth = (label, charW) => Array.from(label).reduce((w, ch) => w + (ch === "." || ch === "," ? charW / 2 : charW), 0);
