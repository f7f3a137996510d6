/**
 * Painters of the logit-lens grid (canvas + geometry + palette in, pixels out): the visible
 * cells with their top-1 labels, the row labels, the header of input tokens and the footer of
 * targets; then the hover, selection and picked-cell outlines.
 * @module views/grid/paint
 */
import { fitText } from "../../lib/dom.js";
import { textColorFor, hexToRgb } from "../../lib/colorscale.js";
import { formatToken } from "../../lib/tokens.js";
import { topAt, idText } from "../../model/result.js";
import { boundaryLabel, cellValue } from "../../model/figure-data.js";

/**
 * @typedef {object} GridFrame what one frame draws
 * @property {number} sl scrollLeft @property {number} st scrollTop
 * @property {[number, number]|null} cols visible columns @property {[number, number]|null} rows visible rows
 * @property {"probability"|"contribution"} mode @property {import("../../lib/colorscale.js").Scale} scale
 * @property {(i: number, j: number) => string} label the formatted top-1 label of a cell
 */

/**
 * The cells, row labels, header and footer of one frame.
 * @param {CanvasRenderingContext2D} c @param {import("./geometry.js").GridGeometry} g
 * @param {import("../../model/result.js").Result} r @param {import("../../lib/palette.js").Palette} pal
 * @param {GridFrame} f
 */
export function paintGrid(c, g, r, pal, f) {
  c.fillStyle = pal.bg;
  c.fillRect(0, 0, g.viewW, g.viewH);
  const bottom = g.viewH - g.footerH;
  c.textBaseline = "middle";
  c.textAlign = "center";
  if (f.cols && f.rows) paintCells(c, g, r, pal, f);
  // row labels (left gutter), over the cells' band
  c.fillStyle = pal.bg;
  c.fillRect(0, g.headerH, g.labelW, bottom - g.headerH);
  if (f.rows) {
    c.save();
    c.beginPath();
    c.rect(0, g.headerH, g.labelW, bottom - g.headerH);
    c.clip();
    c.font = `11px ${pal.font}`;
    c.textAlign = "right";
    c.fillStyle = pal.muted;
    for (let j = f.rows[0]; j <= f.rows[1]; j++) c.fillText(boundaryLabel(r.boundaries[j]), g.labelW - 8, g.headerH + j * g.rowH - f.st + g.rowH / 2);
    c.restore();
  }
  paintBands(c, g, r, pal, f);
}

/**
 * The visible cells and their labels.
 * @param {CanvasRenderingContext2D} c @param {import("./geometry.js").GridGeometry} g
 * @param {import("../../model/result.js").Result} r @param {import("../../lib/palette.js").Palette} pal @param {GridFrame} f
 */
function paintCells(c, g, r, pal, f) {
  const cols = /** @type {[number, number]} */ (f.cols);
  const rows = /** @type {[number, number]} */ (f.rows);
  const nanRgb = hexToRgb(pal.nan);
  const bottom = g.viewH - g.footerH;
  c.save();
  c.beginPath();
  c.rect(g.labelW, g.headerH, g.viewW - g.labelW, bottom - g.headerH);
  c.clip();
  for (let i = cols[0]; i <= cols[1]; i++) {
    const x = g.labelW + i * g.colW - f.sl;
    for (let j = rows[0]; j <= rows[1]; j++) {
      const y = g.headerH + j * g.rowH - f.st;
      const v = cellValue(r, i, j, f.mode);
      const rgb = f.scale.rgb(v) ?? nanRgb;
      c.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
      c.fillRect(x, y, g.colW - 1, g.rowH - 1);
      const text = f.label(i, j);
      if (!text) continue;
      const t = topAt(r, i, j, 1)[0];
      const isTarget = !!t && r.hasTarget[i] && t.id === r.targetIds[i];
      c.font = `${isTarget ? "700 " : ""}${g.rowH >= 20 ? 11.5 : 10.5}px ${pal.font}`;
      c.fillStyle = textColorFor(rgb);
      c.fillText(fitText(c, text, g.colW - 6), x + (g.colW - 1) / 2, y + g.rowH / 2);
    }
  }
  c.restore();
}

