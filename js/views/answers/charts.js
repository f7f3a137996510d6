/**
 * The answers panel's two kinds of chart, on the result's depth axis (as the detail panel's):
 * signed bars, one per segment (named with `segment_labels`), and curves over the k+1
 * boundaries. Every value a chart draws is on its element as `data-value` / `data-values`
 * (full precision), every bar and dot has a `<title>`.
 * @module views/answers/charts
 */
import { s } from "../../lib/dom.js";
import { linearScale } from "../../lib/layout.js";
import { niceTicks, formatTick, POSITIVE, NEGATIVE, POSITIVE_DARK, NEGATIVE_DARK } from "../../lib/colorscale.js";

const M = { left: 58, right: 14, top: 10, bottom: 24 };

/** Label every step-th of n labels so that labels of about `chars` characters fit in `width`. @param {number} n @param {number} width @param {number} chars */
function labelStep(n, width, chars) {
  return Math.max(1, Math.ceil((n * (chars * 6.5 + 8)) / Math.max(1, width)));
}

/** The x scale over depth. @param {import("../../model/result.js").Result} r @param {number} W */
function depthScale(r, W) {
  const b = r.boundaries;
  return linearScale([b[0] - 0.6, b[r.k] + 0.6], [M.left, W - M.right]);
}

/**
 * The frame: an svg with y ticks, grid lines and a y title.
 * @param {number} W @param {number} H @param {[number, number]} domain @param {string} label @param {string} yTitle @param {string} cls
 */
