/**
 * Geometry of the layer heatmap (cells, axes, hit testing) and label thinning. Pure: all
 * numbers are CSS pixels; no DOM.
 *
 * Orientation: positions run down the rows (one row per token, like the static
 * `plot_heatmap` and like reading the prompt), segments along the columns (block 1 at the
 * left, block n at the right). Long prompts scroll vertically; only the visible rows are
 * drawn.
 * @module layout
 */

/**
 * @typedef {object} HeatmapGeometry
 * @property {number} T rows (positions)
 * @property {number} k columns (segments)
 * @property {number} width canvas width
 * @property {number} labelW width of the row-label gutter (x of the grid)
 * @property {number} headerH height of the column-label band (y of the grid, sticky)
 * @property {number} colW cell width
 * @property {number} rowH cell height
 * @property {number} gridW k · colW
 * @property {number} gridH T · rowH
 * @property {number} contentH headerH + gridH + padBottom (the scrollable height)
 * @property {number} viewH visible height (≤ maxHeight)
 * @property {number} padBottom
 * @property {boolean} gaps draw 1px gaps between cells
 * @property {number} fontSize row-label font size
 * @property {number} headerFont column-label font size
 */

/** @param {number} v @param {number} lo @param {number} hi */
export const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));

/**
 * @param {{T: number, k: number, width: number, maxHeight?: number, labelW?: number, present?: boolean}} o
 *   `present`: presentation mode (text of at least 14 px, taller rows, a wider gutter)
 * @returns {HeatmapGeometry}
 */
export function heatmapGeometry({ T, k, width, maxHeight = 440, labelW, present = false }) {
  const w = Math.max(160, Math.floor(width || 0));
  const gutter = labelW ?? clamp(Math.round(w * (present ? 0.36 : 0.3)), 96, present ? 260 : 200);
  const padRight = 8;
  const colW = clamp(Math.floor((w - gutter - padRight) / Math.max(1, k)), 3, 40);
  const rowH = present ? (T <= 24 ? 24 : 20) : T <= 24 ? 20 : T <= 80 ? 17 : 15;
  const headerH = present ? 28 : 24;
  const padBottom = 6;
  const gridW = colW * k;
  const gridH = rowH * T;
  const contentH = headerH + gridH + padBottom;
  return {
    T,
    k,
    width: Math.max(w, gutter + gridW + padRight),
    labelW: gutter,
    headerH,
    colW,
    rowH,
    gridW,
    gridH,
    contentH,
    viewH: Math.min(contentH, Math.max(headerH + rowH * 3 + padBottom, maxHeight)),
    padBottom,
    gaps: colW >= 7 && rowH >= 12,
    fontSize: present ? 14 : rowH >= 17 ? 12 : 11,
    headerFont: present ? 14 : 10.5,
  };
}

/**
 * @typedef {{region: "cell"|"rowLabel"|"colLabel", pos: number, seg: number}} Hit
 */

/**
 * What is under the point (x, y) of the visible canvas, with the grid scrolled by scrollTop.
 * @param {HeatmapGeometry} g
 * @param {number} x @param {number} y canvas CSS pixels
 * @param {number} [scrollTop]
 * @returns {Hit|null}
 */
export function hitTest(g, x, y, scrollTop = 0) {
  if (x < 0 || y < 0 || x >= g.width) return null;
  const col = Math.floor((x - g.labelW) / g.colW);
  const inCols = x >= g.labelW && col >= 0 && col < g.k;
  if (y < g.headerH) return inCols ? { region: "colLabel", pos: -1, seg: col } : null;
  const row = Math.floor((y - g.headerH + scrollTop) / g.rowH);
  if (row < 0 || row >= g.T) return null;
  if (x < g.labelW) return { region: "rowLabel", pos: row, seg: -1 };
  return inCols ? { region: "cell", pos: row, seg: col } : null;
}

/**
 * The rows at least partly visible: [first, last] (inclusive), or null when none.
 * @param {HeatmapGeometry} g @param {number} scrollTop @param {number} [viewH]
 */
export function visibleRows(g, scrollTop, viewH = g.viewH) {
  const top = scrollTop;
  const bottom = scrollTop + viewH - g.headerH;
  const first = clamp(Math.floor(top / g.rowH), 0, g.T - 1);
  const last = clamp(Math.ceil(bottom / g.rowH) - 1, 0, g.T - 1);
  return g.T > 0 && last >= first ? [first, last] : null;
}

/**
 * Cell rectangle (x, y, w, h) in canvas pixels at a scroll offset.
 * @param {HeatmapGeometry} g @param {number} pos @param {number} seg @param {number} [scrollTop]
 */
export function cellRect(g, pos, seg, scrollTop = 0) {
  return { x: g.labelW + seg * g.colW, y: g.headerH + pos * g.rowH - scrollTop, w: g.colW, h: g.rowH };
}

/**
 * The scrollTop that brings row `pos` into view with a margin, or the current one when it
 * is visible already.
 * @param {HeatmapGeometry} g @param {number} pos @param {number} scrollTop
 */
