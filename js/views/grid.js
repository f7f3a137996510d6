/**
 * The classic logit-lens grid: boundaries (rows: embeddings at the top, block n at the
 * bottom) × positions (columns, the input tokens along the top, their targets along the
 * bottom), the lens's top-1 token written in each cell, coloured by its probability or by
 * the IG-Lens contribution of the segment that ends at that boundary. Hover previews a
 * position, a click selects it and lists that cell's top-k tokens; the selected column is
 * highlighted and scrolled into view when another view selects.
 *
 * Speed: one canvas the size of the viewport; a frame draws only the visible cells (fillText
 * per cell), so 512 positions cost what 20 do. Token text is drawn with `fillText` (never
 * parsed) after `formatToken`.
 * @module views/grid
 */
import { h, clear, listen, fitText, keyValue } from "../dom.js";
import { clamp } from "../layout.js";
import { divergingScale, sequentialScale, textColorFor, hexToRgb } from "../colorscale.js";
import { formatToken, quoteToken } from "../tokens.js";
import { contribution, topAt, idText, lensAt, segmentText, depthText } from "../result.js";
import { fmtProb, fmtSigned } from "../format.js";
import { createLegend, drawLegend } from "./legend.js";

/** The grid's colourings: the top-1 token's probability, or the IG-Lens contribution. */
export const GRID_COLORS = /** @type {const} */ (["probability", "contribution"]);

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
 * Short label of boundary j: "emb" (0), "12" (after block 12), "12.a" (after block 12's
 * attention, under sub-layer boundaries).
 * @param {number} depth
 */
export function boundaryLabel(depth) {
  if (depth === 0) return "emb";
  return Number.isInteger(depth) ? String(depth) : `${Math.ceil(depth)}.a`;
}

/**
 * The value a cell is coloured by: the top-1 probability at boundary j, or the contribution
 * of the segment that ends at boundary j (NaN at the embeddings and without a target).
 * @param {import("../result.js").Result} r @param {number} i @param {number} j
 * @param {(typeof GRID_COLORS)[number]} mode
 */
export function cellValue(r, i, j, mode) {
  if (mode === "contribution") return j > 0 && r.hasTarget[i] ? contribution(r, i, j - 1) : NaN;
  const t = topAt(r, i, j, 1)[0];
  return t ? t.p : NaN;
}

/**
 * The colour scale of a grid colouring.
 * @param {import("../result.js").Result} r @param {(typeof GRID_COLORS)[number]} mode
 * @param {"light"|"dark"} theme @param {number} [limit] contribution limit (default: the result's)
 */
export function gridScale(r, mode, theme, limit) {
  return mode === "contribution" ? divergingScale(limit ?? r.contribLimit, theme) : sequentialScale(theme, 0, 1);
}

/**
 * @param {import("./context.js").Context} ctx
 */
