/**
 * The classic logit-lens grid (under a fitted lens, that lens's grid: the title names it):
 * boundaries (rows: embeddings at the top, block n at the bottom) × positions (columns, the
 * input tokens along the top, their targets along the bottom), the lens's top-1 token
 * written in each cell, coloured by its probability or by
 * the IG-Lens contribution of the segment that ends at that boundary. Hover previews a
 * position, a click selects it and lists that cell's top-k tokens; the selected column is
 * highlighted and scrolled into view when another view selects.
 *
 * Speed: one canvas the size of the viewport; a frame draws only the visible cells (fillText
 * per cell), so 512 positions cost what 20 do. Token text is drawn with `fillText` (never
 * parsed) after `formatToken`.
 *
 * Parts: `grid/geometry.js` (pure geometry), `grid/paint.js` (the painters), `grid/text.js`
 * (top-k list, tooltip, note); the values and scales come from `model/figure-data.js`.
 * @module views/grid
 */
import { h, clear, listen, context2d, borders } from "../../lib/dom.js";
import { clamp } from "../../lib/layout.js";
import { formatToken } from "../../lib/tokens.js";
import { topAt } from "../../model/result.js";
import { readPalette, defaultPalette } from "../../lib/palette.js";
import { GRID_COLORS, gridScale } from "../../model/figure-data.js";
import { gridGeometry, visibleColumns, visibleGridRows, gridHit, scrollToColumn, scrollToRow, presentGridHeight } from "./geometry.js";
import { paintGrid, paintGridMarks } from "./paint.js";
import { renderTopk, fillTooltip, gridNote } from "./text.js";
import { createLegend, drawLegend } from "../legend.js";
import { lensGridName, lensTitle } from "../../model/lens-name.js";

/** The grid's elements. @param {(typeof GRID_COLORS)[number]} mode the colouring shown first */
function gridDom(mode) {
  const canvas = h("canvas", { class: "iglens-grid-canvas", tabindex: 0, role: "img" });
  const stage = h("div", { class: "iglens-grid-stage" }, canvas);
  const spacer = h("div", { class: "iglens-grid-spacer" });
  const scroller = h("div", { class: "iglens-grid-scroll" }, stage, spacer);
  const tooltip = h("div", { class: "iglens-grid-tooltip", role: "tooltip" });
  tooltip.hidden = true;
  const legend = createLegend("iglens-grid-legend");
  const modeButtons = GRID_COLORS.map((m) =>
    h("button", {
      type: "button",
      class: "iglens-seg-button",
      "data-grid-color": m,
      "aria-pressed": m === mode ? "true" : "false",
      text: m === "probability" ? "top-1 probability" : "IG-Lens contribution",
    }),
  );
  const modeGroup = h(
    "div",
    { class: "iglens-seg", role: "group", "aria-label": "Colour the grid by" },
    h("span", { class: "iglens-muted", text: "colour:" }),
    ...modeButtons,
  );
  const topk = h("div", { class: "iglens-grid-topk", "aria-live": "polite" });
  const note = h("p", { class: "iglens-foot" });
  // names the result's lens (layoutGrid): "Logit lens: …", "Shortcut lens: …"
  const title = h("h2", { class: "iglens-section-title", text: "Logit lens: top-1 token after each block" });
  const el = h(
    "section",
    { class: "iglens-lensgrid", "data-view": "grid", "data-grid-color": mode, "aria-label": "Logit-lens grid" },
    h("div", { class: "iglens-section-head" }, title, h("span", { class: "iglens-spacer" }), modeGroup, legend),
    scroller,
    tooltip,
    topk,
    note,
  );
  return { el, title, canvas, stage, spacer, scroller, tooltip, legend, modeButtons, topk, note };
}

/**
 * Size the grid's elements for the scroller's width; returns the geometry. In presentation
 * mode the grid is shorter on a short window (its rows scroll inside its box).
 * @param {ReturnType<typeof gridDom>} d @param {import("../../model/result.js").Result} r
 * @param {(typeof GRID_COLORS)[number]} mode @param {boolean} present
 */
