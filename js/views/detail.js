/**
 * The detail panel for one position (the selected one, or the hovered one as a preview):
 * (a) signed per-segment bars, (b) the cumulative lens probability of the target over the
 * boundaries with the interpolation path, (c) the logit-lens overlay (top-1 token and its
 * probability per boundary), non-monotone stretches shaded, hatched and listed, the
 * completeness check in numbers, and (views/components) the head/MLP shares of one segment.
 * The x axis is depth: block L, and L − 0.5 (after block L's attention) under sub-layer
 * boundaries.
 * @module views/detail
 */
import { h, s, clear, listen, uniqueId } from "../dom.js";
import { formatToken, quoteToken } from "../tokens.js";
import { linearScale, clamp } from "../layout.js";
import { niceTicks, formatTick, POSITIVE, NEGATIVE, POSITIVE_DARK, NEGATIVE_DARK, NONMONOTONE, ABLATION, ABLATION_DARK } from "../colorscale.js";
import { againstSegments, againstSteps, flagged, ruleText, stepRuleText } from "../nonmonotone.js";
import { contributionRow, lensRow, pathRow, topAt, idText, contributionSum, pFinal, segmentText, depthText } from "../result.js";
import { fmtProb, fmtSigned, completenessText } from "../format.js";
import { buildComponents } from "./components.js";
import { compareAblation, rhoText } from "../ablation.js";
import { readPathTrait } from "../path.js";

/** Chart margins: room for the y tick labels and the rotated y-axis title. */
let M = { left: 58, right: 14, top: 8, bottom: 6 };
/** Height of the x tick-label band under each chart. */
const XLABELS = 15;

/** The interior-path steps asked for lazily (from the panel's box; shared by the panels of a page). */
const DEFAULT_PATH_STEPS = 8;

/**
 * @param {import("./context.js").Context} ctx
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
    el.appendChild(charts.flags);
    el.appendChild(completeness(r, i));
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
    },
  };
}

/**
 * @param {import("../result.js").Result} r @param {number} i @param {boolean} preview
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

/** @param {import("../result.js").Result} r @param {number} i */
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
 * @param {import("./context.js").Context} ctx
 * @param {import("../result.js").Result} r @param {number} i @param {number} W
 */
