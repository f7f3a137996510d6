/**
 * The compare view as a figure (PNG / SVG): the pinned curves on shared axes, their key, and
 * every result's heatmap (the shared contribution bitmap) on the shared colour scale.
 * @module figures/compare
 */
import { formatToken } from "../lib/tokens.js";
import { divergingScale, hexToRgb, niceTicks, formatTick } from "../lib/colorscale.js";
import { linearScale } from "../lib/layout.js";
import { curveValues, pinText, resultLetter, labelledRows } from "../model/figure-data.js";
import { PIN_COLORS } from "../model/comparison.js";
import { contributionBitmap } from "../paint/bitmap.js";
import { figureTheme } from "./theme.js";
import { titleLines, drawTitle, promptText, targetText } from "./titles.js";
import { drawLegendBar } from "./legend.js";
/** @typedef {import("./painters.js").Painter} Painter */

/**
 * The compare view as a figure: the pinned curves on shared axes, their key, and every
 * result's heatmap on the shared colour scale.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("../model/comparison.js").Comparison} cmp
 * @param {{theme: "light"|"dark", pins: Array<[number, number]>, y: "delta"|"p", selected?: number}} o
 */
export function compareFigure(make, cmp, o) {
  const th = figureTheme(o.theme);
  const r0 = cmp.results[0];
  const lines = titleLines(r0, cmp.multi ? "comparison" : "pinned tokens");
  if (cmp.multi) {
    lines.length = 1;
    cmp.results.forEach((r, rr) => {
      lines.push(
        `${resultLetter(rr, true)}: ${formatToken(cmp.labels[rr] || promptText(r), { maxLen: 70 })} \u00b7 prompt \u201c${formatToken(promptText(r), { maxLen: 60 })}\u201d \u00b7 ${targetText(r)} \u00b7 ${r.estimator}, m=${r.steps}`,
      );
    });
  }
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const W = 900;
  const chartH = 260;
  const pins = o.pins.length
    ? o.pins
    : o.selected !== undefined && o.selected >= 0 && r0.hasTarget[o.selected]
      ? [/** @type {[number, number]} */ ([0, o.selected])]
      : [];
  const keyH = 18 * Math.ceil(pins.length / 2) + 8;
  const panelH = 300;
  const H = titleH + chartH + keyH + 40 + panelH + 70;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  // chart
  const M = { left: 70, right: 24, top: titleH + 8, bottom: titleH + chartH - 36 };
  let maxDepth = 1;
  for (const r of cmp.results) maxDepth = Math.max(maxDepth, r.boundaries[r.k]);
  const series = pins.map(([rr, i]) => ({ rr, i, vals: curveValues(cmp.results[rr], i, o.y) }));
  let lo = 0,
    hi = 0;
  for (const c of series)
    for (const v of c.vals)
      if (Number.isFinite(v)) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
  if (hi - lo < 1e-9) {
    lo -= 0.05;
    hi += 0.05;
  }
  const pad = 0.06 * (hi - lo);
  const x = linearScale([0, maxDepth], [M.left, W - M.right]);
  const y = linearScale([lo - pad, hi + pad], [M.bottom, M.top]);
  const yt = niceTicks(lo - pad, hi + pad, 5);
  for (const t of yt.ticks) {
    p.line(M.left, y(t), W - M.right, y(t), t === 0 ? th.muted : th.grid, 1);
    p.text(M.left - 6, y(t), formatTick(t, yt.step), { size: 11, anchor: "end", fill: th.muted });
  }
  for (const t of niceTicks(0, maxDepth, 12).ticks) {
    if (!Number.isInteger(t)) continue;
    p.line(x(t), M.bottom, x(t), M.bottom + 4, th.muted, 1);
    p.text(x(t), M.bottom + 14, String(t), { size: 11, anchor: "middle", fill: th.muted });
  }
  p.text((M.left + W - M.right) / 2, M.bottom + 30, "block L (state after block L; 0 = embeddings)", { size: 11.5, anchor: "middle", fill: th.muted });
  p.text(16, M.top - 2, o.y === "p" ? r0.targetName : "cumulative \u0394p", { size: 11.5, fill: th.muted });
  const colors = PIN_COLORS[o.theme === "dark" ? "dark" : "light"];
  series.forEach((c, q) => {
    const r = cmp.results[c.rr];
    /** @type {Array<[number, number]>} */
    const pts = [];
    for (let j = 0; j <= r.k; j++) if (Number.isFinite(c.vals[j])) pts.push([x(r.boundaries[j]), y(c.vals[j])]);
    const color = o.pins.length ? colors[q % colors.length] : th.fg;
    p.polyline(pts, color, 2.2, o.pins.length ? undefined : "5 4");
    const end = pts[pts.length - 1];
    if (end) p.circle(end[0], end[1], 3.2, color);
  });
  // key
  let ky = titleH + chartH + 6;
  series.forEach((c, q) => {
    const kx = 70 + (q % 2) * 400;
    if (q > 0 && q % 2 === 0) ky += 18;
    const color = o.pins.length ? colors[q % colors.length] : th.fg;
    p.line(kx, ky, kx + 22, ky, color, 3);
    p.text(kx + 28, ky, pinText(cmp, c.rr, c.i, 14) + (o.pins.length ? "" : " (selected)"), { size: 11.5, fill: th.fg });
  });
  // panels on the shared scale
  const top = titleH + chartH + keyH + 28;
  const n = cmp.results.length;
  const pw = Math.floor((W - 32 - 16 * (n - 1)) / n);
  const scale = divergingScale(cmp.limit, o.theme);
  const nanRgb = hexToRgb(th.nan);
  cmp.results.forEach((r, rr) => {
    const px = 16 + rr * (pw + 16);
    p.text(
      px,
      top,
      `${cmp.multi ? resultLetter(rr, true) + ": " : ""}${formatToken(cmp.labels[rr] || `${r.T} positions \u00d7 ${r.k} segments`, { maxLen: 50 })}`,
      { size: 12, weight: 600, fill: th.fg },
    );
    const labelW = Math.min(100, Math.floor(pw * 0.3)); // the rows' token labels, as text
    const rowH = (panelH - 20) / r.T;
    // the views' bitmap; where a canvas cannot draw (no 2D context) the painter shows its placeholder
    const bitmap = contributionBitmap(r, scale, nanRgb) ?? document.createElement("canvas");
    p.image(bitmap, px + labelW, top + 12, pw - labelW, panelH - 20);
    const size = Math.min(11, Math.max(8, rowH - 2));
    for (const i of labelledRows(r.T, rowH))
      p.text(px + labelW - 4, top + 12 + (i + 0.5) * rowH, formatToken(r.tokens[i], { maxLen: 12 }), { size, anchor: "end", fill: th.fg });
    pins.forEach(([pr, pi], q) => {
      if (pr !== rr) return;
      p.rect(px + labelW - 2, top + 12 + pi * rowH, 2, Math.max(2, rowH), o.pins.length ? colors[q % colors.length] : th.fg);
    });
  });
  drawLegendBar(
    p,
    scale,
    `contribution to ${r0.targetName}${cmp.multi ? " (one scale for all results)" : ""}; rows: positions, columns: segments`,
    16,
    top + panelH + 6,
    260,
    th,
  );
  return p;
}