function layoutGrid(d, r, mode, present) {
  const { scroller, el, canvas } = d;
  const maxHeight = present && typeof window !== "undefined" ? presentGridHeight(window.innerHeight) : undefined;
  const g = gridGeometry({ T: r.T, rows: r.k + 1, width: scroller.clientWidth || el.clientWidth || 640, maxHeight });
  const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  const frame = borders(scroller);
  scroller.style.height = `${g.viewH + frame.y}px`;
  d.stage.style.width = `${g.viewW}px`;
  d.stage.style.height = `${g.viewH}px`;
  // the spacer sits under the sticky stage: its width is the scroll width, its height
  // (with the stage's) the scroll height
  d.spacer.style.width = `${g.contentW}px`;
  d.spacer.style.height = `${Math.max(1, g.contentH - g.viewH)}px`;
  // the rows' box is exactly viewH tall: a classic horizontal scrollbar (measured; none for
  // overlay scrollbars) is added below it, so the last row scrolls fully into view
  const bar = Math.max(0, scroller.offsetHeight - scroller.clientHeight - frame.y);
  if (bar) scroller.style.height = `${g.viewH + frame.y + bar}px`;
  canvas.width = Math.round(g.viewW * dpr);
  canvas.height = Math.round(g.viewH * dpr);
  canvas.style.width = `${g.viewW}px`;
  canvas.style.height = `${g.viewH}px`;
  const grid = lensGridName(r.lens);
  d.title.textContent = `${lensTitle(r.lens)}: top-1 token after each block`;
  el.setAttribute("aria-label", grid.charAt(0).toUpperCase() + grid.slice(1));
  canvas.setAttribute(
    "aria-label",
    `${grid.charAt(0).toUpperCase() + grid.slice(1)} of ${r.T} positions by ${r.k + 1} boundaries; arrow keys move the selection`,
  );
  d.note.textContent = gridNote(r, g, mode);
  return g;
}

/** Place the tooltip next to the pointer, inside the grid. @param {HTMLElement} tooltip @param {HTMLElement} el @param {MouseEvent} e */
function placeTooltip(tooltip, el, e) {
  const box = el.getBoundingClientRect();
  const tw = tooltip.offsetWidth || 220;
  let x = e.clientX - box.left + 14;
  if (x + tw > box.width - 4) x = e.clientX - box.left - tw - 14;
  tooltip.style.left = `${clamp(x, 0, Math.max(0, box.width - tw))}px`;
  tooltip.style.top = `${Math.max(0, e.clientY - box.top + 14)}px`;
}

/**
 * The formatted top-1 label of cell (i, j), cached by cell index.
 * @param {Map<number, string>} labels @param {import("../../model/result.js").Result} r @param {number} i @param {number} j
 */
function cellLabel(labels, r, i, j) {
  const key = i * (r.k + 1) + j;
  let s = labels.get(key);
  if (s === undefined) {
    const t = topAt(r, i, j, 1)[0];
    s = t ? formatToken(t.text, { maxLen: 8 }) : "";
    labels.set(key, s);
  }
  return s;
}

/**
 * The legend of a colouring.
 * @param {HTMLElement} legend @param {import("../../model/result.js").Result|null} r
 * @param {import("../../lib/colorscale.js").Scale|null} sc @param {(typeof GRID_COLORS)[number]} mode
 */
function gridLegend(legend, r, sc, mode) {
  if (!r || !sc) {
    clear(legend);
    return;
  }
  drawLegend(legend, sc, mode === "contribution" ? `contribution to ${r.targetName}` : "top-1 probability");
}

/**
 * The pointer moved from cell `prev` to `next`: preview its position, show its tooltip.
 * @param {import("../context.js").Context} ctx @param {ReturnType<typeof gridDom>} d
 * @param {{pos: number, row: number}|null} prev @param {{pos: number, row: number}|null} next @param {MouseEvent} e
 */
function hoverCell(ctx, d, prev, next, e) {
  const changed = !prev !== !next || (prev && next && (prev.pos !== next.pos || prev.row !== next.row));
  if (changed) ctx.hover(next ? next.pos : -1);
  const r = ctx.result;
  if (!r || !next) d.tooltip.hidden = true;
  else {
    fillTooltip(d.tooltip, r, next);
    d.tooltip.hidden = false;
    placeTooltip(d.tooltip, d.el, e);
  }
  d.canvas.style.cursor = next ? "pointer" : "default";
}