function buildCharts(ctx, r, i, W) {
  const present = ctx.root.classList.contains("iglens-present");
  M = present ? { left: 70, right: 16, top: 10, bottom: 6 } : { left: 58, right: 14, top: 8, bottom: 6 };
  const XL = present ? 20 : XLABELS;
  const dark = ctx.theme === "dark";
  const pos = dark ? POSITIVE_DARK : POSITIVE;
  const neg = dark ? NEGATIVE_DARK : NEGATIVE;
  const b = r.boundaries;
  const k = r.k;
  const c = contributionRow(r, i);
  const lens = lensRow(r, i);
  // the interior path: the result's (steps > 1), else the one Python computed lazily for this token
  const lazyTrait = readPathTrait(ctx.model.get("path"), r);
  const lazy = !r.pathProbs && lazyTrait.path && lazyTrait.path.position === i ? lazyTrait.path : null;
  const path = r.pathProbs ? pathRow(r, i) : lazy ? lazy.flat : null;
  const m = r.pathProbs ? r.m : lazy ? lazy.m : 0;
  const segFlags = againstSegments(c, r.deltaP[i], r.nonmonotoneThreshold);
  const stepFlags = path ? againstSteps(path, k, r.nonmonotoneThreshold) : null;
  const x = linearScale([b[0] - 0.6, b[k] + 0.6], [M.left, W - M.right]);
  const hatch = uniqueId("hatch");
  const offs = [];

  /** @param {number} H @param {string} label @param {string} caption */
  const frame = (H, label, caption) => {
    const svg = s("svg", { class: "iglens-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
    const defs = s("defs");
    const pat = s(
      "pattern",
      { id: `${hatch}-${label.length}-${H}`, patternUnits: "userSpaceOnUse", width: 6, height: 6, patternTransform: "rotate(45)" },
      s("rect", { class: "iglens-hatch-bg", width: 6, height: 6, fill: NONMONOTONE }),
      s("line", { class: "iglens-hatch-line", x1: 0, y1: 0, x2: 0, y2: 6, stroke: NONMONOTONE, "stroke-width": 2.2 }),
    );
    defs.appendChild(pat);
    svg.appendChild(defs);
    const wrap = h("figure", { class: "iglens-figure" }, h("figcaption", { class: "iglens-caption", text: caption }), svg);
    return { svg, wrap, fill: `url(#${pat.getAttribute("id")})` };
  };

  /** shade the flagged segments over the whole plot height */
  const shade = (/** @type {SVGElement} */ g, /** @type {string} */ fill, /** @type {number} */ y0, /** @type {number} */ y1) => {
    for (const j of flagged(segFlags)) {
      g.appendChild(s("rect", { class: "iglens-nonmono-shade", x: x(b[j]), y: y0, width: Math.max(1, x(b[j + 1]) - x(b[j])), height: y1 - y0, fill }));
    }
  };

  /** y axis with nice ticks and grid lines */
  const yAxis = (/** @type {SVGElement} */ g, /** @type {any} */ y, /** @type {number} */ lo, /** @type {number} */ hi, /** @type {number} */ count) => {
    const { ticks, step } = niceTicks(lo, hi, count);
    for (const t of ticks) {
      const yy = y(t);
      g.appendChild(s("line", { class: t === 0 ? "iglens-zero" : "iglens-grid", x1: M.left, x2: W - M.right, y1: yy, y2: yy }));
      g.appendChild(s("text", { class: "iglens-tick", x: M.left - 6, y: yy, "text-anchor": "end", "dominant-baseline": "middle" }, formatTick(t, step)));
    }
  };

  /** the y-axis title, rotated, left of the tick labels */
  const yTitle = (/** @type {SVGElement} */ g, /** @type {string} */ text, /** @type {number} */ y0, /** @type {number} */ y1) => {
    const cy = (y0 + y1) / 2;
    g.appendChild(
      s("text", { class: "iglens-ytitle", x: 0, y: 0, transform: `translate(${present ? 13 : 11}, ${cy}) rotate(-90)`, "text-anchor": "middle" }, text),
    );
  };

  const xTicks = (() => {
    const span = b[k] - b[0];
    const want = clamp(Math.floor((W - M.left - M.right) / (present ? 44 : 34)), 2, 16);
    const { ticks } = niceTicks(b[0], b[k], want);
    return ticks.filter((t) => Number.isInteger(t) || span < 4);
  })();

  /** x axis labels along the bottom */
  const xAxis = (/** @type {SVGElement} */ g, /** @type {number} */ yy, /** @type {boolean} */ labels) => {
    const axis = s("g", { class: "iglens-xaxis" });
    for (const t of xTicks) {
      axis.appendChild(s("line", { class: "iglens-xtick", x1: x(t), x2: x(t), y1: yy, y2: yy + 3 }));
      if (labels)
        axis.appendChild(
          s("text", { class: "iglens-tick iglens-xtick-label", "data-tick": t, x: x(t), y: yy + (present ? 17 : 13), "text-anchor": "middle" }, String(t)),
        );
    }
    g.appendChild(axis);
  };

  // (a) bars -----------------------------------------------------------------------------
  const Ha = 118 + XL;
  const A = frame(Ha, "segment contributions", "(a) contribution of each segment  \u2014  hatched \u25b2\u25bc: against \u0394p");
  // the causal check of this position, when Python (or the exported page) has it
  const abl = ctx.ablation.ablation && ctx.ablation.ablation.position === i ? ctx.ablation.ablation : null;
  const drops = abl ? abl.drops : null;
  let cLo = 0,
    cHi = 0;
  for (let j = 0; j < k; j++)
    if (Number.isFinite(c[j])) {
      cLo = Math.min(cLo, c[j]);
      cHi = Math.max(cHi, c[j]);
    }
  if (drops)
    for (let j = 0; j < k; j++)
      if (Number.isFinite(drops[j])) {
        cLo = Math.min(cLo, drops[j]);
        cHi = Math.max(cHi, drops[j]);
      }
  if (cLo === cHi) {
    cLo = -1e-9;
    cHi = 1e-9;
  }
  const padA = 0.16 * (cHi - cLo);
  const ya = linearScale([cLo - (cLo < 0 ? padA : 0), cHi + (cHi > 0 ? padA : 0)], [Ha - XL - M.bottom - 4, M.top + 2]);
  const ga = s("g");
  A.svg.appendChild(ga);
  shade(ga, A.fill, M.top, Ha - XL - M.bottom);
  yAxis(ga, ya, ya.domain[0], ya.domain[1], 3);
  yTitle(ga, "contribution", M.top, Ha - XL - M.bottom);
  const bars = s("g", { class: "iglens-bars" });
  // with drops, each segment's slot holds two bars: the contribution left, the drop right
  const slot = (/** @type {number} */ j) => {
    const x0 = x(b[j]);
    const x1 = x(b[j + 1]);
    const full = Math.max(1, (x1 - x0) * 0.8);
    const left = (x0 + x1) / 2 - full / 2;
    return drops ? { bx: left, bw: Math.max(0.5, full / 2), dx: left + full / 2 } : { bx: left, bw: full, dx: left };
  };
  for (let j = 0; j < k; j++) {
    const v = c[j];
    if (!Number.isFinite(v)) continue;
    const { bx, bw } = slot(j);
    const y0 = ya(0);
    const y1 = ya(v);
    const rect = s("rect", {
      class: "iglens-bar",
      "data-segment": j,
      x: bx,
      y: Math.min(y0, y1),
      width: bw,
      height: Math.max(0.5, Math.abs(y1 - y0)),
      fill: v >= 0 ? pos : neg,
    });
    bars.appendChild(rect);
    if (segFlags[j]) {
      bars.appendChild(
        s("rect", {
          class: "iglens-bar-flag",
          x: bx,
          y: Math.min(y0, y1),
          width: bw,
          height: Math.max(0.5, Math.abs(y1 - y0)),
          fill: A.fill,
          stroke: "currentColor",
          "stroke-width": 0.9,
        }),
      );
      bars.appendChild(
        s("text", { class: "iglens-flag-mark", x: bx + bw / 2, y: v < 0 ? y1 + 10 : y1 - 3, "text-anchor": "middle" }, v < 0 ? "\u25bc" : "\u25b2"),
      );
    }
  }
  ga.appendChild(bars);
  if (drops && abl) {
    const fill = dark ? ABLATION_DARK : ABLATION;
    const series = s("g", { class: "iglens-ablation-bars", "data-series": "ablation", "aria-label": `ablation drop (${abl.mode})` });
    for (let j = 0; j < k; j++) {
      const v = drops[j];
      if (!Number.isFinite(v)) continue;
      const { dx, bw } = slot(j);
      const y0 = ya(0);
      const y1 = ya(v);
      series.appendChild(
        s(
          "rect",
          {
            class: "iglens-ablation-bar",
            "data-segment": j,
            "data-drop": String(v),
            x: dx,
            y: Math.min(y0, y1),
            width: bw,
            height: Math.max(0.5, Math.abs(y1 - y0)),
            fill,
          },
          s("title", {}, `${segmentText(r, j)}: contribution ${fmtSigned(c[j])}, ablation drop (${abl.mode}) ${fmtSigned(v)}`),
        ),
      );
    }
    ga.appendChild(series);
  }
  xAxis(ga, Ha - XL - M.bottom, true);
  A.wrap.appendChild(ablationBox(ctx, r, i, abl, dark));

  // (b) cumulative curve -------------------------------------------------------------------
  const Hb = 138 + XL;
  const B = frame(
    Hb,
    "cumulative lens probability",
    path
      ? `(b) ${r.targetName} after block L, and along the straight path inside each segment (m=${m}${lazy ? ", computed for this token" : ""})`
      : `(b) ${r.targetName} after block L (cumulative)`,
  );
  let pLo = Infinity,
    pHi = -Infinity;
  const consider = (/** @type {number} */ v) => {
    if (Number.isFinite(v)) {
      pLo = Math.min(pLo, v);
      pHi = Math.max(pHi, v);
    }
  };
  lens.forEach(consider);
  if (path) path.forEach(consider);
  if (!Number.isFinite(pLo)) {
    pLo = 0;
    pHi = 1;
  }
  if (pLo >= 0) pLo = 0;
  if (pHi <= pLo) pHi = pLo + 1e-6;
  const bBottom = Hb - XL - M.bottom;
  const yb = linearScale([pLo, pHi + 0.08 * (pHi - pLo)], [bBottom - 2, M.top + 4]);
  const gb = s("g");
  B.svg.appendChild(gb);
  shade(gb, B.fill, M.top, bBottom);
  yAxis(gb, yb, yb.domain[0], yb.domain[1], 3);
  yTitle(gb, r.targetName, M.top, bBottom);
  gb.appendChild(s("line", { class: "iglens-baseline", x1: M.left, x2: W - M.right, y1: yb(lens[0]), y2: yb(lens[0]) }));
  const curvePts = [];
  for (let j = 0; j <= k; j++) if (Number.isFinite(lens[j])) curvePts.push(`${x(b[j]).toFixed(1)},${yb(lens[j]).toFixed(1)}`);
  // with a path, the boundary curve is the chord (dashed) and the path is the line to read
  gb.appendChild(s("polyline", { class: "iglens-curve" + (path ? " iglens-curve-chord" : ""), points: curvePts.join(" ") }));
  if (path && m > 0) {
    const series = s("g", { class: "iglens-path-series", "data-series": lazy ? "lazy-path" : "path", "data-steps": m });
    for (let j = 0; j < k; j++) {
      const pts = [];
      const vals = [];
      for (let q = 0; q <= m; q++) {
        const v = path[j * (m + 1) + q];
        vals.push(Number.isFinite(v) ? String(v) : "NaN");
        if (Number.isFinite(v)) pts.push(`${x(b[j] + (q / m) * (b[j + 1] - b[j])).toFixed(1)},${yb(v).toFixed(1)}`);
      }
      series.appendChild(s("polyline", { class: "iglens-path", "data-segment": j, "data-values": vals.join(" "), points: pts.join(" ") }));
      const segW = x(b[j + 1]) - x(b[j]);
      if (segW / m >= 4) {
        // the interior points themselves, where there is room
        for (let q = 1; q < m; q++) {
          const v = path[j * (m + 1) + q];
          if (Number.isFinite(v)) series.appendChild(s("circle", { class: "iglens-path-dot", cx: x(b[j] + (q / m) * (b[j + 1] - b[j])), cy: yb(v), r: 1.8 }));
        }
      }
    }
    gb.appendChild(series);
    if (stepFlags) {
      for (let j = 0; j < k; j++) {
        for (let q = 0; q < m; q++) {
          if (!stepFlags[j][q]) continue;
          const xa = x(b[j] + (q / m) * (b[j + 1] - b[j]));
          const xb = x(b[j] + ((q + 1) / m) * (b[j + 1] - b[j]));
          const ya0 = yb(path[j * (m + 1) + q]);
          const yb0 = yb(path[j * (m + 1) + q + 1]);
          gb.appendChild(s("line", { class: "iglens-step-flag", x1: xa, x2: xb, y1: ya0, y2: yb0 }));
          gb.appendChild(s("text", { class: "iglens-step-mark", x: (xa + xb) / 2, y: (ya0 + yb0) / 2 + 3.5, "text-anchor": "middle" }, "\u00d7"));
        }
      }
    }
  }
  if (k <= 64) {
    for (let j = 0; j <= k; j++) {
      if (Number.isFinite(lens[j])) gb.appendChild(s("circle", { class: "iglens-curve-dot", cx: x(b[j]), cy: yb(lens[j]), r: 2.6 }));
    }
  }
  gb.appendChild(s("text", { class: "iglens-end-label", x: Math.min(x(b[k]) + 2, W - 2), y: yb(lens[k]) - 7, "text-anchor": "end" }, fmtProb(lens[k])));
  xAxis(gb, bBottom, true);
  B.wrap.appendChild(pathBox(ctx, r, i, path ? m : 0, !!lazy, lazyTrait, dark));
  if (lazy && lazy.terms) B.wrap.appendChild(riemannTerms(ctx, r, i, lazy));

  // (c) logit-lens overlay ------------------------------------------------------------------
  const figs = [A.wrap, B.wrap];
  const Hc = 162 + (present ? 16 : 0);
  const cBottom = Hc - 32 - (present ? 8 : 0);
  let C = null;
  if (r.K > 0) {
    C = frame(Hc, "logit lens top-1", "(c) logit lens: the lens's top-1 token after block L and its probability");
    const yc = linearScale([0, 1.22], [cBottom, M.top + 2]);
    const gc = s("g");
    C.svg.appendChild(gc);
    shade(gc, C.fill, M.top, cBottom);
    for (const t of [0, 0.5, 1]) {
      gc.appendChild(s("line", { class: t === 0 ? "iglens-zero" : "iglens-grid", x1: M.left, x2: W - M.right, y1: yc(t), y2: yc(t) }));
      gc.appendChild(s("text", { class: "iglens-tick", x: M.left - 6, y: yc(t), "text-anchor": "end", "dominant-baseline": "middle" }, formatTick(t, 0.5)));
    }
    yTitle(gc, "probability", M.top, cBottom);
    const top1 = [];
    for (let j = 0; j <= k; j++) top1.push(topAt(r, i, j, 1)[0] ?? null);
    const tl = [];
    const ref = [];
    for (let j = 0; j <= k; j++) {
      if (top1[j] && Number.isFinite(top1[j].p)) tl.push(`${x(b[j]).toFixed(1)},${yc(top1[j].p).toFixed(1)}`);
      if (Number.isFinite(lens[j]) && !r.hasContrast) ref.push(`${x(b[j]).toFixed(1)},${yc(clamp(lens[j], 0, 1)).toFixed(1)}`);
    }
    if (ref.length) gc.appendChild(s("polyline", { class: "iglens-ref", points: ref.join(" ") }));
    gc.appendChild(s("polyline", { class: "iglens-top1", points: tl.join(" ") }));
    const labelsAt = [];
    for (let j = 0; j <= k; j++) {
      const t = top1[j];
      if (!t) continue;
      const hit = t.id === r.targetIds[i];
      // every dot names its token on hover, so a label left out below is one hover away
      gc.appendChild(
        s(
          "circle",
          { class: hit ? "iglens-top1-hit" : "iglens-top1-miss", cx: x(b[j]), cy: yc(t.p), r: 3 },
          s("title", {}, `${quoteToken(t.text)}: ${fmtProb(t.p)} after ${depthText(b[j])}`),
        ),
      );
      if (j === 0 || !top1[j - 1] || top1[j - 1]?.id !== t.id) labelsAt.push(j);
    }
    // labels where top-1 changes, staggered on three heights; those that would collide are
    // thinned visibly: counted in the legend below ("n more: hover the dots")
    /** @type {number[][]} */
    const lanes = [[], [], []];
    const charW = present ? 9.2 : 6.3;
    let hidden = 0;
    for (const j of labelsAt) {
      const t = /** @type {{id: number, text: string, p: number}} */ (top1[j]);
      const text = formatToken(t.text, { maxLen: 10 });
      const tw = charW * Array.from(text).length + 8;
      const cx = clamp(x(b[j]), M.left + tw / 2, W - M.right - tw / 2);
      const lane = lanes.findIndex((ls) => ls.every((other) => Math.abs(other - cx) > (tw + 44) / 2));
      if (lane < 0) {
        hidden++;
        continue;
      }
      lanes[lane].push(cx);
      const lh = present ? 18 : 14;
      const cy = yc(t.p) - 9 - (lh - 1) * lane;
      const ty = Math.max(M.top + 7, cy);
      const label = s(
        "g",
        { class: "iglens-top1-label" + (t.id === r.targetIds[i] ? " iglens-top1-label-hit" : ""), "data-layer": b[j] },
        s("rect", { x: cx - tw / 2, y: ty - lh / 2 - 1, width: tw, height: lh, rx: 3 }),
        s("text", { x: cx, y: ty + (present ? 4 : 2.5), "text-anchor": "middle" }, text),
        s("title", {}, `${quoteToken(t.text)}: ${fmtProb(t.p)} after ${depthText(b[j])}`),
      );
      gc.appendChild(label);
    }
    C.svg.setAttribute("data-labels-shown", String(labelsAt.length - hidden));
    C.svg.setAttribute("data-labels-hidden", String(hidden));
    xAxis(gc, cBottom, true);
    gc.appendChild(
      s(
        "text",
        { class: "iglens-axis-title", x: (M.left + W - M.right) / 2, y: Hc - 3, "text-anchor": "middle" },
        r.halves ? "depth L (state after block L; L − 0.5: after its attention; 0 = embeddings)" : "block L (state after block L; 0 = embeddings)",
      ),
    );
    C.wrap.appendChild(
      chartLegend(
        [
          ["iglens-key-top1", "top-1 lens token's probability"],
          ["iglens-key-hit", "filled: the top-1 is the target"],
          ...(ref.length ? [/** @type {[string, string]} */ (["iglens-key-ref", `${r.targetName} (as in b)`])] : []),
        ],
        labelsAt.length,
        hidden,
      ),
    );
    figs.push(C.wrap);
  }

  // crosshair + readout, shared by the three charts ---------------------------------------------
  const readout = h("div", { class: "iglens-readout", "aria-live": "off" });
  const defaultReadout = () => {
    clear(readout);
    readout.appendChild(h("span", { class: "iglens-muted", text: "Hover the charts for the values at each block." }));
  };
  defaultReadout();
  const guides = [A, B, C].filter(Boolean).map((F) => {
    const line = s("line", {
      class: "iglens-guide",
      x1: 0,
      x2: 0,
      y1: M.top,
      y2: Number(/** @type {any} */ (F).svg.getAttribute("height")) - M.bottom,
      visibility: "hidden",
    });
    /** @type {any} */ (F).svg.appendChild(line);
    return line;
  });
  const onMove = (/** @type {MouseEvent} */ e) => {
    const svg = /** @type {SVGElement} */ (e.currentTarget);
    const rect = svg.getBoundingClientRect();
    const bx = x.invert(e.clientX - rect.left);
    // nearest boundary
    let jb = 0;
    for (let j = 1; j <= k; j++) if (Math.abs(b[j] - bx) < Math.abs(b[jb] - bx)) jb = j;
    // segment containing bx
    let js = 0;
    while (js < k - 1 && bx > b[js + 1]) js++;
    const onBars = svg === A.svg;
    const gx = onBars ? (x(b[js]) + x(b[js + 1])) / 2 : x(b[jb]);
    for (const line of guides) {
      line.setAttribute("x1", String(gx));
      line.setAttribute("x2", String(gx));
      line.setAttribute("visibility", "visible");
    }
    clear(readout);
    if (onBars) {
      readout.append(
        h("strong", { text: segmentText(r, js) }),
        h("span", { text: ` contribution ${fmtSigned(c[js])}` }),
        drops ? h("span", { class: "iglens-readout-drop", text: ` \u00b7 ablation drop ${fmtSigned(drops[js])}` }) : "",
        h("span", { class: "iglens-muted", text: ` \u00b7 ${r.targetName} ${fmtProb(lens[js])} \u2192 ${fmtProb(lens[js + 1])}` }),
        segFlags[js] ? h("span", { class: "iglens-flag-text", text: " \u00b7 against \u0394p" }) : "",
      );
    } else {
      const t = topAt(r, i, jb, 1)[0];
      readout.append(
        h("strong", { text: b[jb] === 0 ? "embeddings (L = 0)" : `after ${depthText(b[jb])}` }),
        h("span", { text: ` ${r.targetName} ${fmtProb(lens[jb])}` }),
        t ? h("span", { class: "iglens-muted", text: " \u00b7 top-1 " }) : "",
        t ? h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 14 }) }) : "",
        t ? h("span", { class: "iglens-muted", text: ` ${fmtProb(t.p)}` }) : "",
      );
    }
  };
  const onLeave = () => {
    for (const line of guides) line.setAttribute("visibility", "hidden");
    defaultReadout();
  };
  for (const F of [A, B, C]) {
    if (!F) continue;
    offs.push(listen(F.svg, "mousemove", onMove), listen(F.svg, "mouseleave", onLeave));
  }
  // a click on chart (a) picks the segment whose head shares the section below shows
  A.svg.classList.add("iglens-chart-pick");
  offs.push(
    listen(A.svg, "click", (/** @type {MouseEvent} */ e) => {
      const rect = A.svg.getBoundingClientRect();
      const bx = x.invert(e.clientX - rect.left);
      let js = 0;
      while (js < k - 1 && bx > b[js + 1]) js++;
      ctx.focusSegment(i, js);
    }),
  );

  // flags: non-monotone list (text, so colour is never the only cue) ----------------------------
  const segs = flagged(segFlags);
  const steps = [];
  if (stepFlags) for (let j = 0; j < k; j++) for (let q = 0; q < stepFlags[j].length; q++) if (stepFlags[j][q]) steps.push([j, q]);
  const flags = h("div", { class: "iglens-flags" });
  const thr = r.nonmonotoneThreshold;
  if (!segs.length && !steps.length) {
    flags.appendChild(
      h("span", {
        class: "iglens-muted iglens-flag-rule",
        text: `Monotone: no segment moves ${ruleText(thr)}` + (path ? `, and no step moves against its segment ${stepRuleText(thr)}.` : "."),
      }),
    );
  } else {
    if (segs.length) {
      flags.appendChild(
        h(
          "div",
          { class: "iglens-flag-line" },
          h("span", { class: "iglens-flag-swatch", "aria-hidden": "true" }),
          h("strong", { text: "Against \u0394p: " }),
          segs.map((j) => `${c[j] < 0 ? "\u25bc" : "\u25b2"} ${r.segmentLabels[j]} (${fmtSigned(c[j])})`).join(", "),
        ),
      );
    }
    if (steps.length) {
      const shown = steps
        .slice(0, 12)
        .map(([j, q]) => `${r.segmentLabels[j]} step ${q + 1}/${r.m}`)
        .join(", ");
      flags.appendChild(
        h(
          "div",
          { class: "iglens-flag-line" },
          h("span", { class: "iglens-flag-x", "aria-hidden": "true", text: "\u00d7" }),
          h("strong", { text: "Steps against their segment: " }),
          shown + (steps.length > 12 ? `, \u2026 (${steps.length} in all)` : ""),
        ),
      );
    }
    flags.appendChild(
      h("div", {
        class: "iglens-muted iglens-flag-rule",
        text: `Flagged: segments that move ${ruleText(thr)}` + (path ? `; steps that move against their segment ${stepRuleText(thr)}.` : "."),
      }),
    );
  }

  return { el: h("div", { class: "iglens-charts" }, ...figs), readout, flags, offs };
}

