/**
 * The compare view: pinned positions' curves overlaid on one chart (the cumulative
 * contribution Σ_{segments up to L} — the detail panel's curve measured from the
 * embeddings, ending at Δp — or the lens value itself), and every result of a comparison
 * side by side as a fit-to-height heatmap on one shared colour scale.
 *
 * Pins live in the `pinned` trait (`[r, i]` pairs); the results in `result` + the
 * `comparison` trait (js/comparison.js). A click on a row of a panel pins or unpins it (and,
 * in the first result, selects it); "Pin" pins the selected token.
 * @module views/compare
 */
import { h, s, clear, listen } from "../dom.js";
import { linearScale, clamp } from "../layout.js";
import { divergingScale, hexToRgb, niceTicks, formatTick } from "../colorscale.js";
import { formatToken, quoteToken } from "../tokens.js";
import { lensRow, idText, contribution, segmentText } from "../result.js";
import { fmtProb, fmtSigned } from "../format.js";
import { readComparison, readPins, togglePin, cumulativeContribution, PIN_COLORS } from "../comparison.js";
import { createLegend, drawLegend } from "./legend.js";

/** The y quantities of the overlay chart. */
export const COMPARE_Y = /** @type {const} */ (["delta", "p"]);

/** "A", "B", … for result r (empty for a lone result). @param {number} r @param {boolean} multi */
export const resultLetter = (r, multi) => (multi ? String.fromCharCode(65 + (r % 26)) : "");

/**
 * The values of one curve: the cumulative contribution (k+1 values from 0 to Σ = Δp) or
 * the lens value at each boundary.
 * @param {import("../result.js").Result} r @param {number} i @param {(typeof COMPARE_Y)[number]} y
 * @returns {number[]}
 */
export function curveValues(r, i, y) {
  return y === "p" ? Array.from(lensRow(r, i)) : cumulativeContribution(r, i);
}

/**
 * A pin in words: "A [7] ' tok' → ' target'".
 * @param {import("../comparison.js").Comparison} cmp @param {number} rr @param {number} i
 * @param {number} [maxLen]
 */
export function pinText(cmp, rr, i, maxLen = 12) {
  const r = cmp.results[rr];
  const letter = resultLetter(rr, cmp.multi);
  const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen }) : "\u2013";
  return `${letter ? letter + " " : ""}[${i}] ${formatToken(r.tokens[i], { maxLen })} \u2192 ${tgt}`;
}

/**
 * @param {import("./context.js").Context} ctx
 */
