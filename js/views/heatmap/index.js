/**
 * The layer heatmap: positions (rows) × segments (columns), signed contributions on the
 * diverging scale centred at 0 with symmetric limits.
 *
 * Speed: the cells are written once (one pixel per cell, ImageData) into an offscreen
 * canvas whenever the result or theme changes; a frame is then one scaled drawImage of
 * the visible rows plus their labels. Hover and selection redraw only the overlay canvas.
 * Long prompts scroll; only visible rows are drawn, so 1,000 tokens × 40 blocks costs the
 * same per frame as 30 tokens.
 *
 * Parts: `heatmap/paint.js` (the painters), `heatmap/text.js` (labels, summary, tooltip,
 * note, jump search); the cells come from `paint/bitmap.js`, the colours from `palette.js`.
 * @module views/heatmap
 */
import { h, clear, listen, context2d, borders } from "../../lib/dom.js";
import { heatmapGeometry, hitTest, visibleRows, scrollToRow, clamp } from "../../lib/layout.js";
import { divergingScale } from "../../lib/colorscale.js";
import { readPalette, defaultPalette, nanRgb } from "../../lib/palette.js";
import { contributionBitmap, rowLimits } from "../../paint/bitmap.js";
import { drawCells, drawRows, drawHeader, drawOverlay, drawMinimap } from "./paint.js";
import { rowLabels, fillSummary, fillTooltip, heatmapNote, findRow } from "./text.js";
import { createLegend, drawLegend } from "../legend.js";

/** The heatmap's elements. */
function heatmapDom() {
  const canvas = h("canvas", { class: "iglens-heatmap-canvas", tabindex: 0, role: "img" });
  const overlay = h("canvas", { class: "iglens-heatmap-overlay", "aria-hidden": "true" });
  const stage = h("div", { class: "iglens-heatmap-stage" }, canvas, overlay);
  const spacer = h("div", { class: "iglens-heatmap-spacer" });
  const scroller = h("div", { class: "iglens-heatmap-scroll" }, stage, spacer);
  const tooltip = h("div", { class: "iglens-tooltip", role: "tooltip" });
  tooltip.hidden = true;
  const legend = createLegend("iglens-heatmap-legend");
  const title = h("h2", { class: "iglens-section-title", text: "Contribution of each block" });
  const note = h("p", { class: "iglens-foot" });
  // the overview of every row (long prompts): click or drag to scroll there
  const minimap = h("canvas", { class: "iglens-minimap", "data-view": "minimap", role: "img", "aria-label": "Overview of all rows: click to scroll there" });
  const body = h("div", { class: "iglens-heatmap-body" }, scroller, minimap);
  // colour limit: the whole prompt's largest |contribution|, each row's own, or a number the user sets (kept across recomputes)
  const scaleMode = h(
    "select",
    { class: "iglens-input iglens-scale-mode", name: "heatmap_scale", "aria-label": "colour limit of the heatmap" },
    h("option", { value: "prompt", text: "scale: whole prompt" }),
    h("option", { value: "row", text: "scale: each row" }),
    h("option", { value: "fixed", text: "scale: fixed (locked)" }),
  );
  const limitInput = h("input", {
    class: "iglens-input iglens-scale-limit",
    name: "heatmap_limit",
    type: "number",
    min: 0,
    step: "any",
    "aria-label": "fixed colour limit (largest |contribution| shown at full colour)",
    title: "the |contribution| shown at full colour; kept when the result changes",
  });
  limitInput.hidden = true;
  const jumpInput = h("input", {
    class: "iglens-input iglens-jump-input",
    name: "jump",
    type: "text",
    placeholder: "jump to # or token",
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": "jump to a position (number) or the next token containing this text",
  });
  const jumpForm = h("form", { class: "iglens-jump", novalidate: true }, jumpInput);
  const tools = h("div", { class: "iglens-heatmap-tools" }, scaleMode, limitInput, h("span", { class: "iglens-spacer" }), jumpForm);
  // what is selected, in words, right above the rows: a click here changes something in view at any width
  const summary = h("div", { class: "iglens-heatmap-summary", "aria-live": "polite" });
  const el = h(
    "section",
    { class: "iglens-heatmap", "aria-label": "Layer heatmap" },
    h("div", { class: "iglens-section-head" }, title, h("span", { class: "iglens-spacer" }), legend),
    tools,
    summary,
    body,
    tooltip,
    note,
  );
  return { el, canvas, overlay, stage, spacer, scroller, tooltip, legend, title, note, minimap, body, scaleMode, limitInput, jumpInput, jumpForm, summary };
}

