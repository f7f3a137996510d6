/**
 * The compare view: pinned positions' curves overlaid on one chart (the cumulative
 * contribution Σ_{segments up to L} — the detail panel's curve measured from the
 * embeddings, ending at Δp — or the lens value itself), and every result of a comparison
 * side by side as a fit-to-height heatmap on one shared colour scale.
 *
 * Pins live in the `pinned` trait (`[r, i]` pairs); the results in `result` + the
 * `comparison` trait (js/model/comparison.js). A click on a row of a panel pins or unpins it (and,
 * in the first result, selects it); "Pin" pins the selected token.
 *
 * Parts: `compare/chart.js` (the curves), `compare/panels.js` (the panels and their
 * painter), `compare/text.js` (pins, readout); curve values and pin labels come from
 * `model/figure-data.js`.
 * @module views/compare
 */
import { h, clear, listen } from "../../lib/dom.js";
import { divergingScale } from "../../lib/colorscale.js";
import { formatToken } from "../../lib/tokens.js";
import { readComparison, readPins, togglePin, PIN_COLORS } from "../../model/comparison.js";
import { nanRgb } from "../../lib/palette.js";
import { renderCompareChart } from "./chart.js";
import { comparePanel } from "./panels.js";
import { renderPins, renderReadout } from "./text.js";
import { createLegend, drawLegend } from "../legend.js";

const NOTE_MULTI =
  "Panels: each result's positions (rows) by segments (columns), on one colour scale (the largest |contribution| of all results), so equal colours mean equal contributions. " +
  "Click a row to pin it; pinned curves share the chart's axes.";
const NOTE_ONE =
  "Pin tokens to compare how their probability builds up: the curves share the axes. Rows of the panel are positions, columns segments (the heatmap's colours).";

/** The compare view's elements. */
function compareDom() {
  const pinButton = h("button", { type: "button", class: "iglens-pin", "data-action": "pin" });
  const clearButton = h("button", { type: "button", class: "iglens-pin-clear", "data-action": "unpin-all", text: "Clear pins" });
  const ySelect = h(
    "select",
    { name: "compare_y", class: "iglens-input", "aria-label": "Quantity on the y axis" },
    h("option", { value: "delta", text: "cumulative \u0394p" }),
    h("option", { value: "p", text: "lens value" }),
  );
  const pins = h("div", { class: "iglens-compare-pins", role: "list", "aria-label": "Pinned positions" });
  const chartWrap = h("figure", { class: "iglens-compare-figure" });
  const panels = h("div", { class: "iglens-compare-panels" });
  const legend = createLegend("iglens-compare-legend");
  const readout = h("div", { class: "iglens-compare-readout", "aria-live": "off" });
  const notice = h("p", { class: "iglens-compare-error", role: "alert" });
  notice.hidden = true;
  const note = h("p", { class: "iglens-foot" });
  const el = h(
    "section",
    { class: "iglens-compare", "data-view": "compare", "aria-label": "Compare positions and results" },
    h(
      "div",
      { class: "iglens-section-head" },
      h("h2", { class: "iglens-section-title", text: "Compare" }),
      pinButton,
      clearButton,
      h("span", { class: "iglens-spacer" }),
      h("label", { class: "iglens-muted" }, "y: ", ySelect),
    ),
    notice,
    pins,
    chartWrap,
    h(
      "div",
      { class: "iglens-section-head iglens-compare-panels-head" },
      h("h3", { class: "iglens-section-title iglens-compare-panels-title" }),
      h("span", { class: "iglens-spacer" }),
      legend,
    ),
    panels,
    readout,
    note,
  );
  return { el, pinButton, clearButton, ySelect, pins, chartWrap, panels, legend, readout, notice, note };
}

/**
 * The pin button, the clear button, the y select and the comparison's error notice.
 * @param {ReturnType<typeof compareDom>} d @param {import("../context.js").Context} ctx
 * @param {import("../../model/comparison.js").Comparison} cmp @param {Array<[number, number]>} pinned @param {"delta"|"p"} yMode
 */
function renderHead(d, ctx, cmp, pinned, yMode) {
  const { pinButton, clearButton, notice } = d;
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
  d.ySelect.value = yMode;
  notice.hidden = !cmp.error;
  notice.textContent = cmp.error ? `Could not read the comparison: ${cmp.error}` : "";
}