/**
 * The header (input tokens) and footer (targets).
 * @param {CanvasRenderingContext2D} c @param {import("./geometry.js").GridGeometry} g
 * @param {import("../../model/result.js").Result} r @param {import("../../lib/palette.js").Palette} pal @param {GridFrame} f
 */
function paintBands(c, g, r, pal, f) {
  const bottom = g.viewH - g.footerH;
  c.fillStyle = pal.bg;
  c.fillRect(0, 0, g.viewW, g.headerH);
  c.fillRect(0, bottom, g.viewW, g.footerH);
  c.font = `11px ${pal.font}`;
  c.textAlign = "left";
  c.fillStyle = pal.muted;
  c.fillText("block", 6, g.headerH / 2);
  c.fillText("\u2192 target", 4, bottom + g.footerH / 2);
  if (!f.cols) return;
  c.save();
  c.beginPath();
  c.rect(g.labelW, 0, g.viewW - g.labelW, g.viewH);
  c.clip();
  c.textAlign = "center";
  for (let i = f.cols[0]; i <= f.cols[1]; i++) {
    const cx = g.labelW + i * g.colW - f.sl + (g.colW - 1) / 2;
    c.font = `600 11.5px ${pal.font}`;
    c.fillStyle = i >= r.answerStart ? pal.answer : pal.fg;
    c.fillText(fitText(c, formatToken(r.tokens[i], { maxLen: 8 }), g.colW - 6), cx, g.headerH / 2 + 1);
    c.font = `11px ${pal.font}`;
    c.fillStyle = pal.muted;
    const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 8 }) : "\u2013";
    c.fillText(fitText(c, tgt, g.colW - 6), cx, bottom + g.footerH / 2);
  }
  c.restore();
}

/**
 * Selection and hover outlines, and the picked cell's.
 * @param {CanvasRenderingContext2D} c @param {import("./geometry.js").GridGeometry} g
 * @param {import("../../lib/palette.js").Palette} pal
 * @param {{sl: number, st: number, hovered: number, selected: number, picked: {pos: number, row: number}}} m
 */
export function paintGridMarks(c, g, pal, m) {
  const colX = (/** @type {number} */ i) => g.labelW + i * g.colW - m.sl;
  c.save();
  c.beginPath();
  c.rect(g.labelW, 0, g.viewW - g.labelW, g.viewH);
  c.clip();
  if (m.hovered >= 0 && m.hovered !== m.selected) {
    c.strokeStyle = pal.fg;
    c.globalAlpha = 0.55;
    c.lineWidth = 1;
    c.strokeRect(colX(m.hovered) + 0.5, 0.5, g.colW - 2, g.viewH - 1);
    c.globalAlpha = 1;
  }
  if (m.selected >= 0) {
    c.strokeStyle = pal.accent;
    c.lineWidth = 2.5;
    c.strokeRect(colX(m.selected) - 0.5, 1.25, g.colW, g.viewH - 2.5);
    c.fillStyle = pal.accent;
    c.fillRect(colX(m.selected) - 0.5, 0, g.colW, 3);
  }
  if (m.picked.pos >= 0 && m.picked.row >= 0) {
    const y = g.headerH + m.picked.row * g.rowH - m.st;
    c.strokeStyle = pal.bg;
    c.lineWidth = 3;
    c.strokeRect(colX(m.picked.pos) + 1, y + 1, g.colW - 3, g.rowH - 3);
    c.strokeStyle = pal.fg;
    c.lineWidth = 1.5;
    c.strokeRect(colX(m.picked.pos) + 1, y + 1, g.colW - 3, g.rowH - 3);
  }
  c.restore();
}