/** @typedef {ReturnType<typeof heatmapDom>} HeatmapDom */

/**
 * Lay the heatmap out for the body's width: the geometry, the overview's width, and every
 * element sized. The canvas takes the scroller's inner width: without its border and
 * without a classic vertical scrollbar (measured, 0 for overlay scrollbars), so that it
 * never scrolls sideways and a short prompt gets no scrollbar at all.
 * @param {HeatmapDom} d @param {import("../../model/result.js").Result} r @param {boolean} present
 * @param {number} fallback the width to assume when the body has none (detached)
 */
function layoutHeatmap(d, r, present, fallback) {
  const { scroller, stage, spacer, minimap } = d;
  const avail = d.body.clientWidth || d.el.clientWidth || fallback || 640;
  const frame = borders(scroller);
  // presentation mode: a shorter view on a short screen (a 1024×768 projector shows the strip,
  // the rows and the detail's curve at once); elsewhere the default height
  const innerH = typeof window !== "undefined" ? window.innerHeight : 0;
  const maxHeight = present && innerH > 0 ? Math.max(240, Math.min(440, Math.round(innerH * 0.42))) : undefined;
  const rough = heatmapGeometry({ T: r.T, k: r.k, width: avail, present, maxHeight });
  const minimapW = rough.contentH > rough.viewH ? 30 : 0; // an overview only when rows scroll
  const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  minimap.hidden = !minimapW;
  if (minimapW) {
    minimap.width = Math.round(minimapW * dpr);
    minimap.height = Math.round(rough.viewH * dpr);
    minimap.style.width = `${minimapW}px`;
    minimap.style.height = `${rough.viewH}px`;
  }
  // heights first (they decide the vertical scrollbar), the content narrow while measuring
  scroller.style.height = `${rough.viewH + frame.y}px`;
  stage.style.height = `${rough.viewH}px`;
  spacer.style.height = `${Math.max(0, rough.contentH - rough.viewH)}px`;
  stage.style.width = "0px";
  spacer.style.width = "0px";
  const inner = scroller.clientWidth;
  const w = Math.max(160, inner > 0 ? inner : avail - (minimapW ? minimapW + 6 : 0) - frame.x);
  const g = heatmapGeometry({ T: r.T, k: r.k, width: w, present, maxHeight });
  stage.style.width = `${g.width}px`;
  spacer.style.width = `${g.width}px`;
  d.canvas.setAttribute("data-row-height", String(g.rowH));
  d.canvas.setAttribute("data-header-height", String(g.headerH));
  d.canvas.setAttribute("data-label-width", String(g.labelW));
  for (const c of [d.canvas, d.overlay]) {
    c.width = Math.round(g.width * dpr);
    c.height = Math.round(g.viewH * dpr);
    c.style.width = `${g.width}px`;
    c.style.height = `${g.viewH}px`;
  }
  d.canvas.setAttribute("aria-label", `Heatmap of ${r.T} positions by ${r.k} segments; arrow keys move the selection`);
  d.title.textContent = r.singleBlocks ? "Contribution of each block" : "Contribution of each segment";
  d.note.textContent = heatmapNote(r, g.contentH > g.viewH);
  return { g, minimapW, dpr, avail, width: w };
}