export function scrollToRow(g, pos, scrollTop) {
  const inner = g.viewH - g.headerH - g.padBottom;
  const top = pos * g.rowH;
  const margin = Math.min(2 * g.rowH, inner / 3);
  if (top - margin < scrollTop) return Math.max(0, top - margin);
  if (top + g.rowH + margin > scrollTop + inner) return Math.min(g.contentH - g.viewH, top + g.rowH + margin - inner);
  return scrollTop;
}

/** Steps for thinned labels. */
const STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000];

/**
 * Which of n evenly spaced labels to draw so that none overlap: every `step`-th label,
 * counted in 1-based numbers (1, 5, 10, 15, … for step 5), and the last one (n) unless it
 * would collide with its neighbour.
 * @param {number} n number of slots
 * @param {number} cell slot size (px)
 * @param {number} label widest label (px), gaps included
 * @returns {number[]} 0-based slot indices, ascending
 */
export function thinLabels(n, cell, label) {
  if (n <= 0) return [];
  const step = STEPS.find((s) => s * cell >= label) ?? Math.ceil(label / Math.max(cell, 1e-9));
  if (step === 1) return Array.from({ length: n }, (_, q) => q);
  /** @type {number[]} */
  const out = (step - 1) * cell >= label ? [0] : [];
  for (let q = step - 1; q < n; q += step) out.push(q);
  const last = n - 1;
  if (!out.length) return [last];
  if (out[out.length - 1] !== last) {
    if ((last - out[out.length - 1]) * cell >= label) out.push(last);
    else if (out.length > 1) out[out.length - 1] = last; // keep the last block, drop its neighbour
  }
  return out;
}

/**
 * A linear map from a domain to a range (with invert).
 * @param {[number, number]} domain @param {[number, number]} range
 */
export function linearScale(domain, range) {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  /** @param {number} v */
  const f = (v) => r0 + (v - d0) * k;
  f.invert = (/** @type {number} */ r) => (k === 0 ? d0 : d0 + (r - r0) / k);
  f.domain = domain;
  f.range = range;
  return f;
}

/**
 * @typedef {object} RowBox a line of a scrolling box (a line of the strip's chips, an item of a
 *   list), in the box's scroll coordinates (its padding included: 0 is the top of the padding)
 * @property {number} top
 * @property {number} bottom
 */

/**
 * The lines of boxes laid out in reading order: boxes whose vertical extents overlap share a
 * line (a chip a pixel taller than its neighbours stays on their line). Empty boxes (hidden,
 * folded) are left out.
 * @param {RowBox[]} boxes in document order
 * @returns {RowBox[]} top to bottom
 */
export function boxRows(boxes) {
  /** @type {RowBox[]} */
  const rows = [];
  for (const b of boxes) {
    if (!(b.bottom > b.top)) continue;
    const last = rows[rows.length - 1];
    if (last && b.top < last.bottom && b.bottom > last.top) {
      last.top = Math.min(last.top, b.top);
      last.bottom = Math.max(last.bottom, b.bottom);
    } else rows.push({ top: b.top, bottom: b.bottom });
  }
  return rows;
}

/**
 * The part of a scrolling box's content that shows lines `first` … `last` whole and nothing
 * of their neighbours: up to a padding's height of space around them (the gap to a neighbour,
 * if it is smaller), the box's own padding at either end of its content.
 * @param {RowBox[]} rows @param {number} first @param {number} last
 * @param {{end: number, padTop: number, padBottom: number}} box `end`: the scroll height
 * @returns {{top: number, bottom: number}}
 */
export function rowWindow(rows, first, last, box) {
  const top = first === 0 ? 0 : Math.max(rows[first - 1].bottom, rows[first].top - box.padTop);
  const bottom = last === rows.length - 1 ? box.end : Math.min(rows[last + 1].top, rows[last].bottom + box.padBottom);
  return { top, bottom };
}

/**
 * Which lines a scrolling box of at most `room` pixels (its inner height) shows so that every
 * line shown is whole: line `want` among them, and the first as near `first` (the first line
 * shown now) as that allows, so that the box moves as little as it can. The window to scroll
 * to and size the box by is {@link rowWindow}'s; a single line taller than the room is shown
 * alone.
 * @param {RowBox[]} rows top to bottom @param {number} want @param {number} first
 * @param {{end: number, padTop: number, padBottom: number, room: number}} box
 * @returns {{first: number, last: number, top: number, bottom: number}|null} null without lines
 */
export function wholeRows(rows, want, first, box) {
  if (!rows.length) return null;
  const w = clamp(Math.trunc(want), 0, rows.length - 1);
  const fits = (/** @type {number} */ f, /** @type {number} */ l) => {
    const win = rowWindow(rows, f, l, box);
    return win.bottom - win.top <= box.room;
  };
  /** the last line shown whole from line f */
  const lastFrom = (/** @type {number} */ f) => {
    let l = f;
    while (l + 1 < rows.length && fits(f, l + 1)) l++;
    return l;
  };
  let f = Math.min(clamp(Math.trunc(first), 0, rows.length - 1), w);
  while (f < w && lastFrom(f) < w) f++;
  // room to spare below the last line: earlier lines fill it rather than empty space
  while (f > 0 && fits(f - 1, lastFrom(f))) f--;
  const last = lastFrom(f);
  return { first: f, last, ...rowWindow(rows, f, last, box) };
}