/** What one ablation removes, in the button's words. @param {import("../result.js").Result} r */
export function ablationUnit(r) {
  return r.halves ? "sub-layer" : r.singleBlocks ? "block" : "segment";
}

/** Static pages: why the button does nothing (its title), and in short (beside it). */
export const ABLATE_HINT = "The causal check runs the model: open this view in a notebook with its IGLens (iglens_viz.widget.show) to ablate.";
export const ABLATE_SHORT_HINT = "needs a Python kernel with the model";

/**
 * The causal check under chart (a): the button (or why it is off), the state of the
 * computation, and — with drops for position i — the legend and the caption in numbers.
 * @param {import("./context.js").Context} ctx
 * @param {import("../result.js").Result} r @param {number} i
 * @param {import("../ablation.js").Ablation|null} abl the check of position i
 * @param {boolean} dark
 */
function ablationBox(ctx, r, i, abl, dark) {
  const interactive = !!ctx.model.get("interactive");
  const busy = !!ctx.model.get("ablation_busy");
  const unit = ablationUnit(r);
  const box = h("div", { class: "iglens-ablation", "data-position": i });
  const head = h("div", { class: "iglens-ablation-head" });
  box.appendChild(head);
  const statusId = uniqueId("ablation-status");
  const status = h("span", { class: "iglens-ablation-status iglens-muted", id: statusId, role: "status" });
  const other = ctx.ablation.ablation && ctx.ablation.ablation.position !== i ? ctx.ablation.ablation.position : -1;
  if (interactive || !abl) {
    const label = `Causal check (ablate each ${unit})`;
    const button = h(
      "button",
      {
        type: "button",
        class: "iglens-ablate",
        "data-action": "ablate",
        "aria-describedby": statusId,
        title: interactive ? `Zero-ablate each ${unit} in the model and draw the drop of ${r.targetName} at [${i}] beside the contributions` : ABLATE_HINT,
      },
      h("span", { class: "iglens-spinner", "aria-hidden": "true" }),
      h("span", { class: "iglens-ablate-label", text: label }),
    );
    if (!interactive) {
      button.disabled = true;
      status.textContent = ABLATE_SHORT_HINT + (other >= 0 ? ` \u00b7 this page carries the drops of position ${other}` : "");
    } else if (busy) {
      // aria-disabled, not disabled: the button keeps the keyboard focus while Python works
      button.setAttribute("aria-disabled", "true");
      button.setAttribute("aria-busy", "true");
      button.classList.add("iglens-busy");
      status.textContent = `ablating each ${unit}\u2026`;
    }
    button.addEventListener("click", () => {
      if (!ctx.model.get("interactive") || ctx.model.get("ablation_busy")) return;
      const previous = ctx.model.get("ablation_request");
      // A counter makes every click a change, so checking the same token again recomputes.
      ctx.setTrait("ablation_request", { position: i, _n: ((previous && previous._n) || 0) + 1 });
    });
    head.appendChild(button);
  }
  head.appendChild(status);

  const err = ctx.ablation.error;
  if (err && (ctx.ablation.errorPosition === null || ctx.ablation.errorPosition === i) && !busy) {
    box.appendChild(h("p", { class: "iglens-ablation-error", role: "alert", text: err }));
  }
  if (!abl) return box;

  if (!busy && interactive && Number.isFinite(abl.seconds))
    status.textContent = `computed in ${abl.seconds < 10 ? abl.seconds.toFixed(2) : abl.seconds.toFixed(0)} s`;
  const swatch = (/** @type {string} */ cls, /** @type {string} */ fill) => {
    const sw = h("span", { class: `iglens-ablation-swatch ${cls}`, "aria-hidden": "true" });
    sw.style.background = fill;
    return sw;
  };
  const pos = dark ? POSITIVE_DARK : POSITIVE;
  const neg = dark ? NEGATIVE_DARK : NEGATIVE;
  box.appendChild(
    h(
      "div",
      { class: "iglens-ablation-legend" },
      h(
        "span",
        { class: "iglens-ablation-key", "data-series": "contribution" },
        swatch("iglens-ablation-swatch-half", pos),
        swatch("iglens-ablation-swatch-half", neg),
        h("span", { text: "IG-Lens contribution" }),
      ),
      h(
        "span",
        { class: "iglens-ablation-key", "data-series": "ablation" },
        swatch("", dark ? ABLATION_DARK : ABLATION),
        h("span", { text: `ablation drop (${abl.mode})` }),
      ),
    ),
  );
  box.appendChild(ablationCaption(r, i, abl));
  return box;
}

