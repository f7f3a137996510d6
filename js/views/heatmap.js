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
import { h, clear, listen, fitText, keyValue } from "../dom.js";
import { heatmapGeometry, hitTest, visibleRows, scrollToRow, thinLabels, clamp, cellRect } from "../layout.js";
import { divergingScale, hexToRgb, NONMONOTONE } from "../colorscale.js";
import { formatToken } from "../tokens.js";
import { contribution, lensAt, topAt, idText, pFinal, segmentText, depthText, contributionRow } from "../result.js";
import { thresholdPercent } from "../nonmonotone.js";
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
  // The view's own scroll offset: every frame, hover and click uses it, and the scroller is
  // brought back to it after a relayout (a re-theme, a detached-and-re-attached output, a
  // resize), so the drawn rows, the hover and the selection always agree.
  let top = 0;
  /** @type {"prompt"|"row"|"fixed"} */
  let mode = "prompt";
  let fixedLimit = NaN;
  /** @type {Float64Array|null} each row's largest |contribution| (per-row scale) */
  let rowLimit = null;
  let minimapW = 0;
  let colors = { fg: "#1f2328", muted: "#656d76", bg: "#ffffff", grid: "#ffffff", accent: "#0969da", nan: "#d9d9d9", answer: "#8250df" };

  const ctx2d = (/** @type {HTMLCanvasElement} */ c) => {
    try {
      return c.getContext("2d");
    } catch {
      return null;
    }
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
    const limit = currentLimit();
    const scale = divergingScale(mode === "row" ? 1 : limit, ctx.theme);
    rowLimit = new Float64Array(r.T);
    for (let i = 0; i < r.T; i++) {
      let m = 0;
      for (const v of contributionRow(r, i)) if (Number.isFinite(v) && Math.abs(v) > m) m = Math.abs(v);
      rowLimit[i] = m > 0 ? m : 1;
    }
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
      const div = mode === "row" ? rowLimit[i] : 1;
      for (let j = 0; j < r.k; j++) {
        const o = (i * r.k + j) * 4;
        const q = scale.index(contribution(r, i, j) / div);
        if (q < 0) {
          px[o] = nan[0];
          px[o + 1] = nan[1];
          px[o + 2] = nan[2];
        } else {
          px[o] = lut[q * 3];
          px[o + 1] = lut[q * 3 + 1];
          px[o + 2] = lut[q * 3 + 2];
        }
        px[o + 3] = 255;
      }
    }
    cx.putImageData(img, 0, 0);
    bitmap = c;
  }

  /** The colour limit in use (the value shown at full colour; per row: 1 = the row's largest). */
  function currentLimit() {
    const r = ctx.result;
    if (mode === "fixed" && fixedLimit > 0) return fixedLimit;
    return r ? r.contribLimit : 1;
  }

  /** The limit a row's cells are coloured against. @param {number} i */
  const limitOf = (i) => (mode === "row" && rowLimit ? rowLimit[i] : currentLimit());

  function legendUpdate() {
    const r = ctx.result;
    if (!r) {
      clear(legend);
      return;
    }
    if (mode === "row") drawLegend(legend, divergingScale(1, ctx.theme), "contribution \u00f7 row's largest |contribution|");
    else drawLegend(legend, divergingScale(currentLimit(), ctx.theme), `contribution to ${r.targetName}` + (mode === "fixed" ? " (fixed scale)" : ""));
    el.setAttribute("data-scale", mode);
    el.setAttribute("data-limit", String(currentLimit()));
  }

  /** Recompute geometry for the current width; resize the canvases. */
  function layout() {
    const r = ctx.result;
    if (!r) {
      g = null;
      return;
    }
    const present = ctx.root.classList.contains("iglens-present");
    const avail = body.clientWidth || el.clientWidth || width + minimapW || 640;
    g = heatmapGeometry({ T: r.T, k: r.k, width: avail, present });
    minimapW = g.contentH > g.viewH ? 30 : 0; // an overview only when rows scroll
    minimap.hidden = !minimapW;
    const w = Math.max(160, avail - (minimapW ? minimapW + 6 : 0));
    width = w;
    if (minimapW) g = heatmapGeometry({ T: r.T, k: r.k, width: w, present });
    dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
    scroller.style.height = `${g.viewH}px`;
    stage.style.height = `${g.viewH}px`;
    stage.style.width = `${g.width}px`;
    spacer.style.height = `${Math.max(0, g.contentH - g.viewH)}px`;
    spacer.style.width = `${g.width}px`;
    if (minimapW) {
      minimap.width = Math.round(minimapW * dpr);
      minimap.height = Math.round(g.viewH * dpr);
      minimap.style.width = `${minimapW}px`;
      minimap.style.height = `${g.viewH}px`;
    }
    canvas.setAttribute("data-row-height", String(g.rowH));
    canvas.setAttribute("data-header-height", String(g.headerH));
    canvas.setAttribute("data-label-width", String(g.labelW));
    for (const c of [canvas, overlay]) {
      c.width = Math.round(g.width * dpr);
      c.height = Math.round(g.viewH * dpr);
      c.style.width = `${g.width}px`;
      c.style.height = `${g.viewH}px`;
    }
    canvas.setAttribute("aria-label", `Heatmap of ${r.T} positions by ${r.k} segments; arrow keys move the selection`);
    const single = r.singleBlocks;
    title.textContent = single ? "Contribution of each block" : "Contribution of each segment";
    note.textContent =
      `Rows: positions (token \u2192 target); columns: ${single ? "blocks" : r.halves ? "attention and MLP halves of blocks" : "segments"} 1\u2013${r.nBlocks}. ` +
      "Outlined cell: onset (where its colour shows). Orange mark left of the cells: a non-monotone token" +
      ` (a segment against \u0394p by more than ${thresholdPercent(r.nonmonotoneThreshold)} of its largest |contribution|). ` +
      "Hover a cell for the lens's top tokens; click to select (and to show that segment's head shares)." +
      (r.answerStart > 0 && r.answerStart < r.T ? " Rows under the purple line predict the generated answer (their targets are its tokens)." : "") +
      (g.contentH > g.viewH ? " Scroll for more rows, or use the overview on the right." : "");
  }

  function draw() {
    frame = 0;
    const r = ctx.result;
    const c = ctx2d(canvas);
    if (!c || !g || !r) return;
    syncScroll();
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
    canvas.setAttribute("data-first-row", String(vis ? vis[0] : -1));
    canvas.setAttribute("data-scroll-top", String(top));
    drawHeader(c, r);
    drawOverlay();
    drawMinimap();
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

  /** The overview: every row squeezed into the view's height, the visible rows boxed. */
  function drawMinimap() {
    const r = ctx.result;
    if (!minimapW || !g || !r) return;
    const c = ctx2d(minimap);
    if (!c) return;
    const H = g.viewH;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = colors.bg;
    c.fillRect(0, 0, minimapW, H);
    const barX = 5;
    const barW = minimapW - barX;
    if (bitmap) {
      c.imageSmoothingEnabled = true;
      c.drawImage(bitmap, 0, 0, r.k, r.T, barX, 0, barW, H);
    }
    const rowY = (/** @type {number} */ i) => (i / r.T) * H;
    c.fillStyle = NONMONOTONE;
    for (const i of r.nonmono.positions) c.fillRect(0, rowY(i), 4, Math.max(1.5, H / r.T));
    if (r.answerStart > 0 && r.answerStart < r.T) {
      c.fillStyle = colors.answer;
      c.fillRect(barX, rowY(r.answerStart) - 0.5, barW, 1.5);
    }
    const vis = visibleRows(g, top);
    if (vis) {
      const y0 = rowY(vis[0]);
      const y1 = rowY(vis[1] + 1);
      c.strokeStyle = colors.fg;
      c.lineWidth = 1.5;
      c.strokeRect(barX + 0.75, y0 + 0.75, barW - 1.5, Math.max(3, y1 - y0 - 1.5));
    }
    const sel = ctx.selected();
    if (sel >= 0) {
      c.fillStyle = colors.accent;
      c.fillRect(barX - 3, rowY(sel + 0.5) - 1, barW + 3, 2.5);
    }
  }

  /** @param {MouseEvent} e */
  function minimapRow(e) {
    const r = ctx.result;
    if (!r || !g) return -1;
    const rect = minimap.getBoundingClientRect();
    return clamp(Math.floor(((e.clientY - rect.top) / Math.max(1, rect.height)) * r.T), 0, r.T - 1);
  }

  /** Centre row i in the view. @param {number} i */
  function centreRow(i) {
    if (!g) return;
    scrollTo(i * g.rowH - (g.viewH - g.headerH) / 2 + g.rowH / 2);
  }

  /** The selected row in words, above the rows. */
  function updateSummary() {
    const r = ctx.result;
    clear(summary);
    const i = ctx.selected();
    if (!r || i < 0) {
      summary.appendChild(h("span", { class: "iglens-muted", text: "Click a row to select its token." }));
      return;
    }
    const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 20 }) : "(no target)";
    summary.append(
      h("span", { class: "iglens-muted", text: "selected " }),
      h("span", { class: "iglens-pos", text: `[${i}]` }),
      " ",
      h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 20 }) }),
      " \u2192 ",
      h("span", { class: "iglens-chip iglens-chip-target", text: tgt }),
    );
    if (r.hasTarget[i]) {
      summary.append(
        h("span", {
          class: "iglens-muted",
          text: ` \u00b7 \u0394p ${fmtSigned(r.deltaP[i])}` + (r.onset[i] >= 0 ? ` \u00b7 onset ${segmentText(r, r.onset[i])}` : ""),
        }),
      );
      if (r.nonmono.flags[i]) summary.append(h("span", { class: "iglens-flag-text", text: " \u00b7 non-monotone" }));
    }
    const panel = ctx.root.querySelector(".iglens-detail");
    if (panel && !ctx.root.classList.contains("iglens-wide")) {
      const go = h("button", { type: "button", class: "iglens-link", "data-action": "show-detail", text: "details \u2191" });
      go.addEventListener("click", () => /** @type {HTMLElement} */ (panel).scrollIntoView({ block: "start", behavior: "smooth" }));
      summary.append(" ", go);
    }
  }

  /**
   * @param {CanvasRenderingContext2D} c @param {import("../result.js").Result} r
   * @param {number} first @param {number} last @param {number} top
   */
  function drawRows(c, r, first, last, top) {
    if (!g) return;
    const { labelW, headerH, rowH, colW, gridW } = g;
    if (g.gaps) {
      // tile gaps in the background colour
      c.fillStyle = colors.grid;
      for (let j = 1; j < r.k; j++) c.fillRect(labelW + j * colW - 0.5, headerH, 1, g.viewH);
      for (let i = first; i <= last + 1; i++) c.fillRect(labelW, headerH + i * rowH - top - 0.5, gridW, 1);
    }
    c.font = `${g.fontSize}px ${font}`;
    c.textBaseline = "middle";
    c.textAlign = "right";
    const maxW = labelW - 12;
    for (let i = first; i <= last; i++) {
      const y = headerH + i * rowH - top;
      if (!r.hasTarget[i]) {
        // grey, hatched, "no target"
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
        for (let x = labelW - rowH; x < labelW + gridW; x += 6) {
          c.moveTo(x, y + rowH);
          c.lineTo(x + rowH, y);
        }
        c.stroke();
        c.restore();
        c.textAlign = "center";
        c.fillStyle = colors.muted;
        c.fillText("no target", labelW + gridW / 2, y + rowH / 2);
        c.textAlign = "right";
      } else if (colW >= 6 && rowH >= 10 && r.onset[i] >= 0 && r.onset[i] < r.k && Math.abs(contribution(r, i, r.onset[i])) >= 0.1 * limitOf(i)) {
        // outline only where the colour shows
        c.strokeStyle = colors.fg;
        c.lineWidth = 1.25;
        c.strokeRect(labelW + r.onset[i] * colW + 1.5, y + 1.5, colW - 3, rowH - 3);
      }
      if (r.nonmono.flags[i]) {
        // non-monotone: an orange mark at the edge of the gutter
        c.fillStyle = NONMONOTONE;
        c.fillRect(labelW - 6, y + 2, 4, rowH - 4);
      }
      c.fillStyle = i >= r.answerStart ? colors.answer : colors.fg;
      const idx = `${i}`;
      const label = rowLabels[i] ?? "";
      // index in muted colour, then the label, both right-aligned in the gutter
      c.fillText(fitText(c, label, maxW - 34), labelW - 10, y + rowH / 2);
      c.fillStyle = colors.muted;
      c.textAlign = "left";
      c.fillText(idx, 4, y + rowH / 2);
      c.textAlign = "right";
    }
    if (r.answerStart > 0 && r.answerStart < r.T) {
      // divider above the first row that predicts the answer
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
    c.font = `${g.headerFont}px ${font}`;
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
    const rowY = (/** @type {number} */ i) => (g ? g.headerH + i * g.rowH - top : 0);
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
    if (hit && hit.seg >= 0) {
      // the hovered column's label, bold and underlined
      const x = g.labelW + (hit.seg + 0.5) * g.colW;
      c.fillStyle = colors.bg;
      c.font = `600 ${g.headerFont}px ${font}`;
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
    return hitTest(g, e.clientX - rect.left, e.clientY - rect.top, top);
  }

  /** @param {MouseEvent} e */
  function showTooltip(e) {
    const r = ctx.result;
    if (!r || !hit || hit.region === "colLabel") {
      tooltip.hidden = true;
      return;
    }
    clear(tooltip);
    const i = hit.pos;
    const head = h(
      "div",
      { class: "iglens-tt-head" },
      h("span", { class: "iglens-tt-pos", text: `[${i}]` }),
      " ",
      h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 20 }) }),
      " \u2192 ",
      h("span", {
        class: "iglens-chip iglens-chip-target",
        text: r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 20 }) : "(no target)",
      }),
    );
    tooltip.appendChild(head);
    if (r.hasContrast && r.contrastTokens && r.contrastTokens[i]) {
      tooltip.appendChild(
        h("div", { class: "iglens-tt-row" }, "vs ", h("span", { class: "iglens-chip", text: formatToken(r.contrastTokens[i], { maxLen: 20 }) })),
      );
    }
    if (!r.hasTarget[i]) {
      tooltip.appendChild(h("div", { class: "iglens-tt-muted", text: "No target at this position." }));
    } else if (hit.region === "rowLabel") {
      const onset = r.onset[i] >= 0 ? segmentText(r, r.onset[i]) : "\u2013";
      tooltip.appendChild(keyValue(`${r.targetName} at output`, fmtProb(pFinal(r, i))));
      tooltip.appendChild(keyValue("\u0394p", fmtSigned(r.deltaP[i])));
      tooltip.appendChild(keyValue("onset", onset));
    } else {
      const j = hit.seg;
      const lo = r.boundaries[j];
      const hi = r.boundaries[j + 1];
      const v = contribution(r, i, j);
      tooltip.appendChild(keyValue(hi - lo > 1 ? "blocks" : "block", r.segmentLabels[j]));
      const cv = keyValue("contribution", fmtSigned(v));
      cv.classList.add(v >= 0 ? "iglens-pos-val" : "iglens-neg-val");
      tooltip.appendChild(cv);
      tooltip.appendChild(keyValue(`${r.targetName} after ${depthText(hi)}`, `${fmtProb(lensAt(r, i, j + 1))}  (was ${fmtProb(lensAt(r, i, j))})`));
      const top = topAt(r, i, j + 1, 5);
      if (top.length) {
        tooltip.appendChild(h("div", { class: "iglens-tt-sub", text: `lens top-${top.length} after ${depthText(hi)}` }));
        const list = h("ol", { class: "iglens-tt-top" });
        for (const t of top) {
          const isTarget = t.id === r.targetIds[i];
          list.appendChild(
            h(
              "li",
              { class: isTarget ? "iglens-tt-hit" : "" },
              h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 18 }) }),
              h("span", { class: "iglens-tt-p", text: fmtProb(t.p) }),
            ),
          );
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
    listen(
      scroller,
      "scroll",
      () => {
        // a detached or hidden scroller reads 0: that is not the user scrolling
        if (scroller.clientHeight === 0 || !scroller.isConnected) return;
        top = scroller.scrollTop;
        tooltip.hidden = true;
        hit = null;
        schedule();
      },
      { passive: true },
    ),
    listen(minimap, "pointerdown", (e) => {
      const i = minimapRow(e);
      if (i < 0) return;
      centreRow(i);
      try {
        minimap.setPointerCapture(e.pointerId);
      } catch {
        /* synthetic events */
      }
    }),
    listen(minimap, "pointermove", (e) => {
      if (!(e.buttons & 1)) return;
      const i = minimapRow(e);
      if (i >= 0) centreRow(i);
    }),
    listen(scaleMode, "change", () => {
      const next = /** @type {"prompt"|"row"|"fixed"} */ (scaleMode.value);
      if (next === "fixed" && !(fixedLimit > 0)) fixedLimit = currentLimit();
      mode = next;
      limitInput.hidden = mode !== "fixed";
      if (mode === "fixed") limitInput.value = String(Number(fixedLimit.toPrecision(3)));
      recolour();
    }),
    listen(limitInput, "change", () => {
      const v = Number(limitInput.value);
      if (v > 0 && Number.isFinite(v)) {
        fixedLimit = v;
        recolour();
      } else limitInput.value = String(fixedLimit);
    }),
    listen(jumpForm, "submit", (e) => {
      e.preventDefault();
      const i = findRow(jumpInput.value);
      if (i < 0) {
        jumpInput.setCustomValidity("no such position or token");
        jumpInput.reportValidity?.();
        return;
      }
      jumpInput.setCustomValidity("");
      ctx.select(i);
    }),
    listen(jumpForm, "keydown", (e) => e.stopPropagation()),
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
    listen(canvas, "mouseleave", () => {
      hit = null;
      tooltip.hidden = true;
      ctx.hover(-1);
      drawOverlay();
    }),
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

  /** New colour limit: rebuild the cells and the legend. */
  function recolour() {
    buildBitmap();
    legendUpdate();
    draw();
  }

  /**
   * The row a jump names: a position number, or the next token (after the selection, wrapping)
   * whose text contains the query. -1 when none.
   * @param {string} query
   */
  function findRow(query) {
    const r = ctx.result;
    const q = query.trim();
    if (!r || !query) return -1;
    if (/^#?\d+$/.test(q)) {
      const i = Number(q.replace("#", ""));
      return i < r.T ? i : -1;
    }
    const needle = query.toLowerCase();
    const from = Math.max(-1, ctx.selected());
    for (let d = 1; d <= r.T; d++) {
      const i = (from + d) % r.T;
      if (String(r.tokens[i]).toLowerCase().includes(needle)) return i;
    }
    return -1;
  }

  return {
    el,
    canvas,
    /** Rebuild everything (new result or theme). */
    full() {
      full();
      updateSummary();
    },
    /** Width changed (or the view came back into the page): lay out again and redraw at the view's offset. */
    resize() {
      const w = body.clientWidth || el.clientWidth;
      if (!ctx.result) return;
      if (!(w && w === width + (minimapW ? minimapW + 6 : 0) && g)) layout();
      draw();
    },
    /** Selection or hover changed; scroll the selected row into view when asked. */
    updateSelection(/** @type {boolean} */ scroll) {
      const sel = ctx.selected();
      if (scroll) updateSummary();
      if (scroll && g && sel >= 0) {
        const next = scrollToRow(g, sel, top);
        if (next !== top) {
          scrollTo(next);
          draw();
          return;
        }
      }
      drawOverlay();
      drawMinimap();
    },
    /** Scroll so that the selected row is in the middle of the view (the first paint). */
    centreSelection() {
      const sel = ctx.selected();
      if (sel >= 0 && g) {
        centreRow(sel);
        draw();
      }
    },
    destroy() {
      offs.forEach((off) => off());
      if (frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(frame);
    },
  };
}