function frame(W, H, domain, label, yTitle, cls) {
  const svg = s("svg", { class: `iglens-chart ${cls}`, width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
  const y = linearScale(domain, [H - M.bottom, M.top]);
  const { ticks, step } = niceTicks(domain[0], domain[1], 3);
  for (const t of ticks) {
    const yy = y(t);
    svg.appendChild(s("line", { class: t === 0 ? "iglens-zero" : "iglens-grid", x1: M.left, x2: W - M.right, y1: yy, y2: yy }));
    svg.appendChild(s("text", { class: "iglens-tick", x: M.left - 6, y: yy, "text-anchor": "end", "dominant-baseline": "middle" }, formatTick(t, step)));
  }
  const cy = (M.top + H - M.bottom) / 2;
  svg.appendChild(s("text", { class: "iglens-ytitle", x: 0, y: 0, transform: `translate(11, ${cy}) rotate(-90)`, "text-anchor": "middle" }, yTitle));
  return { svg, y };
}

/** [lo, hi] over the finite values, with 0 inside and some room. @param {ArrayLike<number>[]} series @param {boolean} withZero */
function extent(series, withZero) {
  let lo = withZero ? 0 : Infinity;
  let hi = withZero ? 0 : -Infinity;
  for (const v of series)
    for (let q = 0; q < v.length; q++)
      if (Number.isFinite(v[q])) {
        lo = Math.min(lo, v[q]);
        hi = Math.max(hi, v[q]);
      }
  if (!Number.isFinite(lo)) return /** @type {[number, number]} */ ([0, 1]);
  if (hi <= lo) hi = lo + 1e-9;
  const pad = 0.1 * (hi - lo);
  return /** @type {[number, number]} */ ([lo < 0 ? lo - pad : lo, hi > 0 ? hi + pad : hi]);
}

/**
 * Signed bars, one per segment, from 0 to values[j].
 * @param {{r: import("../../model/result.js").Result, values: ArrayLike<number>, W: number, H?: number, label: string, yTitle: string,
 *   cls: string, barClass: string, dark: boolean, title: (j: number, v: number) => string}} o
 */
export function segmentBars(o) {
  const { r, values, W, label, yTitle, cls, barClass, dark, title } = o;
  const H = o.H ?? 132;
  const { svg, y } = frame(W, H, extent([values], true), label, yTitle, cls);
  const x = depthScale(r, W);
  const b = r.boundaries;
  const bars = s("g", { class: "iglens-bars" });
  for (let j = 0; j < r.k; j++) {
    const v = values[j];
    if (!Number.isFinite(v)) continue;
    const x0 = x(b[j]);
    const x1 = x(b[j + 1]);
    const w = Math.max(1, (x1 - x0) * 0.8);
    const y0 = y(0);
    const y1 = y(v);
    const fill = v >= 0 ? (dark ? POSITIVE_DARK : POSITIVE) : dark ? NEGATIVE_DARK : NEGATIVE;
    bars.appendChild(
      s(
        "rect",
        {
          class: barClass,
          "data-segment": j,
          "data-value": String(v),
          x: (x0 + x1) / 2 - w / 2,
          y: Math.min(y0, y1),
          width: w,
          height: Math.max(0.5, Math.abs(y1 - y0)),
          fill,
        },
        s("title", {}, title(j, v)),
      ),
    );
  }
  svg.appendChild(bars);
  const chars = Math.max(...r.segmentLabels.map((l) => l.length), 1);
  const step = labelStep(r.k, W - M.left - M.right, chars);
  const axis = s("g", { class: "iglens-xaxis" });
  for (let j = 0; j < r.k; j += step) {
    axis.appendChild(
      s(
        "text",
        {
          class: "iglens-tick iglens-xtick-label",
          "data-tick": r.segmentLabels[j],
          x: (x(b[j]) + x(b[j + 1])) / 2,
          y: H - M.bottom + 14,
          "text-anchor": "middle",
        },
        r.segmentLabels[j],
      ),
    );
  }
  svg.appendChild(axis);
  return svg;
}

/**
 * Curves over the boundaries (0 at the embeddings … k at the output), each scaled by `scale`
 * for the y axis (percent: 100) while its `data-values` keep the values themselves.
 * @param {{r: import("../../model/result.js").Result, series: Array<{values: ArrayLike<number>, cls: string, color: string, name: string, attrs?: Record<string, string>}>,
 *   W: number, H?: number, label: string, yTitle: string, cls: string, scale: number, fmt: (v: number) => string}} o
 */
export function boundaryCurves(o) {
  const { r, series, W, label, yTitle, cls, scale, fmt } = o;
  const H = o.H ?? 140;
  const scaled = series.map((c) => Array.from(c.values, (v) => v * scale));
  const [lo, hi] = extent(scaled, true);
  const { svg, y } = frame(W, H, [Math.max(lo, 0) === 0 ? 0 : lo, hi], label, yTitle, cls);
  const x = depthScale(r, W);
  const b = r.boundaries;
  series.forEach((c, q) => {
    const g = s("g", { class: "iglens-curve-series", ...(c.attrs ?? {}) });
    const pts = [];
    for (let L = 0; L <= r.k; L++) {
      const v = scaled[q][L];
      if (!Number.isFinite(v)) continue;
      pts.push(`${x(b[L]).toFixed(1)},${y(v).toFixed(1)}`);
      if (r.k <= 64) {
        const where = L === 0 ? "at the embeddings" : L === r.k ? "at the output" : `after block ${b[L]}`;
        g.appendChild(
          s("circle", { class: "iglens-curve-dot", cx: x(b[L]), cy: y(v), r: 2.4, fill: c.color }, s("title", {}, `${c.name} ${where}: ${fmt(c.values[L])}`)),
        );
      }
    }
    const values = Array.from(c.values, (v) => String(v)).join(" ");
    g.insertBefore(
      s("polyline", { class: c.cls, "data-values": values, points: pts.join(" "), fill: "none", stroke: c.color, "stroke-width": 1.8, ...(c.attrs ?? {}) }),
      g.firstChild,
    );
    svg.appendChild(g);
  });
  const labels = b.map((d) => (d === 0 ? "emb" : String(d)));
  const step = labelStep(r.k + 1, W - M.left - M.right, Math.max(...labels.map((l) => l.length)));
  const axis = s("g", { class: "iglens-xaxis" });
  for (let L = 0; L <= r.k; L += step) {
    axis.appendChild(
      s("text", { class: "iglens-tick iglens-xtick-label", "data-tick": labels[L], x: x(b[L]), y: H - M.bottom + 14, "text-anchor": "middle" }, labels[L]),
    );
  }
  svg.appendChild(axis);
  return svg;
}