/**
 * The caption in numbers: Spearman's ρ between contributions and drops over the segments,
 * and whether the largest contribution and the largest drop are the same segment.
 * @param {import("../result.js").Result} r @param {number} i
 * @param {import("../ablation.js").Ablation} abl
 */
export function ablationCaption(r, i, abl) {
  const cmp = compareAblation(contributionRow(r, i), abl.drops);
  const f = abl.targetName ?? r.targetName;
  const what = r.halves ? "attention or MLP write" : r.singleBlocks ? "block" : "segment";
  const words =
    cmp.topContribution < 0 || cmp.topDrop < 0
      ? "no finite drop to compare"
      : cmp.agree
        ? `the largest contribution and the largest drop are both ${segmentText(r, cmp.topContribution)}: agree`
        : `the largest contribution is ${segmentText(r, cmp.topContribution)}, the largest drop ${segmentText(r, cmp.topDrop)}: disagree`;
  const p = h(
    "p",
    {
      class: "iglens-caption iglens-ablation-caption " + (cmp.agree ? "iglens-ablation-agree" : "iglens-ablation-disagree"),
      "data-agree": cmp.agree ? "true" : "false",
      "data-rho": String(cmp.rho),
    },
    h("span", { text: `Drop of ${f} at [${i}] when each ${what} is zero-ablated (its total effect through later blocks) against its contribution: ` }),
    h("strong", { class: "iglens-ablation-rho", text: `Spearman \u03c1 = ${rhoText(cmp.rho)}` }),
    h("span", { text: ` over ${cmp.n} segments; ` }),
    h("strong", { class: "iglens-ablation-verdict", text: words }),
    h("span", { text: "." }),
    Number.isFinite(abl.clean) ? h("span", { class: "iglens-muted", text: ` Unablated ${f} = ${fmtProb(abl.clean)}.` }) : null,
  );
  return p;
}