/**
 * @param {import("../context.js").Context} ctx
 */
export function createCompare(ctx) {
  const d = compareDom();
  const { el, panels, readout } = d;
  /** @type {import("../../model/comparison.js").Comparison} */
  let cmp = readComparison(null, null);
  /** @type {any} */ let rawSeen = undefined;
  /** @type {import("../../model/result.js").Result|null} */ let resultSeen = null;
  /** @type {Array<[number, number]>} */
  let pinned = [];
  /** @type {"delta"|"p"} */
  let yMode = "delta";
  /** @type {Array<() => void>} */
  let local = [];

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
  const savePins = (next) =>
    ctx.setTrait(
      "pinned",
      next.map(([a, b]) => [a, b]),
    );

  /** The curves to draw: the pins, or the selected token as a dashed preview. */
  function curves() {
    /** @type {import("./chart.js").Curve[]} */
    const out = pinned.map(([rr, i], q) => ({ r: rr, i, color: palette()[q % palette().length], preview: false }));
    const sel = ctx.selected();
    const r0 = cmp.results[0];
    if (r0 && sel >= 0 && r0.hasTarget[sel] && !pinned.some(([a, b]) => a === 0 && b === sel)) {
      out.push({ r: 0, i: sel, color: "currentColor", preview: true });
    }
    return out;
  }

  const renderChart = () => renderCompareChart(d.chartWrap, Math.max(300, (el.clientWidth || 640) - 2), cmp, curves(), yMode);

  /** Fit-to-height heatmaps, one per result, on the shared scale. */
  function renderPanels() {
    clear(panels);
    if (!cmp.results.length) return;
    const scale = divergingScale(cmp.limit, ctx.theme);
    const titleEl = /** @type {HTMLElement} */ (el.querySelector(".iglens-compare-panels-title"));
    titleEl.textContent = cmp.multi ? `${cmp.results.length} results on one colour scale` : "Click rows to pin them";
    drawLegend(d.legend, scale, `contribution to ${cmp.results[0].targetName}${cmp.multi ? " (shared scale)" : ""}`);
    panels.setAttribute("data-limit", String(cmp.limit));
    const n = cmp.results.length;
    const total = Math.max(260, (el.clientWidth || 640) - 2);
    const pw = Math.max(180, Math.floor((total - 12 * (n - 1)) / n));
    const marks = { pinned, colors: palette(), selected: ctx.selected(), dark: ctx.theme === "dark" };
    const nan = nanRgb(ctx.theme);
    cmp.results.forEach((r, rr) => {
      const panel = comparePanel(cmp, rr, pw, scale, nan, marks, {
        click(i) {
          if (i < 0 || !r.hasTarget[i]) return;
          savePins(togglePin(pinned, rr, i));
          if (rr === 0) ctx.select(i);
        },
        move(i) {
          renderReadout(readout, cmp, rr, i);
          if (rr === 0) ctx.hover(i);
        },
        leave() {
          renderReadout(readout, cmp, -1, -1);
          if (rr === 0) ctx.hover(-1);
        },
      });
      local.push(...panel.offs);
      panels.appendChild(panel.fig);
    });
  }

  function render() {
    local.forEach((off) => off());
    local = [];
    load();
    renderHead(d, ctx, cmp, pinned, yMode);
    local.push(...renderPins(d.pins, cmp, pinned, palette(), (rr, i) => savePins(pinned.filter(([a, b]) => !(a === rr && b === i)))));
    renderChart();
    renderPanels();
    renderReadout(readout, cmp, -1, -1);
    d.note.textContent = cmp.multi ? NOTE_MULTI : NOTE_ONE;
  }

  const offs = [
    listen(d.pinButton, "click", () => {
      const sel = ctx.selected();
      const r = ctx.result;
      if (!r || sel < 0 || !r.hasTarget[sel]) return;
      savePins(togglePin(pinned, 0, sel));
    }),
    listen(d.clearButton, "click", () => savePins([])),
    listen(d.ySelect, "change", () => {
      yMode = d.ySelect.value === "p" ? "p" : "delta";
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
