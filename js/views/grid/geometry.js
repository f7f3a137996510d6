/**
 * Geometry of the logit-lens grid (pure): sizes for a viewport, the visible columns and
 * rows at a scroll offset, hit testing, the scroll offset that shows a column.
 * @module views/grid/geometry
 */
import { clamp } from "../../lib/layout.js";

/**
 * @typedef {object} GridGeometry
 * @property {number} T columns (positions)
 * @property {number} rows k+1 boundaries
 * @property {number} labelW row-label gutter (x of the first column)
 * @property {number} headerH band of input tokens (y of the first row)
 * @property {number} footerH band of target tokens under the last row
 * @property {number} colW @property {number} rowH
 * @property {number} contentW labelW + T·colW
 * @property {number} contentH headerH + rows·rowH + footerH
 * @property {number} viewW visible width @property {number} viewH visible height
 */

/**
 * Geometry of the grid for a viewport width (pure).
 * @param {{T: number, rows: number, width: number, maxHeight?: number}} o
 * @returns {GridGeometry}
 */
export function gridGeometry({ T, rows, width, maxHeight = 560 }) {
  const labelW = 58;
  const colW = 64;
  const rowH = rows <= 34 ? 20 : 16;
  const headerH = 26;
  const footerH = 24;
  const contentW = labelW + T * colW;
  const contentH = headerH + rows * rowH + footerH;
  const viewW = Math.max(200, Math.min(Math.floor(width || 0) || 640, contentW));
  return { T, rows, labelW, headerH, footerH, colW, rowH, contentW, contentH, viewW, viewH: Math.min(contentH, maxHeight) };
}

/**
 * The grid's height in presentation mode on a window `innerH` px tall: short enough that a
 * 1024×768 projector shows the strip, the grid and the detail's curve at once (its rows
 * scroll inside the grid's own box); the default height (560) where the window is tall.
 * @param {number} innerH the window's inner height (0 or less: unknown)
 * @returns {number|undefined} the grid's maxHeight, or undefined for the default
 */
export function presentGridHeight(innerH) {
  return innerH > 0 ? clamp(Math.round(innerH * 0.42), 200, 560) : undefined;
}

/**
 * The columns at least partly visible at a horizontal scroll offset: [first, last], or null.
 * @param {GridGeometry} g @param {number} scrollLeft
 */
export function visibleColumns(g, scrollLeft) {
  if (!g.T) return null;
  const first = clamp(Math.floor(scrollLeft / g.colW), 0, g.T - 1);
  const last = clamp(Math.ceil((scrollLeft + g.viewW - g.labelW) / g.colW) - 1, 0, g.T - 1);
  return last >= first ? [first, last] : null;
}

/**
 * The rows at least partly visible at a vertical scroll offset: [first, last], or null.
 * @param {GridGeometry} g @param {number} scrollTop
 */
export function visibleGridRows(g, scrollTop) {
  if (!g.rows) return null;
  const inner = g.viewH - g.headerH - g.footerH;
  const first = clamp(Math.floor(scrollTop / g.rowH), 0, g.rows - 1);
  const last = clamp(Math.ceil((scrollTop + inner) / g.rowH) - 1, 0, g.rows - 1);
  return last >= first ? [first, last] : null;
}

/**
 * What is under the viewport point (x, y): a cell `{pos, row}`, a column's header/footer
 * `{pos, row: -1}`, or null.
 * @param {GridGeometry} g @param {number} x @param {number} y
 * @param {number} scrollLeft @param {number} scrollTop
 * @returns {{pos: number, row: number}|null}
 */
export function gridHit(g, x, y, scrollLeft, scrollTop) {
  if (x < g.labelW || x >= g.viewW || y < 0 || y >= g.viewH) return null;
  const pos = Math.floor((x - g.labelW + scrollLeft) / g.colW);
  if (pos < 0 || pos >= g.T) return null;
  if (y < g.headerH || y >= g.viewH - g.footerH) return { pos, row: -1 };
  const row = Math.floor((y - g.headerH + scrollTop) / g.rowH);
  return row >= 0 && row < g.rows ? { pos, row } : { pos, row: -1 };
}

/**
 * The scrollLeft that shows column `pos` (unchanged when it is visible already).
 * @param {GridGeometry} g @param {number} pos @param {number} scrollLeft
 */
export function scrollToColumn(g, pos, scrollLeft) {
  const inner = g.viewW - g.labelW;
  const x = pos * g.colW;
  if (x < scrollLeft) return Math.max(0, x - g.colW);
  if (x + g.colW > scrollLeft + inner) return Math.min(Math.max(0, g.contentW - g.viewW), x + 2 * g.colW - inner);
  return scrollLeft;
}

/**
 * The scrollTop that shows row `row` (unchanged when it is visible already).
 * @param {GridGeometry} g @param {number} row @param {number} scrollTop
 */
export function scrollToRow(g, row, scrollTop) {
  const inner = g.viewH - g.headerH - g.footerH;
  const max = Math.max(0, g.contentH - g.viewH);
  const y = row * g.rowH;
  if (y < scrollTop) return clamp(y, 0, max);
  if (y + g.rowH > scrollTop + inner) return clamp(y + g.rowH - inner, 0, max);
  return scrollTop;
}
