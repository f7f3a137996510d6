/**
 * The detail panel for one position (the selected one, or the hovered one as a preview):
 * (a) signed per-segment bars, (b) the cumulative lens probability of the target over the
 * boundaries with the interpolation path, (c) the logit-lens overlay (top-1 token and its
 * probability per boundary), non-monotone stretches shaded, hatched and listed, the
 * completeness check in numbers, and (views/components) the head/MLP shares of one segment.
 * The x axis is depth: block L, and L − 0.5 (after block L's attention) under sub-layer
 * boundaries.
 *
 * Parts (views/detail/): `space.js` (the charts' shared coordinates, margins local to a
 * render, axes), one module per chart (`bars.js`, `curve.js`, `lens.js`), `readout.js`
 * (crosshair, flags), `ablation.js` (the causal check), `path.js` (the lazy interior path).
 * Under the charts, PNG / SVG buttons (`data-curve-export`) download chart (b), the cumulative
 * curve, as a titled slide (figures/curve.js `curveFigure`).
 * @module views/detail
 */
import { h, clear } from "../../lib/dom.js";
import { formatToken, quoteToken } from "../../lib/tokens.js";
import { lensRow, idText, contributionSum, pFinal, segmentText } from "../../model/result.js";
import { fmtProb, fmtSigned, completenessText } from "../../lib/format.js";
import { buildComponents, autoRequestComponents } from "../components.js";
import { chartSpace } from "./space.js";
import { barsChart } from "./bars.js";
import { curveChart } from "./curve.js";
import { lensChart } from "./lens.js";
import { crosshair, flagList } from "./readout.js";
import { autoRequestPath } from "./path.js";
import { createGamePanel } from "../gates.js";
import { slideExport } from "../lesson/export.js";
import { curveFigure, curveSubject } from "../../figures/curve.js";
import { slideTitleLines } from "../../figures/titles.js";

/**
 * @param {import("../context.js").Context} ctx
 */