/** Place the tooltip next to the pointer, inside the heatmap. @param {HTMLElement} tooltip @param {HTMLElement} el @param {MouseEvent} e */
function placeTooltip(tooltip, el, e) {
  const box = el.getBoundingClientRect();
  const tw = tooltip.offsetWidth || 220;
  const th = tooltip.offsetHeight || 160;
  let x = e.clientX - box.left + 14;
  let y = e.clientY - box.top + 14;
  if (x + tw > box.width - 4) x = e.clientX - box.left - tw - 14;
  if (y + th > box.height + 40) y = e.clientY - box.top - th - 10;
  tooltip.style.left = `${clamp(x, 0, Math.max(0, box.width - tw))}px`;
  tooltip.style.top = `${Math.max(0, y)}px`;
}

/**
 * The row of the overview under the pointer (-1 without a result).
 * @param {HTMLCanvasElement} minimap @param {import("../../model/result.js").Result|null} r @param {MouseEvent} e
 */
function minimapRow(minimap, r, e) {
  if (!r) return -1;
  const rect = minimap.getBoundingClientRect();
  return clamp(Math.floor(((e.clientY - rect.top) / Math.max(1, rect.height)) * r.T), 0, r.T - 1);
}

/**
 * The colour limit of the cells: the whole prompt's largest |contribution|, each row's own,
 * or a number the user sets (kept across recomputes).
 * @param {import("../context.js").Context} ctx
 */
function heatmapColouring(ctx) {
  /** @type {"prompt"|"row"|"fixed"} */
  let mode = "prompt";
  let fixedLimit = NaN;
  /** @type {Float64Array|null} each row's largest |contribution| (per-row scale) */
  let rowLimit = null;
  /** The colour limit in use (the value shown at full colour; per row: 1 = the row's largest). */
  const current = () => (mode === "fixed" && fixedLimit > 0 ? fixedLimit : ctx.result ? ctx.result.contribLimit : 1);
  return {
    mode: () => mode,
    current,
    fixedLimit: () => fixedLimit,
    /** The limit a row's cells are coloured against. @param {number} i */
    limitOf: (/** @type {number} */ i) => (mode === "row" && rowLimit ? rowLimit[i] : current()),
    /** The cells of r as a bitmap, in this colouring. @param {import("../../model/result.js").Result} r */
    bitmap(r) {
      rowLimit = rowLimits(r);
      const scale = divergingScale(mode === "row" ? 1 : current(), ctx.theme);
      return contributionBitmap(r, scale, nanRgb(ctx.theme), mode === "row" ? rowLimit : null);
    },
    /** @param {"prompt"|"row"|"fixed"} next */
    setMode(next) {
      if (next === "fixed" && !(fixedLimit > 0)) fixedLimit = current();
      mode = next;
    },
    /** @param {number} v @returns {boolean} whether v is a limit */
    setLimit(v) {
      if (!(v > 0 && Number.isFinite(v))) return false;
      fixedLimit = v;
      return true;
    },
    /** The legend of this colouring. @param {HTMLElement} legend @param {import("../../model/result.js").Result} r */
    legend(legend, r) {
      if (mode === "row") drawLegend(legend, divergingScale(1, ctx.theme), "contribution \u00f7 row's largest |contribution|");
      else drawLegend(legend, divergingScale(current(), ctx.theme), `contribution to ${r.targetName}` + (mode === "fixed" ? " (fixed scale)" : ""));
    },
  };
}

/**
 * The heatmap's canvases: layout, the frame (cells, rows, header), the overlay and the
 * overview, at the view's own scroll offset.
 * @param {import("../context.js").Context} ctx @param {HeatmapDom} d @param {ReturnType<typeof heatmapColouring>} colouring
 */
