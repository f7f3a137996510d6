/**
 * The layer heatmap as a figure (PNG / SVG): its rows, the title block and the legend.
 * @module figures/heatmap
 */
import { formatToken } from "../lib/tokens.js";
import { divergingScale } from "../lib/colorscale.js";
import { thinLabels, clamp } from "../lib/layout.js";
import { contribution, idText } from "../model/result.js";
import { figureTheme } from "./theme.js";
import { titleLines, drawTitle } from "./titles.js";
import { drawLegendBar } from "./legend.js";
/** @typedef {import("./painters.js").Painter} Painter */

/**
 * The rows of an exported heatmap: all (T ≤ 80), else 60 around the selection.
 * @param {number} T @param {number} sel @returns {[number, number]}
 */
export function heatmapRows(T, sel) {
  if (T <= 80) return [0, T - 1];
  const n = 60;
  const first = clamp((sel >= 0 ? sel : 0) - 20, 0, T - n);
  return [first, first + n - 1];
}

/**
 * The layer heatmap as a figure: rows [first, last] (positions) × segments.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("../model/result.js").Result} r @param {{theme: "light"|"dark", rows: [number, number], selected?: number, limit?: number}} o
 */
export function heatmapFigure(make, r, o) {
  const th = figureTheme(o.theme);
  const [first, last] = o.rows;
  const labelW = 190;
  const colW = clamp(Math.floor(760 / Math.max(1, r.k)), 6, 28);
  const rowH = 16;
  const lines = titleLines(r, "layer heatmap");
  if (first > 0 || last < r.T - 1) lines.push(`positions ${first}\u2013${last} of ${r.T}`);
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const headerH = 22;
  const gridW = colW * r.k;
  const W = Math.max(560, 16 + labelW + gridW + 24);
  const H = titleH + headerH + (last - first + 1) * rowH + 70;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const scale = divergingScale(o.limit ?? r.contribLimit, o.theme);
  const x0 = 16 + labelW;
  const y0 = titleH + headerH;
  let widest = 0;
  for (const l of r.segmentLabels) widest = Math.max(widest, p.measure(l, { size: 10.5 }));
  for (const j of thinLabels(r.k, colW, widest + 6))
    p.text(x0 + (j + 0.5) * colW, titleH + headerH / 2, r.segmentLabels[j], { size: 10.5, anchor: "middle", fill: th.muted });
  p.text(x0 - 8, titleH + headerH / 2, "block \u2192", { size: 10.5, anchor: "end", fill: th.muted });
  const nan = th.nan;
  for (let i = first; i <= last; i++) {
    const y = y0 + (i - first) * rowH;
    for (let j = 0; j < r.k; j++) {
      p.rect(x0 + j * colW, y, colW - (colW >= 7 ? 1 : 0), rowH - 1, scale.css(contribution(r, i, j)) || nan);
    }
    if (r.hasTarget[i] && r.onset[i] >= 0 && colW >= 6) p.rect(x0 + r.onset[i] * colW + 1, y + 1, colW - 3, rowH - 3, "none", th.fg, 1.2);
    const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 10 }) : "\u2013";
    p.text(16, y + rowH / 2, String(i), { size: 10.5, fill: th.muted });
    p.text(x0 - 8, y + rowH / 2, `${formatToken(r.tokens[i], { maxLen: 10 })} \u2192 ${tgt}`, {
      size: 11.5,
      anchor: "end",
      fill: i >= r.answerStart ? th.answer : th.fg,
    });
    if (i === o.selected) p.rect(x0 - 1, y - 1, gridW + 1, rowH + 1, "none", th.accent, 2);
  }
  drawLegendBar(
    p,
    scale,
    `contribution to ${r.targetName} (outlined: onset)`,
    x0,
    y0 + (last - first + 1) * rowH + 14,
    Math.min(260, Math.max(160, gridW)),
    th,
  );
  return p;
}