export function createDetail(ctx) {
  const el = h("section", { class: "iglens-detail", "aria-label": "Detail of the selected token", "aria-live": "polite" });
  let width = 0;
  let shownIndex = -2;
  let shownPreview = false;
  /** @type {(() => void)[]} */
  let local = [];
  /** @type {HTMLElement|null} the heads section (rebuilt alone when its data or segment changes) */
  let compEl = null;
  // the cumulative curve (chart b) of the shown position as a slide: PNG / SVG, titled
  const curveExport = slideExport(ctx, "this curve", "data-curve-export", () => {
    const r = ctx.result;
    const i = shownIndex;
    if (!r || !(i >= 0 && i < r.T && r.hasTarget[i])) return null;
    const theme = ctx.theme;
    return {
      draw: (make) => curveFigure(make, r, i, { theme }),
      title: slideTitleLines(r, "curve", curveSubject(r, i)).join(" \u00b7 "),
      view: "curve",
      model: r.modelName || r.family,
    };
  });

  // the block-gate game of the shown position (one panel: it keeps its own listeners)
  const game = createGamePanel(ctx);

  /** Rebuild the heads section for the shown position; mark the picked segment's bar. */
  function renderComponents() {
    const r = ctx.result;
    if (!compEl || !r || shownIndex < 0 || !r.hasTarget[shownIndex]) return;
    // keep the keyboard focus where it was (the segment select, the matrix's scroll region)
    const active = typeof document !== "undefined" ? document.activeElement : null;
    const refocus =
      active && compEl.contains(active)
        ? active.matches("select")
          ? "select[name=component_segment]"
          : active.matches(".iglens-components-scroll")
            ? ".iglens-components-scroll"
            : null
        : null;
    autoRequestComponents(ctx, r, shownIndex, shownPreview); // the selected token's lazy head split
    const next = buildComponents(ctx, r, shownIndex, shownPreview);
    compEl.replaceWith(next);
    compEl = next;
    if (refocus) /** @type {HTMLElement|null} */ (next.querySelector(refocus))?.focus();
    const j = Number(next.getAttribute("data-segment"));
    for (const bar of el.querySelectorAll(".iglens-bar[data-segment]")) {
      bar.classList.toggle("iglens-bar-focus", Number(bar.getAttribute("data-segment")) === j);
    }
  }

  function render() {
    // a re-render (the causal check's answer, say) keeps the keyboard on its button
    const active = typeof document !== "undefined" ? document.activeElement : null;
    const refocusAblate = !!active && el.contains(active) && active.matches("[data-action=ablate]");
    local.forEach((off) => off());
    local = [];
    clear(el);
    compEl = null;
    const r = ctx.result;
    const i = ctx.shown();
    const preview = i >= 0 && i === ctx.hovered() && i !== ctx.selected();
    shownIndex = i;
    shownPreview = preview;
    el.classList.toggle("iglens-detail-preview", preview);
    if (!r || i < 0) {
      el.removeAttribute("data-selected-index");
      el.appendChild(
        h(
          "div",
          { class: "iglens-empty" },
          h("div", { class: "iglens-empty-title", text: r ? "Select a token" : "No result" }),
          h("div", {
            class: "iglens-empty-text",
            text: r
              ? "Click a token in the strip or a row of the heatmap to see how its probability builds up block by block. Hover previews; arrow keys move."
              : "Nothing to show yet.",
          }),
        ),
      );
      return;
    }
    el.setAttribute("data-selected-index", String(i));
    el.appendChild(header(r, i, preview));
    if (!r.hasTarget[i]) {
      el.appendChild(
        h(
          "div",
          { class: "iglens-empty" },
          h("div", {
            class: "iglens-empty-text",
            text: "This position has no target (with target \u201cnext\u201d, the last position has none). Pick another position.",
          }),
        ),
      );
      return;
    }
    const w = Math.max(260, (el.clientWidth || width || 480) - 2);
    width = w;
    const charts = buildCharts(ctx, r, i, w);
    el.appendChild(charts.readout);
    el.appendChild(charts.el);
    el.appendChild(curveExport.el);
    el.appendChild(charts.flags);
    el.appendChild(completeness(r, i));
    game.show(r, i, w, ctx.theme === "dark");
    el.appendChild(game.el);
    compEl = h("section", { class: "iglens-components" });
    el.appendChild(compEl);
    renderComponents();
    local.push(...charts.offs);
    autoRequestPath(ctx, r, i, preview);
    if (refocusAblate) /** @type {HTMLElement|null} */ (el.querySelector("[data-action=ablate]"))?.focus();
  }

  return {
    el,
    render,
    /** Re-render when the shown position changed (or always with force). */
    update(force = false) {
      const i = ctx.shown();
      const preview = i >= 0 && i === ctx.hovered() && i !== ctx.selected();
      if (force || i !== shownIndex || preview !== shownPreview) render();
    },
    /** The component split or the picked segment changed. */
    updateComponents() {
      const i = ctx.shown();
      if (i !== shownIndex) render();
      else renderComponents();
    },
    resize() {
      const w = el.clientWidth;
      if (w && Math.abs(w - 2 - width) > 1) render();
    },
    destroy() {
      local.forEach((off) => off());
      curveExport.destroy();
      game.destroy();
    },
  };
}

/**
 * @param {import("../../model/result.js").Result} r @param {number} i @param {boolean} preview
 */
