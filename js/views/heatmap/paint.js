/**
 * Painters of the layer heatmap (canvas + geometry + palette in, pixels out): the visible
 * rows (the scaled contribution bitmap, tile gaps, row labels, onset outlines, non-monotone
 * marks, the answer divider), the column header, the hover/selection overlay and the
 * overview of every row. None reads the DOM or the view's state.
 * @module views/heatmap/paint
 */
import { fitText } from "../../lib/dom.js";
import { thinLabels, cellRect } from "../../lib/layout.js";
import { NONMONOTONE } from "../../lib/colorscale.js";
import { contribution } from "../../model/result.js";

/**
 * @typedef {import("../../lib/layout.js").HeatmapGeometry} Geometry
 * @typedef {import("../../model/result.js").Result} Result
 * @typedef {import("../../lib/palette.js").Palette} Palette
 */

/**
 * The bitmap's rows [first, last], scaled to the cells without smoothing.
 * @param {CanvasRenderingContext2D} c @param {Geometry} g @param {HTMLCanvasElement} bitmap
 * @param {number} k columns @param {number} first @param {number} last @param {number} top scroll offset
 */
export function drawCells(c, g, bitmap, k, first, last, top) {
  const n = last - first + 1;
  c.imageSmoothingEnabled = false;
  c.drawImage(bitmap, 0, first, k, n, g.labelW, g.headerH + first * g.rowH - top, g.gridW, n * g.rowH);
}

/**
 * Rows [first, last]: gaps, labels, "no target" rows, onset outlines, non-monotone marks.
 * @param {CanvasRenderingContext2D} c @param {Geometry} g @param {Result} r @param {Palette} pal
 * @param {{first: number, last: number, top: number, labels: string[], limitOf: (i: number) => number}} o
 */
export function drawRows(c, g, r, pal, o) {
  const { labelW, headerH, rowH, colW, gridW } = g;
  const { first, last, top } = o;
  if (g.gaps) {
    // tile gaps in the background colour
    c.fillStyle = pal.grid;
    for (let j = 1; j < r.k; j++) c.fillRect(labelW + j * colW - 0.5, headerH, 1, g.viewH);
    for (let i = first; i <= last + 1; i++) c.fillRect(labelW, headerH + i * rowH - top - 0.5, gridW, 1);
  }
  c.font = `${g.fontSize}px ${pal.font}`;
  c.textBaseline = "middle";
  c.textAlign = "right";
  const maxW = labelW - 12;
  for (let i = first; i <= last; i++) {
    const y = headerH + i * rowH - top;
    if (!r.hasTarget[i]) drawNoTarget(c, g, pal, y);
    else if (colW >= 6 && rowH >= 10 && r.onset[i] >= 0 && r.onset[i] < r.k && Math.abs(contribution(r, i, r.onset[i])) >= 0.1 * o.limitOf(i)) {
      // outline only where the colour shows
      c.strokeStyle = pal.fg;
      c.lineWidth = 1.25;
      c.strokeRect(labelW + r.onset[i] * colW + 1.5, y + 1.5, colW - 3, rowH - 3);
    }
    if (r.nonmono.flags[i]) {
      // non-monotone: an orange mark at the edge of the gutter
      c.fillStyle = NONMONOTONE;
      c.fillRect(labelW - 6, y + 2, 4, rowH - 4);
    }
    c.fillStyle = i >= r.answerStart ? pal.answer : pal.fg;
    // index in muted colour, then the label, both right-aligned in the gutter
    c.fillText(fitText(c, o.labels[i] ?? "", maxW - 34), labelW - 10, y + rowH / 2);
    c.fillStyle = pal.muted;
    c.textAlign = "left";
    c.fillText(`${i}`, 4, y + rowH / 2);
    c.textAlign = "right";
  }
  if (r.answerStart > 0 && r.answerStart < r.T) {
    // divider above the first row that predicts the answer
    const y = headerH + r.answerStart * rowH - top;
    c.fillStyle = pal.answer;
    c.fillRect(0, y - 1, labelW + gridW, 2);
  }
}