export function createGrid(ctx) {
  const canvas = h("canvas", { class: "iglens-grid-canvas", tabindex: 0, role: "img" });
  const stage = h("div", { class: "iglens-grid-stage" }, canvas);
  const spacer = h("div", { class: "iglens-grid-spacer" });
  const scroller = h("div", { class: "iglens-grid-scroll" }, stage, spacer);
  const tooltip = h("div", { class: "iglens-grid-tooltip", role: "tooltip" });
  tooltip.hidden = true;
  const legend = createLegend("iglens-grid-legend");
  /** @type {(typeof GRID_COLORS)[number]} */
  let mode = "probability";
  const modeButtons = GRID_COLORS.map((m) => h("button", {
    type: "button", class: "iglens-seg-button", "data-grid-color": m, "aria-pressed": m === mode ? "true" : "false",
    text: m === "probability" ? "top-1 probability" : "IG-Lens contribution",
  }));
  const modeGroup = h("div", { class: "iglens-seg", role: "group", "aria-label": "Colour the grid by" },
    h("span", { class: "iglens-muted", text: "colour:" }), ...modeButtons);
  const topk = h("div", { class: "iglens-grid-topk", "aria-live": "polite" });
  const note = h("p", { class: "iglens-foot" });
  const el = h("section", { class: "iglens-lensgrid", "data-view": "grid", "data-grid-color": mode, "aria-label": "Logit-lens grid" },
    h("div", { class: "iglens-section-head" },
      h("h3", { class: "iglens-section-title", text: "Logit lens: top-1 token after each block" }),
      h("span", { class: "iglens-spacer" }), modeGroup, legend),
    scroller, tooltip, topk, note);

  /** @type {GridGeometry|null} */
  let g = null;
  let dpr = 1;
  let frame = 0;
  let font = "system-ui, sans-serif";
  let colors = { fg: "#1f2328", muted: "#656d76", bg: "#ffffff", accent: "#0969da", nan: "#dcdcdc", line: "#d0d7de", answer: "#8250df" };
  /** @type {{pos: number, row: number}|null} */
  let hit = null;
  /** the cell whose top-k is listed: {pos, row} */
  let picked = { pos: -1, row: -1 };
  /** @type {Map<number, string>} formatted top-1 labels by cell index (cleared per result) */
  const labels = new Map();
  let visible = /** @type {[number, number]|null} */ (null);

  const ctx2d = () => { try { return canvas.getContext("2d"); } catch { return null; } };

  function readColors() {
    const cs = getComputedStyle(ctx.root);
    const v = (/** @type {string} */ name, /** @type {string} */ fb) => cs.getPropertyValue(name).trim() || fb;
    const dark = ctx.theme === "dark";
    font = cs.fontFamily || font;
    colors = {
      fg: v("--iglens-fg", dark ? "#e6edf3" : "#1f2328"),
      muted: v("--iglens-fg-muted", dark ? "#9198a1" : "#656d76"),
      bg: v("--iglens-bg", dark ? "#0d1117" : "#ffffff"),
      accent: v("--iglens-accent", dark ? "#4493f8" : "#0969da"),
      nan: dark ? "#3a3f45" : "#e4e4e4",
      line: dark ? "#30363d" : "#d0d7de",
      answer: v("--iglens-answer", dark ? "#b692f6" : "#8250df"),
    };
  }

  function scale() {
    const r = ctx.result;
    return r ? gridScale(r, mode, ctx.theme) : null;
  }

  function layout() {
    const r = ctx.result;
    if (!r) { g = null; return; }
    g = gridGeometry({ T: r.T, rows: r.k + 1, width: scroller.clientWidth || el.clientWidth || 640 });
    dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
    scroller.style.height = `${g.viewH + (g.contentW > g.viewW ? 12 : 0)}px`;
    stage.style.width = `${g.viewW}px`;
    stage.style.height = `${g.viewH}px`;
    // the spacer sits under the sticky stage: its width is the scroll width, its height
    // (with the stage's) the scroll height
    spacer.style.width = `${g.contentW}px`;
    spacer.style.height = `${Math.max(1, g.contentH - g.viewH)}px`;
    canvas.width = Math.round(g.viewW * dpr);
    canvas.height = Math.round(g.viewH * dpr);
    canvas.style.width = `${g.viewW}px`;
    canvas.style.height = `${g.viewH}px`;
    canvas.setAttribute("aria-label", `Logit-lens grid of ${r.T} positions by ${r.k + 1} boundaries; arrow keys move the selection`);
    note.textContent = `Columns: positions (input token on top, its target below); rows: the residual stream after each ${r.halves ? "attention or MLP half" : "block"} (emb = embeddings), read through the final norm and head. `
      + `Each cell shows the lens's top-1 token there${r.K ? "" : " (this result has no top tokens)"}; bold: it is the target. `
      + (mode === "contribution" ? "Colour: IG-Lens contribution of the segment that ends at that row. " : "Colour: probability of the top-1 token. ")
      + "Click a cell for its top tokens." + (g.contentW > g.viewW ? " Scroll sideways for more positions." : "");
  }

  /** @param {number} i @param {number} j */
  function label(i, j) {
    const r = /** @type {import("../result.js").Result} */ (ctx.result);
    const key = i * (r.k + 1) + j;
    let s = labels.get(key);
    if (s === undefined) {
      const t = topAt(r, i, j, 1)[0];
      s = t ? formatToken(t.text, { maxLen: 8 }) : "";
      labels.set(key, s);
    }
    return s;
  }

  function draw() {
    frame = 0;
    const r = ctx.result;
    const c = ctx2d();
    if (!c || !g || !r) return;
    const sl = scroller.scrollLeft;
    const st = scroller.scrollTop;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = colors.bg;
    c.fillRect(0, 0, g.viewW, g.viewH);
    const cols = visibleColumns(g, sl);
    const rows = visibleGridRows(g, st);
    visible = cols;
    el.setAttribute("data-first-column", cols ? String(cols[0]) : "");
    el.setAttribute("data-last-column", cols ? String(cols[1]) : "");
    const sc = /** @type {import("../colorscale.js").Scale} */ (scale());
    const nanRgb = hexToRgb(colors.nan);
    const bottom = g.viewH - g.footerH;
    c.textBaseline = "middle";
    c.textAlign = "center";
    if (cols && rows) {
      c.save();
      c.beginPath();
      c.rect(g.labelW, g.headerH, g.viewW - g.labelW, bottom - g.headerH);
      c.clip();
      for (let i = cols[0]; i <= cols[1]; i++) {
        const x = g.labelW + i * g.colW - sl;
        for (let j = rows[0]; j <= rows[1]; j++) {
          const y = g.headerH + j * g.rowH - st;
          const v = cellValue(r, i, j, mode);
          const rgb = sc.rgb(v) ?? nanRgb;
          c.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
          c.fillRect(x, y, g.colW - 1, g.rowH - 1);
          const text = label(i, j);
          if (!text) continue;
          const t = topAt(r, i, j, 1)[0];
          const isTarget = !!t && r.hasTarget[i] && t.id === r.targetIds[i];
          c.font = `${isTarget ? "700 " : ""}${g.rowH >= 20 ? 11.5 : 10.5}px ${font}`;
          c.fillStyle = textColorFor(rgb);
          c.fillText(fitText(c, text, g.colW - 6), x + (g.colW - 1) / 2, y + g.rowH / 2);
        }
      }
      c.restore();
    }
    // row labels (left gutter), over the cells' band
    c.fillStyle = colors.bg;
    c.fillRect(0, g.headerH, g.labelW, bottom - g.headerH);
    if (rows) {
      c.save();
      c.beginPath();
      c.rect(0, g.headerH, g.labelW, bottom - g.headerH);
      c.clip();
      c.font = `11px ${font}`;
      c.textAlign = "right";
      c.fillStyle = colors.muted;
      for (let j = rows[0]; j <= rows[1]; j++) c.fillText(boundaryLabel(r.boundaries[j]), g.labelW - 8, g.headerH + j * g.rowH - st + g.rowH / 2);
      c.restore();
    }
    // header (input tokens) and footer (targets)
    c.fillStyle = colors.bg;
    c.fillRect(0, 0, g.viewW, g.headerH);
    c.fillRect(0, bottom, g.viewW, g.footerH);
    c.font = `11px ${font}`;
    c.textAlign = "left";
    c.fillStyle = colors.muted;
    c.fillText("block", 6, g.headerH / 2);
    c.fillText("\u2192 target", 4, bottom + g.footerH / 2);
    if (cols) {
      c.save();
      c.beginPath();
      c.rect(g.labelW, 0, g.viewW - g.labelW, g.viewH);
      c.clip();
      c.textAlign = "center";
      for (let i = cols[0]; i <= cols[1]; i++) {
        const cx = g.labelW + i * g.colW - sl + (g.colW - 1) / 2;
        c.font = `600 11.5px ${font}`;
        c.fillStyle = i >= r.answerStart ? colors.answer : colors.fg;
        c.fillText(fitText(c, formatToken(r.tokens[i], { maxLen: 8 }), g.colW - 6), cx, g.headerH / 2 + 1);
        c.font = `11px ${font}`;
        c.fillStyle = colors.muted;
        const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 8 }) : "\u2013";
        c.fillText(fitText(c, tgt, g.colW - 6), cx, bottom + g.footerH / 2);
      }
      c.restore();
    }
    drawMarks(c, sl, st);
  }

  /** selection and hover outlines @param {CanvasRenderingContext2D} c @param {number} sl @param {number} st */
  function drawMarks(c, sl, st) {
    if (!g) return;
    const colX = (/** @type {number} */ i) => (g ? g.labelW + i * g.colW - sl : 0);
    c.save();
    c.beginPath();
    c.rect(g.labelW, 0, g.viewW - g.labelW, g.viewH);
    c.clip();
    const hov = ctx.hovered();
    if (hov >= 0 && hov !== ctx.selected()) {
      c.strokeStyle = colors.fg;
      c.globalAlpha = 0.55;
      c.lineWidth = 1;
      c.strokeRect(colX(hov) + 0.5, 0.5, g.colW - 2, g.viewH - 1);
      c.globalAlpha = 1;
    }
    const sel = ctx.selected();
    if (sel >= 0) {
      c.strokeStyle = colors.accent;
      c.lineWidth = 2.5;
      c.strokeRect(colX(sel) - 0.5, 1.25, g.colW, g.viewH - 2.5);
      c.fillStyle = colors.accent;
      c.fillRect(colX(sel) - 0.5, 0, g.colW, 3);
    }
    if (picked.pos >= 0 && picked.row >= 0) {
      const y = g.headerH + picked.row * g.rowH - st;
      c.strokeStyle = colors.bg;
      c.lineWidth = 3;
      c.strokeRect(colX(picked.pos) + 1, y + 1, g.colW - 3, g.rowH - 3);
      c.strokeStyle = colors.fg;
      c.lineWidth = 1.5;
      c.strokeRect(colX(picked.pos) + 1, y + 1, g.colW - 3, g.rowH - 3);
    }
    c.restore();
  }

  function schedule() {
    if (frame) return;
    frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(draw) : (setTimeout(draw, 16), 1);
  }

  function legendUpdate() {
    const r = ctx.result;
    const sc = scale();
    if (!r || !sc) { clear(legend); return; }
    drawLegend(legend, sc, mode === "contribution" ? `contribution to ${r.targetName}` : "top-1 probability");
  }

  /** The top-k list of one cell (text nodes only). */
  function renderTopk() {
    clear(topk);
    const r = ctx.result;
    const i = picked.pos;
    const j = picked.row;
    if (!r || i < 0 || i >= r.T || j < 0 || j > r.k) {
      topk.removeAttribute("data-position");
      topk.removeAttribute("data-boundary");
      topk.appendChild(h("span", { class: "iglens-muted", text: "Click a cell to list the lens's top tokens there." }));
      return;
    }
    topk.setAttribute("data-position", String(i));
    topk.setAttribute("data-boundary", String(j));
    const list = h("ol", { class: "iglens-grid-topk-list" });
    for (const t of topAt(r, i, j, r.K || 5)) {
      const isTarget = r.hasTarget[i] && t.id === r.targetIds[i];
      list.appendChild(h("li", { class: "iglens-grid-topk-item" + (isTarget ? " iglens-tt-hit" : ""), "data-token-id": t.id, title: quoteToken(t.text) },
        h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 18 }) }),
        h("span", { class: "iglens-tt-p", text: fmtProb(t.p) })));
    }
    const where = j === 0 ? "the embeddings" : `after ${depthText(r.boundaries[j])}`;
    topk.append(
      h("div", { class: "iglens-grid-topk-head" },
        h("span", { class: "iglens-pos", text: `[${i}]` }), " ",
        h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 18 }) }),
        h("span", { text: ` lens top-${list.childElementCount} ${where}` }),
        r.hasTarget[i] ? h("span", { class: "iglens-muted", text: ` \u00b7 ${r.targetName} ${fmtProb(lensAt(r, i, j))}` }) : null,
        r.hasTarget[i] && j > 0 ? h("span", { class: "iglens-muted", text: ` \u00b7 contribution of ${segmentText(r, j - 1)} ${fmtSigned(contribution(r, i, j - 1))}` }) : null),
      list.childElementCount ? list : h("span", { class: "iglens-muted", text: "This result has no top tokens." }));
  }

  /** @param {MouseEvent} e */
  function locate(e) {
    if (!g) return null;
    const rect = canvas.getBoundingClientRect();
    return gridHit(g, e.clientX - rect.left, e.clientY - rect.top, scroller.scrollLeft, scroller.scrollTop);
  }

  /** @param {MouseEvent} e */
  function showTooltip(e) {
    const r = ctx.result;
    if (!r || !hit) { tooltip.hidden = true; return; }
    clear(tooltip);
    const i = hit.pos;
    tooltip.appendChild(h("div", { class: "iglens-tt-head" },
      h("span", { class: "iglens-tt-pos", text: `[${i}]` }), " ",
      h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 20 }) }), " \u2192 ",
      h("span", { class: "iglens-chip iglens-chip-target", text: r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 20 }) : "(no target)" })));
    if (hit.row >= 0) {
      const j = hit.row;
      const t = topAt(r, i, j, 1)[0];
      tooltip.appendChild(keyValue(j === 0 ? "embeddings" : `after ${depthText(r.boundaries[j])}`, t ? `${formatToken(t.text, { maxLen: 16 })}  ${fmtProb(t.p)}` : "\u2013"));
      if (r.hasTarget[i]) tooltip.appendChild(keyValue(r.targetName, fmtProb(lensAt(r, i, j))));
      if (r.hasTarget[i] && j > 0) tooltip.appendChild(keyValue(`contribution of ${segmentText(r, j - 1)}`, fmtSigned(contribution(r, i, j - 1))));
    }
    tooltip.hidden = false;
    const box = el.getBoundingClientRect();
    const tw = tooltip.offsetWidth || 220;
    let x = e.clientX - box.left + 14;
    if (x + tw > box.width - 4) x = e.clientX - box.left - tw - 14;
    tooltip.style.left = `${clamp(x, 0, Math.max(0, box.width - tw))}px`;
    tooltip.style.top = `${Math.max(0, e.clientY - box.top + 14)}px`;
  }

  /** @param {(typeof GRID_COLORS)[number]} next */
  function setMode(next) {
    if (next === mode) return;
    mode = next;
    el.setAttribute("data-grid-color", mode);
    for (const b of modeButtons) b.setAttribute("aria-pressed", b.getAttribute("data-grid-color") === mode ? "true" : "false");
    legendUpdate();
    layout();
    draw();
  }

  /** @param {number} i @param {number} j */
  function pick(i, j) {
    picked = { pos: i, row: j };
    renderTopk();
    // a cell below the embeddings also picks its segment for the detail's head shares
    if (j > 0 && ctx.result && ctx.result.hasTarget[i]) ctx.focusSegment(i, j - 1);
    ctx.select(i);
  }

  const offs = [
    ...modeButtons.map((b) => listen(b, "click", () => setMode(/** @type {any} */ (b.getAttribute("data-grid-color"))))),
    listen(scroller, "scroll", () => { tooltip.hidden = true; hit = null; schedule(); }, { passive: true }),
    listen(canvas, "mousemove", (e) => {
      const next = locate(e);
      const changed = !hit !== !next || (hit && next && (hit.pos !== next.pos || hit.row !== next.row));
      hit = next;
      if (changed) ctx.hover(next ? next.pos : -1);
      showTooltip(e);
      canvas.style.cursor = next ? "pointer" : "default";
    }),
    listen(canvas, "mouseleave", () => { hit = null; tooltip.hidden = true; ctx.hover(-1); }),
    listen(canvas, "click", (e) => {
      const at = locate(e);
      if (!at) return;
      const r = ctx.result;
      pick(at.pos, at.row >= 0 ? at.row : (r ? r.k : 0));
    }),
    listen(canvas, "keydown", (e) => {
      const r = ctx.result;
      if (!r) return;
      const cur = ctx.selected() >= 0 ? ctx.selected() : 0;
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
      pick(next[0], next[1]);
    }),
  ];

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
      readColors();
      layout();
      legendUpdate();
      renderTopk();
      if (g && ctx.selected() >= 0) scroller.scrollLeft = scrollToColumn(g, ctx.selected(), scroller.scrollLeft);
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
        picked = { pos: sel, row: picked.row >= 0 ? picked.row : (ctx.result ? ctx.result.k : 0) };
        renderTopk();
      }
      if (scroll && g && sel >= 0) {
        const next = scrollToColumn(g, sel, scroller.scrollLeft);
        if (next !== scroller.scrollLeft) scroller.scrollLeft = next;
      }
      draw();
    },
    destroy() {
      offs.forEach((off) => off());
      if (frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(frame);
    },
  };
}