function heatmapCanvas(ctx, d, colouring) {
  const { canvas, overlay, scroller, tooltip, minimap } = d;
  /** @type {import("../../lib/layout.js").HeatmapGeometry|null} */
  let g = null;
  /** @type {HTMLCanvasElement|null} */
  let bitmap = null;
  let width = 0;
  let avail = 0;
  let dpr = 1;
  /** @type {import("../../lib/layout.js").Hit|null} */
  let hit = null;
  let frame = 0;
  /** @type {string[]} */
  let labels = [];
  // The view's own scroll offset: every frame, hover and click uses it, and the scroller is
  // brought back to it after a relayout (a re-theme, a detached-and-re-attached output, a
  // resize), so the drawn rows, the hover and the selection always agree.
  let top = 0;
  let minimapW = 0;
  let pal = defaultPalette("light");

  function draw() {
    frame = 0;
    const r = ctx.result;
    const c = context2d(canvas);
    if (!c || !g || !r) return;
    syncScroll();
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = pal.bg;
    c.fillRect(0, 0, g.width, g.viewH);
    const vis = visibleRows(g, top);
    c.save();
    c.beginPath();
    c.rect(0, g.headerH, g.width, g.viewH - g.headerH);
    c.clip();
    if (vis && bitmap) drawCells(c, g, bitmap, r.k, vis[0], vis[1], top);
    if (vis) drawRows(c, g, r, pal, { first: vis[0], last: vis[1], top, labels, limitOf: colouring.limitOf });
    c.restore();
    canvas.setAttribute("data-first-row", String(vis ? vis[0] : -1));
    canvas.setAttribute("data-scroll-top", String(top));
    drawHeader(c, g, r, pal);
    paintOverlay();
    paintMinimap();
  }

  /** Bring the scroller back to the view's offset (or take the scroller's, when the view's no longer fits). */
  function syncScroll() {
    if (!g) return;
    const max = Math.max(0, g.contentH - g.viewH);
    top = clamp(top, 0, max);
    if (scroller.clientHeight > 0 && Math.abs(scroller.scrollTop - top) >= 1) {
      scroller.scrollTop = top;
      if (Math.abs(scroller.scrollTop - top) >= 1) top = scroller.scrollTop; // the browser could not scroll there
    }
  }

  /** @param {number} next */
  function scrollTo(next) {
    if (!g) return;
    top = clamp(next, 0, Math.max(0, g.contentH - g.viewH));
    syncScroll();
    tooltip.hidden = true;
    hit = null;
    schedule();
  }

  function paintOverlay() {
    const r = ctx.result;
    const c = context2d(overlay);
    if (!c || !g || !r) return;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    drawOverlay(c, g, r, pal, { top, hovered: ctx.hovered(), selected: ctx.selected(), hit });
  }

  function paintMinimap() {
    const r = ctx.result;
    if (!minimapW || !g || !r) return;
    const c = context2d(minimap);
    if (!c) return;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    drawMinimap(c, r, pal, { w: minimapW, h: g.viewH, bitmap, visible: visibleRows(g, top), selected: ctx.selected() });
  }

  function schedule() {
    if (frame) return;
    frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(draw) : (setTimeout(draw, 16), 1);
  }

  return {
    draw,
    schedule,
    scrollTo,
    paintOverlay,
    paintMinimap,
    geometry: () => g,
    top: () => top,
    /** The palette again (theme changed). */
    readPalette: () => (pal = readPalette(ctx.root, ctx.theme)),
    /** Recompute geometry for the current width; resize the canvases. */
    layout() {
      const r = ctx.result;
      if (!r) {
        g = null;
        return;
      }
      ({ g, minimapW, dpr, avail, width } = layoutHeatmap(d, r, ctx.root.classList.contains("iglens-present"), width + minimapW));
    },
    /** Whether the body's width is the one laid out for. @param {number} w */
    laidOutFor: (w) => !!(w && w === avail && g),
    /** Build the one-pixel-per-cell bitmap and the row labels. */
    rebuild() {
      bitmap = null;
      const r = ctx.result;
      if (!r || !r.k || !r.T) return;
      labels = rowLabels(r);
      bitmap = colouring.bitmap(r);
    },
    /** The user scrolled the scroller. */
    scrolled() {
      top = scroller.scrollTop;
      tooltip.hidden = true;
      hit = null;
      schedule();
    },
    /** What is under the pointer. @param {MouseEvent} e */
    locate(e) {
      if (!g) return null;
      const rect = canvas.getBoundingClientRect();
      return hitTest(g, e.clientX - rect.left, e.clientY - rect.top, top);
    },
    hit: () => hit,
    /** @param {import("../../lib/layout.js").Hit|null} next */
    setHit(next) {
      hit = next;
    },
    /** Centre row i in the view. @param {number} i */
    centreRow(i) {
      if (!g) return;
      scrollTo(i * g.rowH - (g.viewH - g.headerH) / 2 + g.rowH / 2);
    },
    /** The row of the overview under the pointer. @param {MouseEvent} e */
    minimapRow: (e) => (g ? minimapRow(minimap, ctx.result, e) : -1),
    cancel() {
      if (frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(frame);
    },
  };
}

/**
 * @param {import("../context.js").Context} ctx
 */
export function createHeatmap(ctx) {
  const d = heatmapDom();
  const { el, canvas, tooltip } = d;
  const colouring = heatmapColouring(ctx);
  const view = heatmapCanvas(ctx, d, colouring);

  function legendUpdate() {
    const r = ctx.result;
    if (!r) {
      clear(d.legend);
      return;
    }
    colouring.legend(d.legend, r);
    el.setAttribute("data-scale", colouring.mode());
    el.setAttribute("data-limit", String(colouring.current()));
  }

  /** The selected row in words, above the rows. */
  function updateSummary() {
    const panel = ctx.root.querySelector(".iglens-detail");
    fillSummary(d.summary, ctx.result, ctx.selected(), panel && !ctx.root.classList.contains("iglens-wide") ? /** @type {HTMLElement} */ (panel) : null);
  }

  /** New colour limit: rebuild the cells and the legend. */
  function recolour() {
    view.rebuild();
    legendUpdate();
    view.draw();
  }

  const offs = heatmapListeners(ctx, d, {
    scrolled: view.scrolled,
    minimapRow: view.minimapRow,
    centreRow: view.centreRow,
    setMode(next) {
      colouring.setMode(next);
      d.limitInput.hidden = next !== "fixed";
      if (next === "fixed") d.limitInput.value = String(Number(colouring.fixedLimit().toPrecision(3)));
      recolour();
    },
    setLimit(v) {
      if (colouring.setLimit(v)) recolour();
      else d.limitInput.value = String(colouring.fixedLimit());
    },
    hover(e) {
      const hit = view.hit();
      const next = view.locate(e);
      const changed = !hit !== !next || (hit && next && (hit.pos !== next.pos || hit.seg !== next.seg || hit.region !== next.region));
      view.setHit(next);
      if (changed) {
        view.paintOverlay();
        if (next && next.region !== "colLabel") ctx.hover(next.pos);
      }
      const r = ctx.result;
      if (!r || !next || next.region === "colLabel") tooltip.hidden = true;
      else {
        fillTooltip(tooltip, r, next);
        tooltip.hidden = false;
        placeTooltip(tooltip, el, e);
      }
      canvas.style.cursor = next && next.region !== "colLabel" ? "pointer" : "default";
    },
    leave() {
      view.setHit(null);
      tooltip.hidden = true;
      ctx.hover(-1);
      view.paintOverlay();
    },
    locate: view.locate,
    page() {
      const g = view.geometry();
      return g ? Math.floor((g.viewH - g.headerH) / g.rowH) : 0;
    },
  });

  return {
    el,
    canvas,
    /** Rebuild everything (new result or theme). */
    full() {
      view.readPalette();
      view.layout();
      view.rebuild();
      legendUpdate();
      view.draw();
      updateSummary();
    },
    /** Width changed (or the view came back into the page): lay out again and redraw at the view's offset. */
    resize() {
      const w = d.body.clientWidth || el.clientWidth;
      if (!ctx.result) return;
      if (!view.laidOutFor(w)) view.layout();
      view.draw();
    },
    /** Selection or hover changed; scroll the selected row into view when asked. */
    updateSelection(/** @type {boolean} */ scroll) {
      const sel = ctx.selected();
      const g = view.geometry();
      if (scroll) updateSummary();
      if (scroll && g && sel >= 0) {
        const next = scrollToRow(g, sel, view.top());
        if (next !== view.top()) {
          view.scrollTo(next);
          view.draw();
          return;
        }
      }
      view.paintOverlay();
      view.paintMinimap();
    },
    /** Scroll so that the selected row is in the middle of the view (the first paint). */
    centreSelection() {
      const sel = ctx.selected();
      if (sel >= 0 && view.geometry()) {
        view.centreRow(sel);
        view.draw();
      }
    },
    destroy() {
      offs.forEach((off) => off());
      view.cancel();
    },
  };
}

/**
 * @typedef {object} HeatmapActions what the listeners ask of the view
 * @property {() => void} scrolled @property {(e: MouseEvent) => number} minimapRow
 * @property {(i: number) => void} centreRow @property {(m: "prompt"|"row"|"fixed") => void} setMode
 * @property {(v: number) => void} setLimit @property {(e: MouseEvent) => void} hover
 * @property {() => void} leave @property {(e: MouseEvent) => import("../../lib/layout.js").Hit|null} locate
 * @property {() => number} page rows per page
 */

/**
 * The heatmap's listeners: scrolling, the overview, the scale controls, the jump box, hover,
 * click and keys.
 * @param {import("../context.js").Context} ctx @param {HeatmapDom} d @param {HeatmapActions} v
 * @returns {Array<() => void>}
 */
function heatmapListeners(ctx, d, v) {
  const { canvas, scroller, minimap, jumpForm, jumpInput } = d;
  return [
    listen(
      scroller,
      "scroll",
      () => {
        // a detached or hidden scroller reads 0: that is not the user scrolling
        if (scroller.clientHeight === 0 || !scroller.isConnected) return;
        v.scrolled();
      },
      { passive: true },
    ),
    listen(minimap, "pointerdown", (e) => {
      const i = v.minimapRow(e);
      if (i < 0) return;
      v.centreRow(i);
      try {
        minimap.setPointerCapture(e.pointerId);
      } catch {
        /* synthetic events */
      }
    }),
    listen(minimap, "pointermove", (e) => {
      if (!(e.buttons & 1)) return;
      const i = v.minimapRow(e);
      if (i >= 0) v.centreRow(i);
    }),
    listen(d.scaleMode, "change", () => v.setMode(/** @type {"prompt"|"row"|"fixed"} */ (d.scaleMode.value))),
    listen(d.limitInput, "change", () => v.setLimit(Number(d.limitInput.value))),
    listen(jumpForm, "submit", (e) => {
      e.preventDefault();
      const i = findRow(ctx.result, jumpInput.value, ctx.selected());
      if (i < 0) {
        jumpInput.setCustomValidity("no such position or token");
        jumpInput.reportValidity?.();
        return;
      }
      jumpInput.setCustomValidity("");
      ctx.select(i);
    }),
    listen(jumpForm, "keydown", (e) => e.stopPropagation()),
    listen(canvas, "mousemove", (e) => v.hover(e)),
    listen(canvas, "mouseleave", () => v.leave()),
    listen(canvas, "click", (e) => {
      const at = v.locate(e);
      if (!at || at.pos < 0) return;
      // a cell also picks its segment for the detail's head shares (before the selection
      // changes, so the detail renders the new token with it)
      if (at.region === "cell" && at.seg >= 0) ctx.focusSegment(at.pos, at.seg);
      ctx.select(at.pos);
    }),
    listen(canvas, "keydown", (e) => {
      const r = ctx.result;
      if (!r) return;
      const cur = ctx.selected();
      let next = null;
      if (e.key === "ArrowDown" || e.key === "ArrowRight") next = cur < 0 ? 0 : Math.min(r.T - 1, cur + 1);
      else if (e.key === "ArrowUp" || e.key === "ArrowLeft") next = cur < 0 ? 0 : Math.max(0, cur - 1);
      else if (e.key === "PageDown" && v.page()) next = Math.min(r.T - 1, Math.max(cur, 0) + v.page());
      else if (e.key === "PageUp" && v.page()) next = Math.max(0, cur - v.page());
      else if (e.key === "Home") next = 0;
      else if (e.key === "End") next = r.T - 1;
      else if (e.key === "Escape") {
        ctx.select(-1);
        e.preventDefault();
        e.stopPropagation();
        return;
      }
      if (next === null) return;
      e.preventDefault();
      ctx.select(next);
    }),
  ];
}