/** A row without a target: grey, hatched, "no target". @param {CanvasRenderingContext2D} c @param {Geometry} g @param {Palette} pal @param {number} y */
function drawNoTarget(c, g, pal, y) {
  const { labelW, rowH, gridW } = g;
  c.fillStyle = pal.nan;
  c.fillRect(labelW, y, gridW, rowH);
  c.save();
  c.beginPath();
  c.rect(labelW, y, gridW, rowH);
  c.clip();
  c.strokeStyle = pal.muted;
  c.globalAlpha = 0.35;
  c.lineWidth = 1;
  c.beginPath();
  for (let x = labelW - rowH; x < labelW + gridW; x += 6) {
    c.moveTo(x, y + rowH);
    c.lineTo(x + rowH, y);
  }
  c.stroke();
  c.restore();
  c.textAlign = "center";
  c.fillStyle = pal.muted;
  c.fillText("no target", labelW + gridW / 2, y + rowH / 2);
  c.textAlign = "right";
}

/**
 * The column labels that fit, as [index, x, align]: thinned to the widest label, and none
 * over the axis title that ends 8 px left of the cells ("blocks →"): a first label wider
 * than its column (sub-layer labels such as "0.attn") is drawn left-aligned at the cells'
 * edge, or left out when it would then reach the next label.
 * @param {Geometry} g @param {string[]} labels @param {(text: string) => number} measure
 * @returns {Array<[number, number, "center"|"left"]>}
 */
export function columnLabels(g, labels, measure) {
  let widest = 0;
  for (const l of labels) widest = Math.max(widest, measure(l));
  const show = thinLabels(labels.length, g.colW, widest + 6);
  /** @type {Array<[number, number, "center"|"left"]>} */
  const out = [];
  show.forEach((j, q) => {
    const x = g.labelW + (j + 0.5) * g.colW;
    const w = measure(labels[j]);
    if (x - w / 2 >= g.labelW - 4) {
      out.push([j, x, "center"]);
      return;
    }
    const next = q + 1 < show.length ? g.labelW + (show[q + 1] + 0.5) * g.colW - measure(labels[show[q + 1]]) / 2 : Infinity;
    if (g.labelW + 1 + w + 4 <= next) out.push([j, g.labelW + 1, "left"]);
  });
  return out;
}

/** The header band: column labels and the axis titles. @param {CanvasRenderingContext2D} c @param {Geometry} g @param {Result} r @param {Palette} pal */
export function drawHeader(c, g, r, pal) {
  c.fillStyle = pal.bg;
  c.fillRect(0, 0, g.width, g.headerH);
  c.font = `${g.headerFont}px ${pal.font}`;
  c.textBaseline = "middle";
  c.fillStyle = pal.muted;
  for (const [j, x, align] of columnLabels(g, r.segmentLabels, (t) => c.measureText(t).width)) {
    c.textAlign = align;
    c.fillText(r.segmentLabels[j], x, g.headerH / 2);
  }
  c.textAlign = "left";
  c.fillText("pos", 4, g.headerH / 2);
  c.textAlign = "right";
  c.fillText(r.k > 1 && r.singleBlocks ? "block \u2192" : "blocks \u2192", g.labelW - 8, g.headerH / 2);
  c.fillStyle = pal.grid;
}

/**
 * The overlay: the hovered row, the selected row, the hovered cell and its column label.
 * @param {CanvasRenderingContext2D} c @param {Geometry} g @param {Result} r @param {Palette} pal
 * @param {{top: number, hovered: number, selected: number, hit: import("../../lib/layout.js").Hit|null}} o
 */