/**
 * A chart's legend: one key per series (a CSS class draws its swatch), and — for the
 * logit-lens labels — how many labels were left out to avoid collisions.
 * @param {Array<[string, string]>} items [swatch class, text]
 * @param {number} [labels] labels wanted (top-1 changes)
 * @param {number} [hidden] labels left out
 */
function chartLegend(items, labels = 0, hidden = 0) {
  const el = h("div", { class: "iglens-chart-legend" });
  for (const [cls, text] of items) {
    el.appendChild(h("span", { class: "iglens-key" }, h("span", { class: `iglens-key-swatch ${cls}`, "aria-hidden": "true" }), h("span", { text })));
  }
  if (hidden > 0) {
    el.appendChild(
      h("span", {
        class: "iglens-labels-hidden",
        "data-hidden": hidden,
        text: `${labels - hidden} of ${labels} token labels shown (${hidden} more would overlap: hover the dots)`,
      }),
    );
  }
  return el;
}

/** Per context: the interior-path steps the user asked for, and the last request sent. */
const pathWishes = /** @type {WeakMap<object, {steps: number, sent: {r: object|null, i: number, steps: number}}>} */ (new WeakMap());

/** @param {import("./context.js").Context} ctx */
function pathWish(ctx) {
  let w = pathWishes.get(ctx);
  if (!w) {
    w = { steps: 0, sent: { r: null, i: -1, steps: 0 } };
    pathWishes.set(ctx, w);
  }
  return w;
}

