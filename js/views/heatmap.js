/**
 * The layer heatmap: positions (rows) × segments (columns), signed contributions on the
 * diverging scale centred at 0 with symmetric limits.
 *
 * Speed: the cells are written once (one pixel per cell, ImageData) into an offscreen
 * canvas whenever the result or theme changes; a frame is then one scaled drawImage of
 * the visible rows plus their labels. Hover and selection redraw only the overlay canvas.
 * Long prompts scroll; only visible rows are drawn, so 1,000 tokens × 40 blocks costs the
 * same per frame as 30 tokens.
 * @module views/heatmap
 */
import { h, clear, listen } from "../dom.js";
import { heatmapGeometry, hitTest, visibleRows, scrollToRow, thinLabels, clamp, cellRect } from "../layout.js";
import { divergingScale, hexToRgb } from "../colorscale.js";
import { formatToken } from "../tokens.js";
import { contribution, lensAt, topAt, idText, pFinal, segmentText, depthText } from "../result.js";
import { fmtProb, fmtSigned } from "../format.js";
import { createLegend, drawLegend } from "./legend.js";

/**
 * @param {import("./context.js").Context} ctx
 */
export function createHeatmap(ctx) {
  const canvas = h("canvas", { class: "iglens-heatmap-canvas", tabindex: 0, role: "img" });
  const overlay = h("canvas", { class: "iglens-heatmap-overlay", "aria-hidden": "true" });
  const stage = h("div", { class: "iglens-heatmap-stage" }, canvas, overlay);
  const spacer = h("div", { class: "iglens-heatmap-spacer" });
  const scroller = h("div", { class: "iglens-heatmap-scroll" }, stage, spacer);
  const tooltip = h("div", { class: "iglens-tooltip", role: "tooltip" });
  tooltip.hidden = true;
  const legend = createLegend("iglens-heatmap-legend");
  const title = h("h3", { class: "iglens-section-title", text: "Contribution of each block" });
  const note = h("p", { class: "iglens-foot" });
  const el = h("section", { class: "iglens-heatmap", "aria-label": "Layer heatmap" },
    h("div", { class: "iglens-section-head" }, title, h("span", { class: "iglens-spacer" }), legend),
    scroller, tooltip, note);

  /** @type {import("../layout.js").HeatmapGeometry|null} */
  let g = null;
  /** @type {HTMLCanvasElement|null} */
  let bitmap = null;
  let width = 0;
  let dpr = 1;
  /** @type {import("../layout.js").Hit|null} */
  let hit = null;
  let frame = 0;
  /** @type {string[]} */
  let rowLabels = [];
  let font = "system-ui, sans-serif";
  let colors = { fg: "#1f2328", muted: "#656d76", bg: "#ffffff", grid: "#ffffff", accent: "#0969da", nan: "#d9d9d9", answer: "#8250df" };

  const ctx2d = (/** @type {HTMLCanvasElement} */ c) => {
    try { return c.getContext("2d"); } catch { return null; }
  };

  function readColors() {
    const cs = getComputedStyle(ctx.root);
    const v = (/** @type {string} */ name, /** @type {string} */ fb) => cs.getPropertyValue(name).trim() || fb;
    const dark = ctx.theme === "dark";
    font = cs.fontFamily || "system-ui, sans-serif";
    colors = {
      fg: v("--iglens-fg", dark ? "#e6edf3" : "#1f2328"),
      muted: v("--iglens-fg-muted", dark ? "#9198a1" : "#656d76"),
      bg: v("--iglens-bg", dark ? "#0d1117" : "#ffffff"),
      grid: v("--iglens-bg", dark ? "#0d1117" : "#ffffff"),
      accent: v("--iglens-accent", dark ? "#4493f8" : "#0969da"),
      nan: dark ? "#3a3f45" : "#dcdcdc",
      answer: v("--iglens-answer", dark ? "#b692f6" : "#8250df"),
    };
  }

  /** Build the one-pixel-per-cell bitmap and the row labels. */
  function buildBitmap() {
    bitmap = null;
    const r = ctx.result;
    if (!r || !r.k || !r.T) return;
    const scale = divergingScale(r.contribLimit, ctx.theme);
    rowLabels = [];
    for (let i = 0; i < r.T; i++) {
      const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 10 }) : "\u2013";
      rowLabels.push(`${formatToken(r.tokens[i], { maxLen: 10 })} \u2192 ${tgt}`);
    }
    const c = document.createElement("canvas");
    c.width = r.k;
    c.height = r.T;
    const cx = ctx2d(c);
    if (!cx) return;
    const img = cx.createImageData(r.k, r.T);
    const px = img.data;
    const lut = scale.lut;
    const nan = hexToRgb(colors.nan);
    for (let i = 0; i < r.T; i++) {
      for (let j = 0; j < r.k; j++) {
        const o = (i * r.k + j) * 4;
        const q = scale.index(contribution(r, i, j));
        if (q < 0) { px[o] = nan[0]; px[o + 1] = nan[1]; px[o + 2] = nan[2]; }
        else { px[o] = lut[q * 3]; px[o + 1] = lut[q * 3 + 1]; px[o + 2] = lut[q * 3 + 2]; }
        px[o + 3] = 255;
      }
    }
    cx.putImageData(img, 0, 0);
    bitmap = c;
  }

  function legendUpdate() {
    const r = ctx.result;
    if (!r) { clear(legend); return; }
    drawLegend(legend, divergingScale(r.contribLimit, ctx.theme), `contribution to ${r.targetName}`);
  }

  /** Recompute geometry for the current width; resize the canvases. */
  function layout() {
    const r = ctx.result;
    if (!r) { g = null; return; }
    const w = scroller.clientWidth || el.clientWidth || width || 640;
    width = w;
    g = heatmapGeometry({ T: r.T, k: r.k, width: w });
    dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
    scroller.style.height = `${g.viewH}px`;
    stage.style.height = `${g.viewH}px`;
    stage.style.width = `${g.width}px`;
    spacer.style.height = `${Math.max(0, g.contentH - g.viewH)}px`;
    spacer.style.width = `${g.width}px`;
    for (const c of [canvas, overlay]) {
      c.width = Math.round(g.width * dpr);
      c.height = Math.round(g.viewH * dpr);
      c.style.width = `${g.width}px`;
      c.style.height = `${g.viewH}px`;
    }
    canvas.setAttribute("aria-label", `Heatmap of ${r.T} positions by ${r.k} segments; arrow keys move the selection`);
    const single = r.singleBlocks;
    title.textContent = single ? "Contribution of each block" : "Contribution of each segment";
    note.textContent = `Rows: positions (token \u2192 target); columns: ${single ? "blocks" : r.halves ? "attention and MLP halves of blocks" : "segments"} 1\u2013${r.nBlocks}. `
      + "Outlined cell: onset. Hover a cell for the lens's top tokens; click to select (and to show that segment's head shares)."
      + (r.answerStart > 0 && r.answerStart < r.T ? " Rows under the purple line predict the generated answer (their targets are its tokens)." : "")
      + (g.contentH > g.viewH ? " Scroll for more rows." : "");
  }

  function draw() {
    frame = 0;
    const r = ctx.result;
    const c = ctx2d(canvas);
    if (!c || !g || !r) return;
    const top = scroller.scrollTop;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = colors.bg;
    c.fillRect(0, 0, g.width, g.viewH);
    const vis = visibleRows(g, top);
    c.save();
    c.beginPath();
    c.rect(0, g.headerH, g.width, g.viewH - g.headerH);
    c.clip();
    if (vis && bitmap) {
      const [first, last] = vis;
      const n = last - first + 1;
      c.imageSmoothingEnabled = false;
      c.drawImage(bitmap, 0, first, r.k, n, g.labelW, g.headerH + first * g.rowH - top, g.gridW, n * g.rowH);
    }
    if (vis) drawRows(c, r, vis[0], vis[1], top);
    c.restore();
    drawHeader(c, r);
    drawOverlay();
  }

  /**
   * @param {CanvasRenderingContext2D} c @param {import("../result.js").Result} r
   * @param {number} first @param {number} last @param {number} top
   */
  function drawRows(c, r, first, last, top) {
    if (!g) return;
    const { labelW, headerH, rowH, colW, gridW } = g;
    if (g.gaps) { // tile gaps in the background colour
      c.fillStyle = colors.grid;
      for (let j = 1; j < r.k; j++) c.fillRect(labelW + j * colW - 0.5, headerH, 1, g.viewH);
      for (let i = first; i <= last + 1; i++) c.fillRect(labelW, headerH + i * rowH - top - 0.5, gridW, 1);
    }
    c.font = `${g.fontSize}px ${font}`;
    c.textBaseline = "middle";
    c.textAlign = "right";
    const maxW = labelW - 10;
    for (let i = first; i <= last; i++) {
      const y = headerH + i * rowH - top;
      if (!r.hasTarget[i]) { // grey, hatched, "no target"
        c.fillStyle = colors.nan;
        c.fillRect(labelW, y, gridW, rowH);
        c.save();
        c.beginPath();
        c.rect(labelW, y, gridW, rowH);
        c.clip();
        c.strokeStyle = colors.muted;
        c.globalAlpha = 0.35;
        c.lineWidth = 1;
        c.beginPath();
        for (let x = labelW - rowH; x < labelW + gridW; x += 6) { c.moveTo(x, y + rowH); c.lineTo(x + rowH, y); }
        c.stroke();
        c.restore();
        c.textAlign = "center";
        c.fillStyle = colors.muted;
        c.fillText("no target", labelW + gridW / 2, y + rowH / 2);
        c.textAlign = "right";
      } else if (colW >= 6 && rowH >= 10 && r.onset[i] >= 0 && r.onset[i] < r.k) {
        c.strokeStyle = colors.fg;
        c.lineWidth = 1.25;
        c.strokeRect(labelW + r.onset[i] * colW + 1.5, y + 1.5, colW - 3, rowH - 3);
      }
      c.fillStyle = i >= r.answerStart ? colors.answer : colors.fg;
      const idx = `${i}`;
      const label = rowLabels[i] ?? "";
      // index in muted colour, then the label, both right-aligned in the gutter
      c.fillText(fit(c, label, maxW - 34), labelW - 8, y + rowH / 2);
      c.fillStyle = colors.muted;
      c.textAlign = "left";
      c.fillText(idx, 4, y + rowH / 2);
      c.textAlign = "right";
    }
    if (r.answerStart > 0 && r.answerStart < r.T) { // divider above the first row that predicts the answer
      const y = headerH + r.answerStart * rowH - top;
      c.fillStyle = colors.answer;
      c.fillRect(0, y - 1, labelW + gridW, 2);
    }
  }

  /** @param {CanvasRenderingContext2D} c @param {import("../result.js").Result} r */
  function drawHeader(c, r) {
    if (!g) return;
    c.fillStyle = colors.bg;
    c.fillRect(0, 0, g.width, g.headerH);
    c.font = `10.5px ${font}`;
    c.textBaseline = "middle";
    c.textAlign = "center";
    c.fillStyle = colors.muted;
    const labels = r.segmentLabels;
    let widest = 0;
    for (const l of labels) widest = Math.max(widest, c.measureText(l).width);
    const show = thinLabels(r.k, g.colW, widest + 6);
    for (const j of show) c.fillText(labels[j], g.labelW + (j + 0.5) * g.colW, g.headerH / 2);
    c.textAlign = "left";
    c.fillText("pos", 4, g.headerH / 2);
    c.textAlign = "right";
    c.fillText(r.k > 1 && r.singleBlocks ? "block \u2192" : "blocks \u2192", g.labelW - 8, g.headerH / 2);
    c.fillStyle = colors.grid;
  }

  function drawOverlay() {
    const r = ctx.result;
    const c = ctx2d(overlay);
    if (!c || !g || !r) return;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, g.width, g.viewH);
    const top = scroller.scrollTop;
    const rowY = (/** @type {number} */ i) => g ? g.headerH + i * g.rowH - top : 0;
    c.save();
    c.beginPath();
    c.rect(0, g.headerH, g.width, g.viewH - g.headerH);
    c.clip();
    const hov = ctx.hovered();
    if (hov >= 0 && hov !== ctx.selected()) {
      c.fillStyle = colors.fg;
      c.globalAlpha = 0.07;
      c.fillRect(0, rowY(hov), g.labelW, g.rowH);
      c.globalAlpha = 0.6;
      c.strokeStyle = colors.fg;
      c.lineWidth = 1;
      c.strokeRect(g.labelW + 0.5, rowY(hov) + 0.5, g.gridW - 1, g.rowH - 1);
      c.globalAlpha = 1;
    }
    const sel = ctx.selected();
    if (sel >= 0) {
      c.fillStyle = colors.accent;
      c.globalAlpha = 0.14;
      c.fillRect(0, rowY(sel), g.labelW, g.rowH);
      c.globalAlpha = 1;
      c.fillRect(0, rowY(sel), 3, g.rowH);
      c.strokeStyle = colors.accent;
      c.lineWidth = 2;
      c.strokeRect(g.labelW - 1, rowY(sel) - 1, g.gridW + 2, g.rowH + 2);
    }
    if (hit && hit.region === "cell") {
      const cell = cellRect(g, hit.pos, hit.seg, top);
      c.strokeStyle = colors.bg;
      c.lineWidth = 3;
      c.strokeRect(cell.x + 0.5, cell.y + 0.5, cell.w - 1, cell.h - 1);
      c.strokeStyle = colors.fg;
      c.lineWidth = 1.5;
      c.strokeRect(cell.x + 0.5, cell.y + 0.5, cell.w - 1, cell.h - 1);
    }
    c.restore();
    if (hit && hit.seg >= 0) { // the hovered column's label, bold and underlined
      const x = g.labelW + (hit.seg + 0.5) * g.colW;
      c.fillStyle = colors.bg;
      c.font = `600 10.5px ${font}`;
      const label = r.segmentLabels[hit.seg];
      const w = Math.max(c.measureText(label).width + 12, Math.min(3 * g.colW, 44));
      c.fillRect(x - w / 2, 2, w, g.headerH - 5);
      c.fillStyle = colors.fg;
      c.textAlign = "center";
      c.textBaseline = "middle";
      c.fillText(label, x, g.headerH / 2);
      c.fillRect(x - g.colW / 2, g.headerH - 3, g.colW, 2);
    }
  }

  function schedule() {
    if (frame) return;
    frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(draw) : (setTimeout(draw, 16), 1);
  }

  function full() {
    readColors();
    layout();
    buildBitmap();
    legendUpdate();
    draw();
  }

  /** @param {MouseEvent} e */
  function locate(e) {
    if (!g) return null;
    const rect = canvas.getBoundingClientRect();
    return hitTest(g, e.clientX - rect.left, e.clientY - rect.top, scroller.scrollTop);
  }

  /** @param {MouseEvent} e */
  function showTooltip(e) {
    const r = ctx.result;
    if (!r || !hit || hit.region === "colLabel") { tooltip.hidden = true; return; }
    clear(tooltip);
    const i = hit.pos;
    const head = h("div", { class: "iglens-tt-head" },
      h("span", { class: "iglens-tt-pos", text: `[${i}]` }), " ",
      h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 20 }) }), " \u2192 ",
      h("span", { class: "iglens-chip iglens-chip-target", text: r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 20 }) : "(no target)" }));
    tooltip.appendChild(head);
    if (r.hasContrast && r.contrastTokens && r.contrastTokens[i]) {
      tooltip.appendChild(h("div", { class: "iglens-tt-row" }, "vs ", h("span", { class: "iglens-chip", text: formatToken(r.contrastTokens[i], { maxLen: 20 }) })));
    }
    if (!r.hasTarget[i]) {
      tooltip.appendChild(h("div", { class: "iglens-tt-muted", text: "No target at this position." }));
    } else if (hit.region === "rowLabel") {
      const onset = r.onset[i] >= 0 ? segmentText(r, r.onset[i]) : "\u2013";
      tooltip.appendChild(kv(`${r.targetName} at output`, fmtProb(pFinal(r, i))));
      tooltip.appendChild(kv("\u0394p", fmtSigned(r.deltaP[i])));
      tooltip.appendChild(kv("onset", onset));
    } else {
      const j = hit.seg;
      const lo = r.boundaries[j];
      const hi = r.boundaries[j + 1];
      const v = contribution(r, i, j);
      tooltip.appendChild(kv(hi - lo > 1 ? "blocks" : "block", r.segmentLabels[j]));
      const cv = kv("contribution", fmtSigned(v));
      cv.classList.add(v >= 0 ? "iglens-pos-val" : "iglens-neg-val");
      tooltip.appendChild(cv);
      tooltip.appendChild(kv(`${r.targetName} after ${depthText(hi)}`, `${fmtProb(lensAt(r, i, j + 1))}  (was ${fmtProb(lensAt(r, i, j))})`));
      const top = topAt(r, i, j + 1, 5);
      if (top.length) {
        tooltip.appendChild(h("div", { class: "iglens-tt-sub", text: `lens top-${top.length} after ${depthText(hi)}` }));
        const list = h("ol", { class: "iglens-tt-top" });
        for (const t of top) {
          const isTarget = t.id === r.targetIds[i];
          list.appendChild(h("li", { class: isTarget ? "iglens-tt-hit" : "" },
            h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 18 }) }),
            h("span", { class: "iglens-tt-p", text: fmtProb(t.p) })));
        }
        tooltip.appendChild(list);
      }
    }
    tooltip.hidden = false;
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

  const offs = [
    listen(scroller, "scroll", () => { tooltip.hidden = true; hit = null; schedule(); }, { passive: true }),
    listen(canvas, "mousemove", (e) => {
      const next = locate(e);
      const changed = !hit !== !next || (hit && next && (hit.pos !== next.pos || hit.seg !== next.seg || hit.region !== next.region));
      hit = next;
      if (changed) {
        drawOverlay();
        if (next && next.region !== "colLabel") ctx.hover(next.pos);
      }
      showTooltip(e);
      canvas.style.cursor = next && next.region !== "colLabel" ? "pointer" : "default";
    }),
    listen(canvas, "mouseleave", () => { hit = null; tooltip.hidden = true; ctx.hover(-1); drawOverlay(); }),
    listen(canvas, "click", (e) => {
      const at = locate(e);
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
      else if (e.key === "PageDown" && g) next = Math.min(r.T - 1, Math.max(cur, 0) + Math.floor((g.viewH - g.headerH) / g.rowH));
      else if (e.key === "PageUp" && g) next = Math.max(0, cur - Math.floor((g.viewH - g.headerH) / g.rowH));
      else if (e.key === "Home") next = 0;
      else if (e.key === "End") next = r.T - 1;
      else if (e.key === "Escape") { ctx.select(-1); e.preventDefault(); e.stopPropagation(); return; }
      if (next === null) return;
      e.preventDefault();
      ctx.select(next);
    }),
  ];

  return {
    el,
    canvas,
    /** Rebuild everything (new result or theme). */
    full,
    /** Width changed. */
    resize() {
      const w = scroller.clientWidth || el.clientWidth;
      if (!ctx.result || (w && w === width && g)) return;
      layout();
      draw();
    },
    /** Selection or hover changed; scroll the selected row into view when asked. */
    updateSelection(/** @type {boolean} */ scroll) {
      const sel = ctx.selected();
      if (scroll && g && sel >= 0) {
        const next = scrollToRow(g, sel, scroller.scrollTop);
        if (next !== scroller.scrollTop) { scroller.scrollTop = next; draw(); return; }
      }
      drawOverlay();
    },
    destroy() {
      offs.forEach((off) => off());
      if (frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(frame);
    },
  };
}

/**
 * Cut text to fit a width on a canvas, with an ellipsis.
 * @param {CanvasRenderingContext2D} c @param {string} text @param {number} maxW
 */
function fit(c, text, maxW) {
  if (c.measureText(text).width <= maxW) return text;
  const chars = Array.from(text);
  let lo = 0, hi = chars.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (c.measureText(chars.slice(0, mid).join("") + "\u2026").width <= maxW) lo = mid; else hi = mid - 1;
  }
  return chars.slice(0, lo).join("") + "\u2026";
}

/** A key/value line. @param {string} k @param {string} v */
function kv(k, v) {
  return h("div", { class: "iglens-tt-row" }, h("span", { class: "iglens-tt-k", text: k }), h("span", { class: "iglens-tt-v", text: v }));
}