export function createCompare(ctx) {
  const pinButton = h("button", { type: "button", class: "iglens-pin", "data-action": "pin" });
  const clearButton = h("button", { type: "button", class: "iglens-pin-clear", "data-action": "unpin-all", text: "Clear pins" });
  const ySelect = h("select", { name: "compare_y", class: "iglens-input", "aria-label": "Quantity on the y axis" },
    h("option", { value: "delta", text: "cumulative \u0394p" }),
    h("option", { value: "p", text: "lens value" }));
  const pins = h("div", { class: "iglens-compare-pins", role: "list", "aria-label": "Pinned positions" });
  const chartWrap = h("figure", { class: "iglens-compare-figure" });
  const panels = h("div", { class: "iglens-compare-panels" });
  const legend = createLegend("iglens-compare-legend");
  const readout = h("div", { class: "iglens-compare-readout", "aria-live": "off" });
  const notice = h("p", { class: "iglens-compare-error", role: "alert" });
  notice.hidden = true;
  const note = h("p", { class: "iglens-foot" });
  const el = h("section", { class: "iglens-compare", "data-view": "compare", "aria-label": "Compare positions and results" },
    h("div", { class: "iglens-section-head" },
      h("h3", { class: "iglens-section-title", text: "Compare" }),
      pinButton, clearButton, h("span", { class: "iglens-spacer" }),
      h("label", { class: "iglens-muted" }, "y: ", ySelect)),
    notice, pins, chartWrap,
    h("div", { class: "iglens-section-head iglens-compare-panels-head" },
      h("h3", { class: "iglens-section-title iglens-compare-panels-title" }), h("span", { class: "iglens-spacer" }), legend),
    panels, readout, note);

  /** @type {import("../comparison.js").Comparison} */
  let cmp = readComparison(null, null);
  /** @type {any} */ let rawSeen = undefined;
  /** @type {import("../result.js").Result|null} */ let resultSeen = null;
  /** @type {Array<[number, number]>} */
  let pinned = [];
  /** @type {(typeof COMPARE_Y)[number]} */
  let yMode = "delta";
  /** @type {Array<() => void>} */
  let local = [];
  /** @type {HTMLCanvasElement[]} */
  let panelCanvases = [];

  /** Decode the comparison again only when the trait or the result changed. */
  function load() {
    const raw = ctx.model.get("comparison");
    if (raw !== rawSeen || ctx.result !== resultSeen) {
      rawSeen = raw;
      resultSeen = ctx.result;
      cmp = readComparison(raw, ctx.result);
    }
    pinned = readPins(ctx.model.get("pinned"), cmp.results);
  }

  const palette = () => PIN_COLORS[ctx.theme === "dark" ? "dark" : "light"];

  /** @param {Array<[number, number]>} next */
  function savePins(next) {
    ctx.setTrait("pinned", next.map(([a, b]) => [a, b]));
  }

  function renderHead() {
    const r = ctx.result;
    const sel = ctx.selected();
    const can = !!r && sel >= 0 && r.hasTarget[sel];
    const isPinned = can && pinned.some(([a, b]) => a === 0 && b === sel);
    clear(pinButton);
    pinButton.appendChild(h("span", { text: isPinned ? "Unpin " : "Pin " }));
    if (can && r) pinButton.appendChild(h("span", { class: "iglens-chip", text: `[${sel}] ${formatToken(r.tokens[sel], { maxLen: 12 })}` }));
    else pinButton.appendChild(h("span", { text: "the selected token" }));
    pinButton.disabled = !can;
    pinButton.setAttribute("aria-pressed", isPinned ? "true" : "false");
    clearButton.disabled = pinned.length === 0;
    ySelect.value = yMode;
    notice.hidden = !cmp.error;
    notice.textContent = cmp.error ? `Could not read the comparison: ${cmp.error}` : "";
  }

  function renderPins() {
    clear(pins);
    const colors = palette();
    if (!pinned.length) {
      pins.appendChild(h("span", { class: "iglens-muted", text: cmp.results.length
        ? "No pins yet: the dashed curve is the selected token. Pin tokens (the button, or a click on a row below) to overlay their curves."
        : "" }));
      return;
    }
    pinned.forEach(([rr, i], q) => {
      const r = cmp.results[rr];
      const sw = h("span", { class: "iglens-compare-swatch", "aria-hidden": "true" });
      sw.style.background = colors[q % colors.length];
      const remove = h("button", { type: "button", class: "iglens-compare-unpin", "data-action": "unpin", "aria-label": `Unpin ${pinText(cmp, rr, i, 40)}`, text: "\u00d7" });
      local.push(listen(remove, "click", () => savePins(pinned.filter(([a, b]) => !(a === rr && b === i)))));
      pins.appendChild(h("span", {
        class: "iglens-compare-pin", role: "listitem", "data-result": rr, "data-position": i,
        title: `${cmp.labels[rr] ? cmp.labels[rr] + ": " : ""}${quoteToken(r.tokens[i])} \u2192 ${quoteToken(r.targetTokens[i] || idText(r, r.targetIds[i]))}, \u0394p ${fmtSigned(r.deltaP[i])}`,
      }, sw, h("span", { text: pinText(cmp, rr, i) }), remove));
    });
  }

  /** The curves to draw: the pins, or the selected token as a dashed preview. */
  function curves() {
    /** @type {Array<{r: number, i: number, color: string, preview: boolean}>} */
    const out = pinned.map(([rr, i], q) => ({ r: rr, i, color: palette()[q % palette().length], preview: false }));
    const sel = ctx.selected();
    const r0 = cmp.results[0];
    if (r0 && sel >= 0 && r0.hasTarget[sel] && !pinned.some(([a, b]) => a === 0 && b === sel)) {
      out.push({ r: 0, i: sel, color: "currentColor", preview: true });
    }
    return out;
  }

  function renderChart() {
    clear(chartWrap);
    if (!cmp.results.length) return;
    const W = Math.max(300, (el.clientWidth || 640) - 2);
    const H = 240;
    const Mg = { left: 56, right: 16, top: 12, bottom: 40 };
    const list = curves();
    const svg = s("svg", { class: "iglens-chart iglens-compare-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": yMode === "p" ? "lens value after each block, one curve per pinned token" : "cumulative contribution after each block, one curve per pinned token" });
    let maxDepth = 1;
    for (const r of cmp.results) maxDepth = Math.max(maxDepth, r.boundaries[r.k]);
    let lo = 0, hi = 0;
    const series = list.map((c) => {
      const r = cmp.results[c.r];
      const vals = curveValues(r, c.i, yMode);
      for (const v of vals) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      return { ...c, res: r, vals };
    });
    if (hi - lo < 1e-9) { lo -= 0.05; hi += 0.05; }
    const pad = 0.06 * (hi - lo);
    const x = linearScale([0, maxDepth], [Mg.left, W - Mg.right]);
    const y = linearScale([lo - pad, hi + pad], [H - Mg.bottom, Mg.top]);
    const g = s("g");
    svg.appendChild(g);
    const { ticks, step } = niceTicks(lo - pad, hi + pad, 5);
    for (const t of ticks) {
      g.appendChild(s("line", { class: t === 0 ? "iglens-zero" : "iglens-grid", x1: Mg.left, x2: W - Mg.right, y1: y(t), y2: y(t) }));
      g.appendChild(s("text", { class: "iglens-tick", x: Mg.left - 6, y: y(t), "text-anchor": "end", "dominant-baseline": "middle" }, formatTick(t, step)));
    }
    const xt = niceTicks(0, maxDepth, clamp(Math.floor((W - Mg.left - Mg.right) / 40), 2, 16));
    for (const t of xt.ticks) {
      if (!Number.isInteger(t)) continue;
      g.appendChild(s("line", { class: "iglens-xtick", x1: x(t), x2: x(t), y1: H - Mg.bottom, y2: H - Mg.bottom + 4 }));
      g.appendChild(s("text", { class: "iglens-tick", x: x(t), y: H - Mg.bottom + 15, "text-anchor": "middle" }, String(t)));
    }
    g.appendChild(s("text", { class: "iglens-axis-title", x: (Mg.left + W - Mg.right) / 2, y: H - 6, "text-anchor": "middle" }, "block L (state after block L; 0 = embeddings)"));
    g.appendChild(s("text", { class: "iglens-axis-title", x: 12, y: (Mg.top + H - Mg.bottom) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(Mg.top + H - Mg.bottom) / 2})` },
      yMode === "p" ? (cmp.results[0]?.targetName ?? "p(target)") : "cumulative \u0394p"));
    for (const c of series) {
      const pts = [];
      for (let j = 0; j <= c.res.k; j++) if (Number.isFinite(c.vals[j])) pts.push(`${x(c.res.boundaries[j]).toFixed(1)},${y(c.vals[j]).toFixed(1)}`);
      const line = s("polyline", {
        class: "iglens-compare-curve" + (c.preview ? " iglens-compare-preview" : ""),
        "data-result": c.r, "data-position": c.i, "data-values": c.vals.map((v) => Number(v.toPrecision(7))).join(","),
        points: pts.join(" "), fill: "none", stroke: c.color, "stroke-width": c.preview ? 1.6 : 2.2,
        "stroke-dasharray": c.preview ? "5 4" : null,
      }, s("title", {}, `${pinText(cmp, c.r, c.i, 30)}${c.preview ? " (selected, not pinned)" : ""}`));
      g.appendChild(line);
      const last = c.vals[c.res.k];
      if (Number.isFinite(last)) {
        g.appendChild(s("circle", { class: "iglens-compare-end", cx: x(c.res.boundaries[c.res.k]), cy: y(last), r: 3.2, fill: c.color }));
      }
    }
    chartWrap.appendChild(h("figcaption", { class: "iglens-compare-caption", text: yMode === "p"
      ? `${cmp.results[0]?.targetName ?? "p(target)"} after each block, one curve per pinned token`
      : "cumulative \u0394p: the sum of the contributions up to block L (it ends at the token's \u0394p), one curve per pinned token" }));
    chartWrap.appendChild(svg);
  }

  /** Fit-to-height heatmaps, one per result, on the shared scale. */
  function renderPanels() {
    clear(panels);
    panelCanvases = [];
    if (!cmp.results.length) return;
    const dark = ctx.theme === "dark";
    const scale = divergingScale(cmp.limit, ctx.theme);
    const titleEl = /** @type {HTMLElement} */ (el.querySelector(".iglens-compare-panels-title"));
    titleEl.textContent = cmp.multi ? `${cmp.results.length} results on one colour scale` : "Click rows to pin them";
    drawLegend(legend, scale, `contribution to ${cmp.results[0].targetName}${cmp.multi ? " (shared scale)" : ""}`);
    panels.setAttribute("data-limit", String(cmp.limit));
    const n = cmp.results.length;
    const total = Math.max(260, (el.clientWidth || 640) - 2);
    const pw = Math.max(180, Math.floor((total - 12 * (n - 1)) / n));
    const colors = palette();
    const nan = hexToRgb(dark ? "#3a3f45" : "#dcdcdc");
    cmp.results.forEach((r, rr) => {
      const rowH = clamp(360 / Math.max(1, r.T), 0.5, 16);
      const gridH = Math.round(rowH * r.T);
      const labelW = rowH >= 11 ? Math.min(120, Math.floor(pw * 0.4)) : 8;
      const cw = pw;
      const ch = gridH;
      const canvas = h("canvas", { class: "iglens-compare-canvas", "data-result": rr, role: "img",
        "aria-label": `${cmp.labels[rr] || "result"}: ${r.T} positions by ${r.k} segments; click a row to pin it` });
      const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
      canvas.width = Math.round(cw * dpr);
      canvas.height = Math.round(ch * dpr);
      canvas.style.width = `${cw}px`;
      canvas.style.height = `${ch}px`;
      let c = null;
      try { c = canvas.getContext("2d"); } catch { c = null; }
      if (c) {
        // one pixel per cell, scaled up without smoothing
        const bm = document.createElement("canvas");
        bm.width = Math.max(1, r.k);
        bm.height = Math.max(1, r.T);
        let bx = null;
        try { bx = bm.getContext("2d"); } catch { bx = null; }
        if (bx) {
          const img = bx.createImageData(bm.width, bm.height);
          const px = img.data;
          for (let i = 0; i < r.T; i++) {
            for (let j = 0; j < r.k; j++) {
              const o = (i * r.k + j) * 4;
              const rgb = scale.rgb(contribution(r, i, j)) ?? nan;
              px[o] = rgb[0]; px[o + 1] = rgb[1]; px[o + 2] = rgb[2]; px[o + 3] = 255;
            }
          }
          bx.putImageData(img, 0, 0);
        }
        c.setTransform(dpr, 0, 0, dpr, 0, 0);
        c.imageSmoothingEnabled = false;
        c.drawImage(bm, 0, 0, r.k, r.T, labelW, 0, cw - labelW, gridH);
        const fg = dark ? "#e6edf3" : "#1f2328";
        if (labelW > 8) {
          c.font = `${Math.min(12, rowH - 2)}px system-ui, sans-serif`;
          c.textBaseline = "middle";
          c.textAlign = "right";
          c.fillStyle = fg;
          for (let i = 0; i < r.T; i++) c.fillText(formatToken(r.tokens[i], { maxLen: 12 }), labelW - 6, (i + 0.5) * rowH);
        }
        pinned.forEach(([pr, pi], q) => {
          if (pr !== rr) return;
          c.fillStyle = colors[q % colors.length];
          c.fillRect(0, pi * rowH, labelW > 8 ? 4 : 6, Math.max(2, rowH));
          c.strokeStyle = colors[q % colors.length];
          c.lineWidth = 2;
          c.strokeRect(labelW + 1, pi * rowH, cw - labelW - 2, Math.max(2, rowH));
        });
        const sel = ctx.selected();
        if (rr === 0 && sel >= 0) {
          c.strokeStyle = fg;
          c.setLineDash([3, 2]);
          c.lineWidth = 1;
          c.strokeRect(labelW + 0.5, sel * rowH - 0.5, cw - labelW - 1, Math.max(2, rowH) + 1);
          c.setLineDash([]);
        }
      }
      const rowAt = (/** @type {MouseEvent} */ e) => {
        const rect = canvas.getBoundingClientRect();
        const i = Math.floor((e.clientY - rect.top) / rowH);
        return i >= 0 && i < r.T ? i : -1;
      };
      local.push(listen(canvas, "click", (e) => {
        const i = rowAt(e);
        if (i < 0 || !r.hasTarget[i]) return;
        savePins(togglePin(pinned, rr, i));
        if (rr === 0) ctx.select(i);
      }));
      local.push(listen(canvas, "mousemove", (e) => {
        const i = rowAt(e);
        showReadout(rr, i);
        if (rr === 0) ctx.hover(i);
      }));
      local.push(listen(canvas, "mouseleave", () => { showReadout(-1, -1); if (rr === 0) ctx.hover(-1); }));
      panelCanvases.push(canvas);
      const head = h("figcaption", { class: "iglens-compare-panel-title" },
        cmp.multi ? h("strong", { text: `${resultLetter(rr, true)} ` }) : null,
        h("span", { text: cmp.labels[rr] || `${r.T} positions` }));
      const meta = h("div", { class: "iglens-muted iglens-compare-panel-meta",
        text: `${r.modelName || r.family || "model"} \u00b7 target: ${r.controls.target}${r.hasContrast && r.controls.contrast ? ` vs ${r.controls.contrast}` : ""} \u00b7 ${r.estimator}, m=${r.steps} \u00b7 max |contribution| ${fmtProb(r.contribLimit)}` });
      const fig = h("figure", { class: "iglens-compare-panel", "data-result": rr, "data-limit": String(cmp.limit), "data-own-limit": String(r.contribLimit) }, head, meta, canvas);
      fig.style.width = `${pw}px`;
      panels.appendChild(fig);
    });
  }

  /** @param {number} rr @param {number} i */
  function showReadout(rr, i) {
    clear(readout);
    if (rr < 0 || i < 0) {
      readout.appendChild(h("span", { class: "iglens-muted", text: "Hover a row for its numbers; click to pin it." }));
      return;
    }
    const r = cmp.results[rr];
    readout.append(h("strong", { text: pinText(cmp, rr, i, 18) }));
    if (r.hasTarget[i]) {
      readout.append(h("span", { text: ` \u00b7 \u0394p ${fmtSigned(r.deltaP[i])}` }),
        h("span", { class: "iglens-muted", text: r.onset[i] >= 0 ? ` \u00b7 onset ${segmentText(r, r.onset[i])}` : "" }));
    } else readout.append(h("span", { class: "iglens-muted", text: " \u00b7 no target" }));
  }

  function render() {
    local.forEach((off) => off());
    local = [];
    load();
    renderHead();
    renderPins();
    renderChart();
    renderPanels();
    showReadout(-1, -1);
    note.textContent = cmp.multi
      ? "Panels: each result's positions (rows) by segments (columns), on one colour scale (the largest |contribution| of all results), so equal colours mean equal contributions. "
        + "Click a row to pin it; pinned curves share the chart's axes."
      : "Pin tokens to compare how their probability builds up: the curves share the axes. Rows of the panel are positions, columns segments (the heatmap's colours).";
  }

  const offs = [
    listen(pinButton, "click", () => {
      const sel = ctx.selected();
      const r = ctx.result;
      if (!r || sel < 0 || !r.hasTarget[sel]) return;
      savePins(togglePin(pinned, 0, sel));
    }),
    listen(clearButton, "click", () => savePins([])),
    listen(ySelect, "change", () => {
      yMode = ySelect.value === "p" ? "p" : "delta";
      renderChart();
    }),
  ];

  return {
    el,
    /** The pins as shown ([r, i] pairs). */
    pins: () => pinned.slice(),
    /** The decoded comparison. */
    comparison: () => cmp,
    /** The y quantity of the chart. */
    yMode: () => yMode,
    full: render,
    resize: render,
    /** Selection changed (the pin button, the preview curve, the first panel's outline). */
    updateSelection(/** @type {boolean} */ scroll) {
      if (scroll) render();
    },
    destroy() {
      local.forEach((off) => off());
      offs.forEach((off) => off());
    },
  };
}
