/**
 * The logit-lens grid as a figure (PNG / SVG): the top-1 lens token of every cell, coloured.
 * @module figures/grid
 */
import { formatToken } from "../lib/tokens.js";
import { hexToRgb, rgbToHex, textColorFor } from "../lib/colorscale.js";
import { topAt, idText } from "../model/result.js";
import { cellValue, gridScale, boundaryLabel } from "../model/figure-data.js";
import { lensGridName } from "../model/lens-name.js";
import { figureTheme } from "./theme.js";
import { titleLines, drawTitle } from "./titles.js";
import { drawLegendBar } from "./legend.js";
/** @typedef {import("./painters.js").Painter} Painter */

/**
 * The logit-lens grid as a figure: columns [first, last] (positions) × every boundary.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("../model/result.js").Result} r
 * @param {{theme: "light"|"dark", columns: [number, number], mode: "probability"|"contribution", selected?: number}} o
 */
export function gridFigure(make, r, o) {
  const th = figureTheme(o.theme);
  const [first, last] = o.columns;
  const colW = 68,
    rowH = 18,
    labelW = 52;
  const lines = titleLines(r, lensGridName(r.lens));
  lines.push(
    `top-1 lens token after each block; colour: ${o.mode === "contribution" ? `IG-Lens contribution to ${r.targetName}` : "top-1 probability"}; bold: the target` +
      (first > 0 || last < r.T - 1 ? ` \u00b7 positions ${first}\u2013${last} of ${r.T}` : ""),
  );
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const headerH = 22,
    footerH = 22;
  const ncol = last - first + 1;
  const W = Math.max(560, 16 + labelW + ncol * colW + 16);
  const H = titleH + headerH + (r.k + 1) * rowH + footerH + 60;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const scale = gridScale(r, o.mode, o.theme);
  const x0 = 16 + labelW;
  const y0 = titleH + headerH;
  const nanRgb = hexToRgb(th.nan);
  for (let i = first; i <= last; i++) {
    const x = x0 + (i - first) * colW;
    p.text(x + colW / 2, titleH + headerH / 2, formatToken(r.tokens[i], { maxLen: 9 }), {
      size: 11.5,
      weight: 600,
      anchor: "middle",
      fill: i >= r.answerStart ? th.answer : th.fg,
    });
    for (let j = 0; j <= r.k; j++) {
      const y = y0 + j * rowH;
      const rgb = scale.rgb(cellValue(r, i, j, o.mode)) ?? nanRgb;
      p.rect(x, y, colW - 1, rowH - 1, rgbToHex(rgb));
      const t = topAt(r, i, j, 1)[0];
      if (!t) continue;
      const hit = r.hasTarget[i] && t.id === r.targetIds[i];
      p.text(x + colW / 2, y + rowH / 2, formatToken(t.text, { maxLen: 8 }), { size: 11, weight: hit ? 700 : 400, anchor: "middle", fill: textColorFor(rgb) });
    }
    const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 9 }) : "\u2013";
    p.text(x + colW / 2, y0 + (r.k + 1) * rowH + footerH / 2, tgt, { size: 11, anchor: "middle", fill: th.muted });
    if (i === o.selected) p.rect(x - 1, titleH + 1, colW + 1, headerH + (r.k + 1) * rowH + footerH - 2, "none", th.accent, 2);
  }
  for (let j = 0; j <= r.k; j++) p.text(x0 - 8, y0 + j * rowH + rowH / 2, boundaryLabel(r.boundaries[j]), { size: 10.5, anchor: "end", fill: th.muted });
  p.text(16, titleH + headerH / 2, "block", { size: 10.5, fill: th.muted });
  p.text(16, y0 + (r.k + 1) * rowH + footerH / 2, "\u2192 target", { size: 10.5, fill: th.muted });
  drawLegendBar(
    p,
    scale,
    o.mode === "contribution" ? `contribution to ${r.targetName}` : "top-1 probability",
    x0,
    y0 + (r.k + 1) * rowH + footerH + 12,
    220,
    th,
  );
  return p;
}