function header(r, i, preview) {
  const target = r.hasTarget[i] ? r.targetTokens[i] || idText(r, r.targetIds[i]) : "";
  const title = h(
    "div",
    { class: "iglens-detail-title" },
    h("span", { class: "iglens-pos", text: `[${i}]` }),
    h("span", { class: "iglens-chip", title: quoteToken(r.tokens[i]), text: formatToken(r.tokens[i], { maxLen: 24 }) }),
    h("span", { class: "iglens-arrow", text: "\u2192" }),
    r.hasTarget[i]
      ? h("span", {
          class: "iglens-chip iglens-chip-target",
          title: `target ${quoteToken(target)} (id ${r.targetIds[i]})`,
          text: formatToken(target, { maxLen: 24 }),
        })
      : h("span", { class: "iglens-muted", text: "no target" }),
    r.hasTarget[i] ? h("span", { class: "iglens-sr-only iglens-raw-target", text: target }) : null,
    r.contrastTokens && r.contrastTokens[i]
      ? h(
          "span",
          { class: "iglens-vs" },
          h("span", { class: "iglens-muted", text: "vs" }),
          h("span", { class: "iglens-chip", title: quoteToken(r.contrastTokens[i]), text: formatToken(r.contrastTokens[i], { maxLen: 18 }) }),
        )
      : null,
    i >= r.answerStart
      ? h("span", { class: "iglens-badge iglens-badge-answer", title: "this position predicts a token of the generated answer", text: "answer" })
      : null,
    preview ? h("span", { class: "iglens-badge iglens-badge-preview", text: "preview \u00b7 click to lock" }) : null,
  );
  const stats = h("div", { class: "iglens-detail-stats" });
  if (r.hasTarget[i]) {
    const p0 = lensRow(r, i)[0];
    const pn = pFinal(r, i);
    stats.appendChild(stat(r.targetName, `${fmtProb(p0)} \u2192 ${fmtProb(pn)}`, "embeddings \u2192 output, read through the final norm + head"));
    stats.appendChild(stat("\u0394p", fmtSigned(r.deltaP[i]), "net change, the sum of all segment contributions"));
    if (r.onset[i] >= 0) {
      const j = r.onset[i];
      const width = r.boundaries[j + 1] - r.boundaries[j];
      stats.appendChild(
        stat(
          "onset",
          segmentText(r, j),
          width > 1
            ? `the segment with the largest signed contribution: blocks ${r.segmentLabels[j]}`
            : width < 1
              ? `the sub-layer with the largest signed contribution: ${r.segmentLabels[j]} (${r.segmentLabels[j].endsWith(".mlp") ? "the MLP" : "the attention"} of block ${r.onsetBlock[i]})`
              : "the block with the largest signed contribution",
        ),
      );
    }
  }
  return h("header", { class: "iglens-detail-head" }, title, stats);
}

/** @param {string} k @param {string} v @param {string} tip */
function stat(k, v, tip) {
  return h("span", { class: "iglens-stat", title: tip }, h("span", { class: "iglens-stat-k", text: k }), h("span", { class: "iglens-stat-v", text: v }));
}

/** @param {import("../../model/result.js").Result} r @param {number} i */
function completeness(r, i) {
  const sum = contributionSum(r, i);
  const dp = r.deltaP[i];
  const err = Math.abs(sum - dp);
  const exact = r.estimator !== "riemann";
  const ok = err <= 1e-4 * Math.max(1, Math.abs(dp));
  const line = h(
    "div",
    { class: "iglens-completeness" + (ok ? " iglens-ok" : " iglens-warn") },
    h("span", { class: "iglens-check", "aria-hidden": "true", text: ok ? "\u2713" : "\u2248" }),
    h("span", { class: "iglens-completeness-text", text: completenessText(sum, dp) }),
    h("span", { class: "iglens-muted", text: ` \u00b7 ${r.estimator}, m=${r.steps}` + (exact ? "" : " (Riemann: discretization error shrinks with m)") }),
  );
  return line;
}

/**
 * The three charts of position i at width W, their shared readout and the flags list.
 * @param {import("../context.js").Context} ctx
 * @param {import("../../model/result.js").Result} r @param {number} i @param {number} W
 */
function buildCharts(ctx, r, i, W) {
  const S = chartSpace(ctx, r, i, W);
  const { A, drops } = barsChart(ctx, r, i, S);
  const B = curveChart(ctx, r, i, S);
  const C = lensChart(r, i, S);
  const figs = C ? [A.wrap, B.wrap, C.wrap] : [A.wrap, B.wrap];
  const { readout, offs } = crosshair(ctx, r, i, S, A, B, C, drops);
  return { el: h("div", { class: "iglens-charts" }, ...figs), readout, flags: flagList(r, S), offs };
}