export function drawOverlay(c, g, r, pal, o) {
  const { top, hit } = o;
  c.clearRect(0, 0, g.width, g.viewH);
  const rowY = (/** @type {number} */ i) => g.headerH + i * g.rowH - top;
  c.save();
  c.beginPath();
  c.rect(0, g.headerH, g.width, g.viewH - g.headerH);
  c.clip();
  if (o.hovered >= 0 && o.hovered !== o.selected) {
    c.fillStyle = pal.fg;
    c.globalAlpha = 0.07;
    c.fillRect(0, rowY(o.hovered), g.labelW, g.rowH);
    c.globalAlpha = 0.6;
    c.strokeStyle = pal.fg;
    c.lineWidth = 1;
    c.strokeRect(g.labelW + 0.5, rowY(o.hovered) + 0.5, g.gridW - 1, g.rowH - 1);
    c.globalAlpha = 1;
  }
  if (o.selected >= 0) {
    c.fillStyle = pal.accent;
    c.globalAlpha = 0.14;
    c.fillRect(0, rowY(o.selected), g.labelW, g.rowH);
    c.globalAlpha = 1;
    c.fillRect(0, rowY(o.selected), 3, g.rowH);
    c.strokeStyle = pal.accent;
    c.lineWidth = 2;
    c.strokeRect(g.labelW - 1, rowY(o.selected) - 1, g.gridW + 2, g.rowH + 2);
  }
  if (hit && hit.region === "cell") {
    const cell = cellRect(g, hit.pos, hit.seg, top);
    c.strokeStyle = pal.bg;
    c.lineWidth = 3;
    c.strokeRect(cell.x + 0.5, cell.y + 0.5, cell.w - 1, cell.h - 1);
    c.strokeStyle = pal.fg;
    c.lineWidth = 1.5;
    c.strokeRect(cell.x + 0.5, cell.y + 0.5, cell.w - 1, cell.h - 1);
  }
  c.restore();
  if (hit && hit.seg >= 0) {
    // the hovered column's label, bold and underlined
    const x = g.labelW + (hit.seg + 0.5) * g.colW;
    c.fillStyle = pal.bg;
    c.font = `600 ${g.headerFont}px ${pal.font}`;
    const label = r.segmentLabels[hit.seg];
    const w = Math.max(c.measureText(label).width + 12, Math.min(3 * g.colW, 44));
    c.fillRect(x - w / 2, 2, w, g.headerH - 5);
    c.fillStyle = pal.fg;
    c.textAlign = "center";
    c.textBaseline = "middle";
    c.fillText(label, x, g.headerH / 2);
    c.fillRect(x - g.colW / 2, g.headerH - 3, g.colW, 2);
  }
}

/**
 * The overview: every row squeezed into the view's height, the visible rows boxed.
 * @param {CanvasRenderingContext2D} c @param {Result} r @param {Palette} pal
 * @param {{w: number, h: number, bitmap: HTMLCanvasElement|null, visible: number[]|null, selected: number}} o
 */
export function drawMinimap(c, r, pal, o) {
  const H = o.h;
  c.fillStyle = pal.bg;
  c.fillRect(0, 0, o.w, H);
  const barX = 5;
  const barW = o.w - barX;
  if (o.bitmap) {
    c.imageSmoothingEnabled = true;
    c.drawImage(o.bitmap, 0, 0, r.k, r.T, barX, 0, barW, H);
  }
  const rowY = (/** @type {number} */ i) => (i / r.T) * H;
  c.fillStyle = NONMONOTONE;
  for (const i of r.nonmono.positions) c.fillRect(0, rowY(i), 4, Math.max(1.5, H / r.T));
  if (r.answerStart > 0 && r.answerStart < r.T) {
    c.fillStyle = pal.answer;
    c.fillRect(barX, rowY(r.answerStart) - 0.5, barW, 1.5);
  }
  if (o.visible) {
    const y0 = rowY(o.visible[0]);
    const y1 = rowY(o.visible[1] + 1);
    c.strokeStyle = pal.fg;
    c.lineWidth = 1.5;
    c.strokeRect(barX + 0.75, y0 + 0.75, barW - 1.5, Math.max(3, y1 - y0 - 1.5));
  }
  if (o.selected >= 0) {
    c.fillStyle = pal.accent;
    c.fillRect(barX - 3, rowY(o.selected + 0.5) - 1, barW + 3, 2.5);
  }
}