/**
 * Scroll the grid's box so that column `pos` and row `row` are in view (an axis whose index
 * is negative stays where it is).
 * @param {HTMLElement} scroller @param {import("./geometry.js").GridGeometry|null} g
 * @param {number} pos @param {number} row
 */
function showCell(scroller, g, pos, row) {
  if (!g) return;
  const x = pos >= 0 ? scrollToColumn(g, pos, scroller.scrollLeft) : scroller.scrollLeft;
  if (x !== scroller.scrollLeft) scroller.scrollLeft = x;
  const y = row >= 0 ? scrollToRow(g, row, scroller.scrollTop) : scroller.scrollTop;
  if (y !== scroller.scrollTop) scroller.scrollTop = y;
}

/**
 * @param {import("../context.js").Context} ctx
 */
export function createGrid(ctx) {
  /** @type {(typeof GRID_COLORS)[number]} */
  let mode = "probability";
  const d = gridDom(mode);
  const { el, canvas, scroller, tooltip, topk } = d;
  /** @type {import("./geometry.js").GridGeometry|null} */
  let g = null;
  let dpr = 1;
  let frame = 0;
  let pal = defaultPalette("light");
  /** @type {{pos: number, row: number}|null} */
  let hit = null;
  /** the cell whose top-k is listed: {pos, row} */
  let picked = { pos: -1, row: -1 };
  /** @type {Map<number, string>} formatted top-1 labels by cell index (cleared per result) */
  const labels = new Map();
  let visible = /** @type {[number, number]|null} */ (null);

  const scale = () => (ctx.result ? gridScale(ctx.result, mode, ctx.theme) : null);

  const layout = () => {
    g = ctx.result ? layoutGrid(d, ctx.result, mode, ctx.root.classList.contains("iglens-present")) : null;
    dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  };

  /** @param {number} i @param {number} j */
  const label = (i, j) => cellLabel(labels, /** @type {import("../../model/result.js").Result} */ (ctx.result), i, j);

  function draw() {
    frame = 0;
    const r = ctx.result;
    const c = context2d(canvas);
    if (!c || !g || !r) return;
    const sl = scroller.scrollLeft;
    const st = scroller.scrollTop;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    const cols = /** @type {[number, number]|null} */ (visibleColumns(g, sl));
    const rows = /** @type {[number, number]|null} */ (visibleGridRows(g, st));
    visible = cols;
    el.setAttribute("data-first-column", cols ? String(cols[0]) : "");
    el.setAttribute("data-last-column", cols ? String(cols[1]) : "");
    paintGrid(c, g, r, pal, { sl, st, cols, rows, mode, scale: gridScale(r, mode, ctx.theme), label });
    paintGridMarks(c, g, pal, { sl, st, hovered: ctx.hovered(), selected: ctx.selected(), picked });
  }

  function schedule() {
    if (frame) return;
    frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(draw) : (setTimeout(draw, 16), 1);
  }

  const legendUpdate = () => gridLegend(d.legend, ctx.result, scale(), mode);

  /** @param {MouseEvent} e */
  function locate(e) {
    if (!g) return null;
    const rect = canvas.getBoundingClientRect();
    return gridHit(g, e.clientX - rect.left, e.clientY - rect.top, scroller.scrollLeft, scroller.scrollTop);
  }

  /** @param {(typeof GRID_COLORS)[number]} next */
  function setMode(next) {
    if (next === mode) return;
    mode = next;
    el.setAttribute("data-grid-color", mode);
    for (const b of d.modeButtons) b.setAttribute("aria-pressed", b.getAttribute("data-grid-color") === mode ? "true" : "false");
    legendUpdate();
    layout();
    draw();
  }

  /** @param {number} i @param {number} j */
  function pick(i, j) {
    picked = { pos: i, row: j };
    showCell(scroller, g, -1, j);
    renderTopk(topk, ctx.result, picked);
    // a cell below the embeddings also picks its segment for the detail's head shares
    if (j > 0 && ctx.result && ctx.result.hasTarget[i]) ctx.focusSegment(i, j - 1);
    ctx.select(i);
  }

  const offs = gridListeners(ctx, d, {
    setMode,
    pick,
    picked: () => picked,
    /** @param {MouseEvent|null} e */
    hover(e) {
      if (!e) {
        hit = null;
        tooltip.hidden = true;
        schedule();
        return;
      }
      const next = locate(e);
      hoverCell(ctx, d, hit, next, e);
      hit = next;
    },
    leave() {
      hit = null;
      tooltip.hidden = true;
      ctx.hover(-1);
    },
    locate,
  });

  return {
    el,
    canvas,
    /** The visible columns [first, last] of the last frame (null before one). */
    visible: () => visible,
    /** The colouring ("probability" or "contribution"). */
    mode: () => mode,
    setMode,
    /** Rebuild everything (new result, theme or shown again). */
    full() {
      labels.clear();
      const r = ctx.result;
      if (!r || picked.pos >= r.T || picked.row > r.k) picked = { pos: -1, row: -1 };
      // open on the selected token's output cell
      if (r && picked.pos < 0 && ctx.selected() >= 0) picked = { pos: ctx.selected(), row: r.k };
      pal = readPalette(ctx.root, ctx.theme);
      layout();
      legendUpdate();
      renderTopk(topk, ctx.result, picked);
      showCell(scroller, g, ctx.selected(), picked.row); // its column, and its row (the rows scroll when the grid is short)
      draw();
    },
    resize() {
      if (!ctx.result) return;
      layout();
      draw();
    },
    /** Selection or hover changed; scroll the selected column into view when asked. */
    updateSelection(/** @type {boolean} */ scroll) {
      const sel = ctx.selected();
      if (scroll && sel >= 0 && picked.pos !== sel) {
        picked = { pos: sel, row: picked.row >= 0 ? picked.row : ctx.result ? ctx.result.k : 0 };
        renderTopk(topk, ctx.result, picked);
      }
      if (scroll) showCell(scroller, g, sel, -1);
      draw();
    },
    destroy() {
      offs.forEach((off) => off());
      if (frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(frame);
    },
  };
}

/**
 * The grid's listeners: the colouring buttons, scrolling, hover, click and keys.
 * @param {import("../context.js").Context} ctx @param {ReturnType<typeof gridDom>} d
 * @param {{setMode: (m: (typeof GRID_COLORS)[number]) => void, pick: (i: number, j: number) => void,
 *   picked: () => {pos: number, row: number}, hover: (e: MouseEvent|null) => void, leave: () => void,
 *   locate: (e: MouseEvent) => {pos: number, row: number}|null}} v
 * @returns {Array<() => void>}
 */
function gridListeners(ctx, d, v) {
  const { canvas, scroller } = d;
  return [
    ...d.modeButtons.map((b) => listen(b, "click", () => v.setMode(/** @type {any} */ (b.getAttribute("data-grid-color"))))),
    listen(scroller, "scroll", () => v.hover(null), { passive: true }),
    listen(canvas, "mousemove", (e) => v.hover(e)),
    listen(canvas, "mouseleave", () => v.leave()),
    listen(canvas, "click", (e) => {
      const at = v.locate(e);
      if (!at) return;
      const r = ctx.result;
      v.pick(at.pos, at.row >= 0 ? at.row : r ? r.k : 0);
    }),
    listen(canvas, "keydown", (e) => {
      const r = ctx.result;
      if (!r) return;
      const cur = ctx.selected() >= 0 ? ctx.selected() : 0;
      const picked = v.picked();
      const row = picked.row >= 0 ? picked.row : r.k;
      let next = null;
      if (e.key === "ArrowRight") next = [Math.min(r.T - 1, cur + 1), row];
      else if (e.key === "ArrowLeft") next = [Math.max(0, cur - 1), row];
      else if (e.key === "ArrowDown") next = [cur, Math.min(r.k, row + 1)];
      else if (e.key === "ArrowUp") next = [cur, Math.max(0, row - 1)];
      else if (e.key === "Home") next = [0, row];
      else if (e.key === "End") next = [r.T - 1, row];
      if (!next) return;
      e.preventDefault();
      v.pick(next[0], next[1]);
    }),
  ];
}
