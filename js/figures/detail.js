/**
 * The detail panel's charts of one position as a figure, alone or stacked below another
 * figure (`withDetail`).
 * @module figures/detail
 */
import { formatToken } from "../lib/tokens.js";
import { divergingScale, niceTicks, formatTick } from "../lib/colorscale.js";
import { thinLabels, linearScale } from "../lib/layout.js";
import { contribution, idText } from "../model/result.js";
import { boundaryLabel } from "../model/figure-data.js";
import { lensPhrase, isLogitLens } from "../model/lens-name.js";
import { recordingPainter } from "./painters.js";
import { figureTheme } from "./theme.js";
/** @typedef {import("./painters.js").Painter} Painter */

/** The detail block's heading: "detail of [i] 'tok' → 'target'". @param {import("../model/result.js").Result} r @param {number} i */
export function detailHeading(r, i) {
  const tgt = formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 24 });
  // under a fitted lens the heading says so, as the Python plots' titles do (" — shortcut lens")
  const lens = isLogitLens(r.lens) ? "" : ` \u2014 ${lensPhrase(r.lens)}`;
  return `detail of position ${i}: ${formatToken(r.tokens[i], { maxLen: 24 })} \u2192 ${tgt}${lens}`;
}

/**
 * The points of the detail figure's curve (b): the lens value after each boundary, at x =
 * the boundary's depth, in the figure's coordinates (NaN values left out).
 * @param {import("../model/result.js").Result} r @param {number} i
 * @param {(v: number) => number} x @param {(v: number) => number} y
 * @returns {Array<[number, number]>}
 */
export function detailCurvePoints(r, i, x, y) {
  /** @type {Array<[number, number]>} */
  const pts = [];
  for (let j = 0; j <= r.k; j++) {
    const v = r.lensProbs[i * (r.k + 1) + j];
    if (Number.isFinite(v)) pts.push([x(r.boundaries[j]), y(v)]);
  }
  return pts;
}

/**
 * The detail panel's charts of position i as a figure, W wide: (a) the contribution of each
 * segment (bars, the heatmap's colours) and (b) the lens value after each boundary (the
 * curve from the embeddings to the last block; its rise over a segment is the segment's
 * contribution). Token text as text only.
 * @param {Painter} p @param {import("../model/result.js").Result} r @param {number} i
 * @param {{theme: "light"|"dark", width: number}} o
 */
export function detailFigure(p, r, i, o) {
  const th = figureTheme(o.theme);
  const W = o.width;
  const left = 64,
    right = 24,
    chartH = 120;
  p.rect(0, 0, W, p.height, th.bg);
  p.line(16, 4, W - 16, 4, th.grid, 1);
  p.text(16, 22, detailHeading(r, i), { size: 14, weight: 650, fill: th.fg });
  const depth = r.boundaries[r.k] || 1;
  const x = linearScale([0, depth], [left, W - right]);
  const c = Array.from({ length: r.k }, (_, j) => contribution(r, i, j));
  // (a) bars
  const aTop = 54;
  p.text(16, aTop - 12, `(a) contribution of each segment to ${r.targetName}`, { size: 12, fill: th.muted });
  const finite = c.filter(Number.isFinite);
  const lo = Math.min(0, ...finite),
    hi = Math.max(0, ...finite);
  const { ticks: aTicks, step: aStep } = niceTicks(lo, hi === lo ? lo + 1 : hi, 3);
  const ya = linearScale([Math.min(lo, aTicks[0]), Math.max(hi, aTicks[aTicks.length - 1])], [aTop + chartH, aTop]);
  for (const t of aTicks) p.text(left - 6, ya(t), formatTick(t, aStep), { size: 10.5, anchor: "end", fill: th.muted });
  p.line(left, ya(0), W - right, ya(0), th.grid, 1);
  const scale = divergingScale(r.contribLimit, o.theme);
  for (let j = 0; j < r.k; j++) {
    if (!Number.isFinite(c[j])) continue;
    const x0 = x(r.boundaries[j]),
      x1 = x(r.boundaries[j + 1]);
    const y0 = ya(0),
      y1 = ya(c[j]);
    p.rect(x0 + 1, Math.min(y0, y1), Math.max(1, x1 - x0 - 2), Math.max(0.5, Math.abs(y1 - y0)), scale.css(c[j]) || th.nan, th.fg, 0.5);
  }
  // (b) the curve
  const bTop = aTop + chartH + 44;
  p.text(16, bTop - 12, `(b) ${r.targetName} after block L`, { size: 12, fill: th.muted });
  const lens = Array.from({ length: r.k + 1 }, (_, j) => r.lensProbs[i * (r.k + 1) + j]).filter(Number.isFinite);
  const { ticks: bTicks, step: bStep } = niceTicks(Math.min(0, ...lens), Math.max(1e-9, ...lens), 3);
  const yb = linearScale([Math.min(0, bTicks[0]), Math.max(...lens, bTicks[bTicks.length - 1])], [bTop + chartH, bTop]);
  for (const t of bTicks) p.text(left - 6, yb(t), formatTick(t, bStep), { size: 10.5, anchor: "end", fill: th.muted });
  p.line(left, yb(0), W - right, yb(0), th.grid, 1);
  const pts = detailCurvePoints(r, i, x, yb);
  p.polyline(pts, th.accent, 2);
  for (const [cx, cy] of pts) p.circle(cx, cy, 2.5, th.accent);
  // the x axis: boundary depths
  let widest = 0;
  for (const d of r.boundaries) widest = Math.max(widest, p.measure(boundaryLabel(d), { size: 10.5 }));
  const slot = (W - left - right) / Math.max(1, r.k);
  for (const j of thinLabels(r.k + 1, slot, widest + 6))
    p.text(x(r.boundaries[j]), bTop + chartH + 12, boundaryLabel(r.boundaries[j]), { size: 10.5, anchor: "middle", fill: th.muted });
  p.text(W - right, bTop + chartH + 28, "block \u2192", { size: 10.5, anchor: "end", fill: th.muted });
}

/** The detail figure's height. */
export const DETAIL_HEIGHT = 54 + 120 + 44 + 120 + 40;

/**
 * A figure with the detail panel's charts of the selected position below it (nothing added
 * when no position with a target is selected).
 * @param {(make: (w: number, h: number) => Painter) => Painter} draw the main figure
 * @param {import("../model/result.js").Result} r @param {{theme: "light"|"dark", selected: number}} o
 * @returns {(make: (w: number, h: number) => Painter) => Painter}
 */
export function withDetail(draw, r, o) {
  const i = o.selected;
  if (!(i >= 0 && i < r.T && r.hasTarget[i])) return draw;
  return (make) => {
    /** @type {ReturnType<typeof recordingPainter>|null} */
    let main = null;
    draw((w, hh) => (main = recordingPainter(w, hh)));
    const m = /** @type {ReturnType<typeof recordingPainter>} */ (/** @type {unknown} */ (main));
    const W = Math.max(m.width, 560);
    const p = make(W, m.height + DETAIL_HEIGHT);
    p.rect(0, 0, W, m.height + DETAIL_HEIGHT, figureTheme(o.theme).bg);
    m.replay(p, 0, 0);
    const detail = recordingPainter(W, DETAIL_HEIGHT);
    detailFigure(detail, r, i, { theme: o.theme, width: W });
    detail.replay(p, 0, m.height);
    return p;
  };
}
