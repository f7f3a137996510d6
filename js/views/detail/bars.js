/**
 * Chart (a) of the detail panel: the signed contribution of each segment as bars (flagged
 * ones hatched and marked ▲▼), and beside each the causal check's effects when there is one:
 * the total effect (the ablation drop, a filled grey bar) and the direct effect (later
 * blocks frozen, a hollow bar), on the contributions' scale; with a counterfactual prompt, a
 * second chart (a′) of the normalised patching effects, total and direct, per segment.
 * @module views/detail/bars
 */
import { h, s } from "../../lib/dom.js";
import { linearScale } from "../../lib/layout.js";
import { ABLATION, ABLATION_DARK } from "../../lib/colorscale.js";
import { segmentText } from "../../model/result.js";
import { fmtSigned } from "../../lib/format.js";
import { ablationBox, PATCHING, PATCHING_DARK } from "./ablation.js";

/**
 * @param {import("../context.js").Context} ctx
 * @param {import("../../model/result.js").Result} r @param {number} i @param {import("./space.js").ChartSpace} S
 */
export function barsChart(ctx, r, i, S) {
  const { M, XL, dark, pos, neg, b, k, c, segFlags, x, frame, shade, yAxis, yTitle, xAxis } = S;
  const Ha = 118 + XL;
  const A = frame(Ha, "segment contributions", "(a) contribution of each segment  \u2014  hatched \u25b2\u25bc: against \u0394p");
  // the causal check of this position, when Python (or the exported page) has it
  const abl = ctx.ablation.ablation && ctx.ablation.ablation.position === i ? ctx.ablation.ablation : null;
  const drops = abl ? abl.drops : null;
  const direct = abl ? abl.direct : null;
  let cLo = 0,
    cHi = 0;
  for (let j = 0; j < k; j++)
    if (Number.isFinite(c[j])) {
      cLo = Math.min(cLo, c[j]);
      cHi = Math.max(cHi, c[j]);
    }
  for (const v of [drops, direct])
    if (v)
      for (let j = 0; j < k; j++)
        if (Number.isFinite(v[j])) {
          cLo = Math.min(cLo, v[j]);
          cHi = Math.max(cHi, v[j]);
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
  // with a check, each segment's slot holds the contribution left, then the total effect
  // (the drop) and the direct effect: halves, or thirds with the direct effect
  const slot = (/** @type {number} */ j) => {
    const x0 = x(b[j]);
    const x1 = x(b[j + 1]);
    const full = Math.max(1, (x1 - x0) * (direct ? 0.9 : 0.8));
    const left = (x0 + x1) / 2 - full / 2;
    const n = !drops ? 1 : direct ? 3 : 2;
    const bw = Math.max(0.5, full / n);
    return { bx: left, bw, dx: left + bw, ex: left + 2 * bw };
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
    const grey = dark ? ABLATION_DARK : ABLATION;
    const where = abl.positions === "target" ? "at the answer position" : "at every position";
    const series = s("g", { class: "iglens-ablation-bars", "data-series": "ablation", "aria-label": `total effect: ablation drop (${abl.mode}) ${where}` });
    const dseries = s("g", { class: "iglens-direct-bars", "data-series": "direct", "aria-label": "direct effect: later blocks frozen" });
    for (let j = 0; j < k; j++) {
      const { dx, ex, bw } = slot(j);
      const title =
        `${segmentText(r, j)}: contribution ${fmtSigned(c[j])}, total effect ${fmtSigned(drops[j])}` +
        (direct ? `, direct effect ${fmtSigned(direct[j])}` : "");
      if (Number.isFinite(drops[j]))
        series.appendChild(bar(ya, drops[j], dx, bw, { class: "iglens-ablation-bar", "data-segment": j, "data-drop": String(drops[j]), fill: grey }, title));
      if (direct && Number.isFinite(direct[j])) {
        const inset = Math.min(0.75, bw / 4); // the stroke stays inside the slot
        dseries.appendChild(
          bar(
            ya,
            direct[j],
            ex + inset,
            Math.max(0.5, bw - 2 * inset),
            { class: "iglens-direct-bar", "data-segment": j, "data-direct": String(direct[j]), fill: "none", stroke: grey, "stroke-width": 1.5 },
            title,
          ),
        );
      }
    }
    ga.appendChild(series);
    if (direct) ga.appendChild(dseries);
  }
  xAxis(ga, Ha - XL - M.bottom, true);
  if (abl?.patching) A.wrap.appendChild(patchingChart(r, S, abl.patching, c));
  A.wrap.appendChild(ablationBox(ctx, r, i, abl, dark));
  return { A, drops };
}

/**
 * One bar from 0 to v on the scale y, with a `<title>`.
 * @param {any} y @param {number} v @param {number} x0 @param {number} w
 * @param {Record<string, string|number>} attrs @param {string} title
 */
function bar(y, v, x0, w, attrs, title) {
  const y0 = y(0);
  const y1 = y(v);
  return s("rect", { x: x0, y: Math.min(y0, y1), width: w, height: Math.max(0.5, Math.abs(y1 - y0)), ...attrs }, s("title", {}, title));
}

/**
 * Chart (a′): the normalised patching effects of a counterfactual prompt per segment, total
 * (filled) and direct (hollow), on their own scale (1: the segment's update carries the
 * whole logit difference), under chart (a) and on its x axis.
 * @param {import("../../model/result.js").Result} r @param {import("./space.js").ChartSpace} S
 * @param {import("../../model/ablation.js").Patching} pt @param {ArrayLike<number>} c
 */
function patchingChart(r, S, pt, c) {
  const { M, XL, dark, b, k, x, yAxis, yTitle, xAxis, W } = S;
  const H = 96 + XL;
  const fill = dark ? PATCHING_DARK : PATCHING;
  let lo = 0,
    hi = 1;
  for (const v of [pt.total, pt.direct])
    for (let j = 0; j < k; j++)
      if (Number.isFinite(v[j])) {
        lo = Math.min(lo, v[j]);
        hi = Math.max(hi, v[j]);
      }
  const y = linearScale([lo - (lo < 0 ? 0.1 * (hi - lo) : 0), hi + 0.08 * (hi - lo)], [H - XL - M.bottom - 4, M.top + 2]);
  const svg = s("svg", {
    class: "iglens-chart iglens-patching-chart",
    width: W,
    height: H,
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": "counterfactual patching effects",
  });
  const g = s("g");
  svg.appendChild(g);
  yAxis(g, y, y.domain[0], y.domain[1], 3);
  yTitle(g, "patching", M.top, H - XL - M.bottom);
  const total = s("g", { class: "iglens-patching-bars", "data-series": "patching-total", "aria-label": "patching effect, total" });
  const direct = s("g", { class: "iglens-patching-bars", "data-series": "patching-direct", "aria-label": "patching effect, direct" });
  for (let j = 0; j < k; j++) {
    const x0 = x(b[j]);
    const x1 = x(b[j + 1]);
    const full = Math.max(1, (x1 - x0) * 0.8);
    const bw = Math.max(0.5, full / 2);
    const left = (x0 + x1) / 2 - full / 2;
    const title = `${segmentText(r, j)}: patching effect total ${fmtSigned(pt.total[j])}, direct ${fmtSigned(pt.direct[j])} (contribution ${fmtSigned(c[j])})`;
    if (Number.isFinite(pt.total[j]))
      total.appendChild(bar(y, pt.total[j], left, bw, { class: "iglens-patching-bar", "data-segment": j, "data-effect": String(pt.total[j]), fill }, title));
    if (Number.isFinite(pt.direct[j])) {
      const inset = Math.min(0.75, bw / 4);
      direct.appendChild(
        bar(
          y,
          pt.direct[j],
          left + bw + inset,
          Math.max(0.5, bw - 2 * inset),
          { class: "iglens-patching-bar", "data-segment": j, "data-effect": String(pt.direct[j]), fill: "none", stroke: fill, "stroke-width": 1.5 },
          title,
        ),
      );
    }
  }
  g.append(total, direct);
  xAxis(g, H - XL - M.bottom, true);
  return h(
    "div",
    { class: "iglens-patching" },
    h("div", { class: "iglens-caption", text: "(a′) counterfactual patching: normalised effect of each segment" }),
    svg,
  );
}
