/**
 * Chart (b) of the detail panel: the target's lens value after each boundary (cumulative),
 * and — with an interior path — the value along the straight path inside each segment, its
 * steps against the segment marked ×.
 * @module views/detail/curve
 */
import { isLogitLens, lensPhrase } from "../../model/lens-name.js";
import { s } from "../../lib/dom.js";
import { linearScale } from "../../lib/layout.js";
import { fmtProb } from "../../lib/format.js";
import { pathBox, riemannTerms } from "./path.js";

/**
 * @param {import("../context.js").Context} ctx
 * @param {import("../../model/result.js").Result} r @param {number} i @param {import("./space.js").ChartSpace} S
 */
export function curveChart(ctx, r, i, S) {
  const { W, M, XL, dark, b, k, lens, lazyTrait, lazy, path, m, stepFlags, x, frame, shade, yAxis, yTitle, xAxis } = S;
  const Hb = 138 + XL;
  const B = frame(
    Hb,
    "cumulative lens probability",
    (path
      ? `(b) ${r.targetName} after block L, and along the straight path inside each segment (m=${m}${lazy ? ", computed for this token" : ""})`
      : `(b) ${r.targetName} after block L (cumulative)`) + (isLogitLens(r.lens) ? "" : ` \u2014 read through the ${lensPhrase(r.lens)}`),
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
  return B;
}