/**
 * Ask Python for the interior path of position i at `steps` (the `path_request` trait);
 * once per (result, position, steps).
 * @param {import("./context.js").Context} ctx @param {import("../result.js").Result} r
 * @param {number} i @param {number} steps @param {boolean} [again] send even if sent before
 */
export function requestPath(ctx, r, i, steps, again = false) {
  const wish = pathWish(ctx);
  wish.steps = steps;
  if (!again && wish.sent.r === r && wish.sent.i === i && wish.sent.steps === steps) return;
  wish.sent = { r, i, steps };
  const previous = ctx.model.get("path_request");
  ctx.setTrait("path_request", { position: i, steps, _n: ((previous && previous._n) || 0) + 1 });
}

/**
 * The selected token's interior path, fetched lazily: once the user has asked for a path,
 * every newly selected token asks Python for its own (milliseconds, one token).
 * @param {import("./context.js").Context} ctx @param {import("../result.js").Result} r
 * @param {number} i @param {boolean} preview
 */
function autoRequestPath(ctx, r, i, preview) {
  const wish = pathWish(ctx);
  if (preview || r.pathProbs || !wish.steps || !ctx.model.get("interactive") || !r.hasTarget[i]) return;
  const have = readPathTrait(ctx.model.get("path"), r).path;
  if (have && have.position === i && have.m === wish.steps) return;
  requestPath(ctx, r, i, wish.steps);
}

