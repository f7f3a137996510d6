/**
 * The compare view's chart: the pinned positions' curves (cumulative Δp or the lens value
 * after each block) on shared axes, as SVG.
 * @module views/compare/chart
 */
import { h, s, clear } from "../../lib/dom.js";
import { linearScale, clamp } from "../../lib/layout.js";
import { niceTicks, formatTick } from "../../lib/colorscale.js";
import { curveValues, pinText } from "../../model/figure-data.js";

/**
 * @typedef {{r: number, i: number, color: string, preview: boolean}} Curve a pin (or the
 * selected token's dashed preview): result, position, stroke
 */

/**
 * Draw the curves into `wrap` (emptied first).
 * @param {HTMLElement} wrap @param {number} W width
 * @param {import("../../model/comparison.js").Comparison} cmp @param {Curve[]} list
 * @param {"delta"|"p"} yMode
 */
export function renderCompareChart(wrap, W, cmp, list, yMode) {
  clear(wrap);
  if (!cmp.results.length) return;
  const H = 240;
  const Mg = { left: 56, right: 16, top: 12, bottom: 40 };
  const svg = s("svg", {
    class: "iglens-chart iglens-compare-chart",
    width: W,
    height: H,
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label":
      yMode === "p" ? "lens value after each block, one curve per pinned token" : "cumulative contribution after each block, one curve per pinned token",
  });
  let maxDepth = 1;
  for (const r of cmp.results) maxDepth = Math.max(maxDepth, r.boundaries[r.k]);
  let lo = 0,
    hi = 0;
  const series = list.map((c) => {
    const r = cmp.results[c.r];
    const vals = curveValues(r, c.i, yMode);
    for (const v of vals)
      if (Number.isFinite(v)) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
    return { ...c, res: r, vals };
  });
  if (hi - lo < 1e-9) {
    lo -= 0.05;
    hi += 0.05;
  }
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
  g.appendChild(
    s(
      "text",
      { class: "iglens-axis-title", x: (Mg.left + W - Mg.right) / 2, y: H - 6, "text-anchor": "middle" },
      "block L (state after block L; 0 = embeddings)",
    ),
  );
  g.appendChild(
    s(
      "text",
      {
        class: "iglens-axis-title",
        x: 12,
        y: (Mg.top + H - Mg.bottom) / 2,
        "text-anchor": "middle",
        transform: `rotate(-90 12 ${(Mg.top + H - Mg.bottom) / 2})`,
      },
      yMode === "p" ? (cmp.results[0]?.targetName ?? "p(target)") : "cumulative \u0394p",
    ),
  );
  for (const c of series) {
    const pts = [];
    for (let j = 0; j <= c.res.k; j++) if (Number.isFinite(c.vals[j])) pts.push(`${x(c.res.boundaries[j]).toFixed(1)},${y(c.vals[j]).toFixed(1)}`);
    const line = s(
      "polyline",
      {
        class: "iglens-compare-curve" + (c.preview ? " iglens-compare-preview" : ""),
        "data-result": c.r,
        "data-position": c.i,
        "data-values": c.vals.map((v) => Number(v.toPrecision(7))).join(","),
        points: pts.join(" "),
        fill: "none",
        stroke: c.color,
        "stroke-width": c.preview ? 1.6 : 2.2,
        "stroke-dasharray": c.preview ? "5 4" : null,
      },
      s("title", {}, `${pinText(cmp, c.r, c.i, 30)}${c.preview ? " (selected, not pinned)" : ""}`),
    );
    g.appendChild(line);
    const last = c.vals[c.res.k];
    if (Number.isFinite(last)) {
      g.appendChild(s("circle", { class: "iglens-compare-end", cx: x(c.res.boundaries[c.res.k]), cy: y(last), r: 3.2, fill: c.color }));
    }
  }
  wrap.appendChild(
    h("figcaption", {
      class: "iglens-compare-caption",
      text:
        yMode === "p"
          ? `${cmp.results[0]?.targetName ?? "p(target)"} after each block, one curve per pinned token`
          : "cumulative \u0394p: the sum of the contributions up to block L (it ends at the token's \u0394p), one curve per pinned token",
    }),
  );
  wrap.appendChild(svg);
}
