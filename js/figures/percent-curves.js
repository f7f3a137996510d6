/**
 * Curves in percent over a result's boundaries, shared by the slides (the student view, the
 * detail panel's curve): the axes, the series' colours, the axis's top.
 * @module figures/percent-curves
 */
import { niceTicks, formatTick } from "../lib/colorscale.js";
import { linearScale } from "../lib/layout.js";
import { boundaryLabel } from "../model/figure-data.js";
import { PIN_COLORS } from "../model/comparison.js";
import { figureTheme } from "./theme.js";
/** @typedef {import("./painters.js").Painter} Painter */

/**
 * A slide's curve colours by series key: the pin palette (views use the same hues: lesson.css).
 * @param {string} key "answer" | "token" | "versus" | "curve" @param {"light"|"dark"} theme
 */
export function slideColor(key, theme) {
  const c = PIN_COLORS[theme === "dark" ? "dark" : "light"];
  return key === "versus" ? c[1] : key === "token" ? c[7] : c[0];
}

/**
 * Curves in percent over the result's boundaries in the box (x0, top, w, h): a y grid with
 * percent labels (0 … `yMax`), the block labels ("emb" for the embeddings), one polyline per
 * series (NaN values left out) with a dot at its end. Returns the coordinates it drew with.
 * @param {Painter} p @param {import("../model/result.js").Result} r
 * @param {Array<{key: string, probs: ArrayLike<number>}>} series
 * @param {{x0: number, top: number, w: number, h: number, yMax: number, theme: "light"|"dark"}} box
 */
export function drawPercentCurves(p, r, series, box) {
  const th = figureTheme(box.theme);
  const b = r.boundaries;
  const x = linearScale([b[0] - 0.6, b[r.k] + 0.6], [box.x0, box.x0 + box.w]);
  const y = linearScale([0, box.yMax], [box.top + box.h, box.top]);
  const { ticks, step } = box.yMax === 100 ? { ticks: [0, 25, 50, 75, 100], step: 25 } : niceTicks(0, box.yMax, 4);
  for (const t of ticks) {
    p.line(box.x0, y(t), box.x0 + box.w, y(t), t === 0 ? th.muted : th.grid, 1);
    p.text(box.x0 - 6, y(t), `${formatTick(t, step)}%`, { size: 12, anchor: "end", fill: th.muted });
  }
  const labels = b.map(boundaryLabel);
  let widest = 0;
  for (const l of labels) widest = Math.max(widest, p.measure(l, { size: 12 }));
  // every step-th boundary from the embeddings on, and the last one when it has room
  const cell = box.w / Math.max(1, r.k + 1);
  const every = Math.max(1, Math.ceil((widest + 8) / cell));
  for (let L = 0; L <= r.k; L++) {
    if (L % every && (L < r.k || (r.k % every) * cell < widest + 8)) continue;
    p.text(x(b[L]), box.top + box.h + 14, labels[L], { size: 12, anchor: "middle", fill: th.muted });
  }
  p.text(box.x0 + box.w / 2, box.top + box.h + 34, "block (emb: the embeddings, before the first block)", { size: 12.5, anchor: "middle", fill: th.muted });
  for (const c of series) {
    /** @type {Array<[number, number]>} */
    const pts = [];
    for (let L = 0; L <= r.k; L++) if (Number.isFinite(c.probs[L])) pts.push([x(b[L]), y(100 * c.probs[L])]);
    const color = slideColor(c.key, box.theme);
    p.polyline(pts, color, c.key === "token" ? 2 : 3, c.key === "token" ? "6 4" : undefined); // dashed as in the view
    const end = pts[pts.length - 1];
    if (end) p.circle(end[0], end[1], 4, color);
  }
  return { x, y };
}

/** The percent axis's top for values `v`: 100 when they reach a quarter, else a nice bound. @param {number[]} v */
export function percentTop(v) {
  const hi = Math.max(0, ...v.filter(Number.isFinite)) * 100;
  if (hi >= 25) return 100;
  const { ticks } = niceTicks(0, Math.max(hi, 0.1), 4);
  return Math.max(hi, ticks[ticks.length - 1]);
}