/**
 * Under chart (b): the legend of the path, what it shows, and (interactive, no path in the
 * result) the box that asks Python for this token's path.
 * @param {import("./context.js").Context} ctx @param {import("../result.js").Result} r
 * @param {number} i @param {number} m steps of the path drawn (0: none)
 * @param {boolean} lazy the path drawn was computed for this token
 * @param {import("../path.js").PathTrait} trait @param {boolean} dark
 */
function pathBox(ctx, r, i, m, lazy, trait, dark) {
  void dark;
  const box = h("div", { class: "iglens-pathbox" });
  if (m > 0) {
    box.appendChild(
      chartLegend([
        ["iglens-key-dot", "after each block"],
        ["iglens-key-chord", "straight line between blocks"],
        ["iglens-key-path", `along the path inside each segment (m=${m})`],
        ["iglens-key-flag", "\u00d7 a step against its segment"],
      ]),
    );
    box.appendChild(
      h("p", {
        class: "iglens-caption iglens-path-teach",
        text:
          "Inside a segment the state moves in a straight line from h\u2090 to h_b; the coloured line is the probability read along it. " +
          "Where it bends away from the dashed line, the segment's change does not arrive evenly: most of it lands at the steepest steps, " +
          "and a step that dips against the segment's direction is marked \u00d7.",
      }),
    );
  }
  const interactive = !!ctx.model.get("interactive");
  if (r.pathProbs) return box;
  if (!interactive) {
    if (!m)
      box.appendChild(
        h("p", {
          class: "iglens-muted iglens-path-hint",
          text: "The path inside each segment needs steps > 1: attribute with steps=8, or open this view in a notebook with the model to compute it for one token.",
        }),
      );
    return box;
  }
  const wish = pathWish(ctx);
  const steps = h("input", {
    type: "number",
    name: "path_steps",
    class: "iglens-input iglens-steps",
    min: 2,
    max: r.maxSteps,
    step: 1,
    value: wish.steps || (lazy ? m : DEFAULT_PATH_STEPS),
    "aria-label": "interpolation steps of the path",
  });
  const button = h("button", {
    type: "button",
    class: "iglens-path-button",
    "data-action": "path",
    text: m ? "Recompute the path" : "Show the path inside each segment",
  });
  const status = h("span", { class: "iglens-muted iglens-path-status", role: "status" });
  const waiting = wish.sent.r === r && wish.sent.i === i && !(lazy && m === wish.sent.steps) && !(trait.error && trait.errorPosition === i);
  if (lazy && trait.path) status.textContent = `computed for this token in ${Math.max(1, Math.round(trait.path.seconds * 1000))} ms`;
  else if (waiting) status.textContent = "computing\u2026";
  button.addEventListener("click", () => {
    const n = Math.max(2, Math.min(r.maxSteps, Math.trunc(Number(steps.value)) || DEFAULT_PATH_STEPS));
    requestPath(ctx, r, i, n, true);
    status.textContent = "computing\u2026";
  });
  steps.addEventListener("keydown", (e) => {
    e.stopPropagation();
    if (e.key === "Enter") button.click();
  });
  box.appendChild(
    h(
      "div",
      { class: "iglens-path-ask" },
      h("label", { class: "iglens-field" }, h("span", { class: "iglens-field-label", text: "m =" }), steps),
      button,
      status,
    ),
  );
  if (trait.error && (trait.errorPosition === null || trait.errorPosition === i)) {
    box.appendChild(h("p", { class: "iglens-ablation-error iglens-path-error", role: "alert", text: trait.error }));
  }
  return box;
}

