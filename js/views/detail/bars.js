/**
 * Chart (a) of the detail panel: the signed contribution of each segment as bars (flagged
 * ones hatched and marked ▲▼), and beside each the causal check's drop when there is one.
 * @module views/detail/bars
 */
import { s } from "../../dom.js";
import { linearScale } from "../../layout.js";
import { ABLATION, ABLATION_DARK } from "../../colorscale.js";
import { segmentText } from "../../result.js";
import { fmtSigned } from "../../format.js";
import { ablationBox } from "./ablation.js";

/**
 * @param {import("../context.js").Context} ctx
 * @param {import("../../result.js").Result} r @param {number} i @param {import("./space.js").ChartSpace} S
 */
export function barsChart(ctx, r, i, S) {
  const { M, XL, dark, pos, neg, b, k, c, segFlags, x, frame, shade, yAxis, yTitle, xAxis } = S;
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
  return { A, drops };
}