/**
 * The Riemann terms of one segment (the picked one, else the onset): m numbers whose sum is
 * the Riemann estimate of its contribution at m steps, next to the shown contribution.
 * @param {import("./context.js").Context} ctx @param {import("../result.js").Result} r
 * @param {number} i @param {import("../path.js").LazyPath} lazy
 */
function riemannTerms(ctx, r, i, lazy) {
  const j = ctx.segmentFocus.index === i && ctx.segmentFocus.j >= 0 ? ctx.segmentFocus.j : Math.max(0, r.onset[i]);
  const terms = /** @type {Float64Array} */ (lazy.terms).subarray(j * lazy.m, (j + 1) * lazy.m);
  let sum = 0;
  for (const t of terms) if (Number.isFinite(t)) sum += t;
  const shown = Array.from(terms.slice(0, 16), (t) => fmtSigned(t)).join(" ");
  return h(
    "p",
    { class: "iglens-caption iglens-riemann-terms", "data-segment": j },
    h("strong", { text: `Riemann terms of ${segmentText(r, j)} (m=${lazy.m}): ` }),
    h("span", { class: "iglens-mono", text: shown + (terms.length > 16 ? " \u2026" : "") }),
    h("span", { text: ` \u2014 sum ${fmtSigned(sum)}; contribution shown ${fmtSigned(contributionRow(r, i)[j])}` }),
  );
}
