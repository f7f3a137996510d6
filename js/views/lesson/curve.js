/**
 * The student view's curve: each series' probability after every boundary, in percent on a
 * fixed 0–100% axis (45% looks like almost half), and the walk's cursor — a vertical line at
 * the cursor's block and a ring on each curve there. Values are on the polylines as
 * `data-values` (full precision); the cursor's boundary is the svg's `data-cursor`.
 * Token and answer texts reach the chart as `<title>` text only.
 * @module views/lesson/curve
 */
import { h, s, onResize } from "../../lib/dom.js";
import { linearScale } from "../../lib/layout.js";
import { fmtPercentPlain } from "../../lib/format.js";

const M = { left: 44, right: 14, top: 10, bottom: 34 };
const Y_TICKS = [0, 25, 50, 75, 100];

/**
 * @typedef {object} CurveSeries
 * @property {string} key "answer" | "token" | "versus" (its CSS class and data-series)
 * @property {string} name its name in the dots' titles (display text)
 * @property {ArrayLike<number>} probs k+1 probabilities
 */

/**
 * The x labels: "emb" for the embeddings, the block numbers, thinned to fit the width.
 * @param {number[]} b boundaries @param {number} width
 */
function xLabels(b, width) {
  const labels = b.map((d) => (d === 0 ? "emb" : Number.isInteger(d) ? String(d) : `${Math.ceil(d)}a`));
  const chars = Math.max(...labels.map((l) => l.length));
  const step = Math.max(1, Math.ceil((labels.length * (chars * 6.5 + 10)) / Math.max(1, width)));
  return { labels, step };
}

/**
 * The frame: y grid in percent, x labels over depth and the axis titles.
 * @param {SVGElement} svg @param {number[]} b @param {number} W @param {number} H
 * @param {(v: number) => number} x @param {(v: number) => number} y
 */
function drawFrame(svg, b, W, H, x, y) {
  for (const t of Y_TICKS) {
    svg.appendChild(s("line", { class: t === 0 ? "iglens-zero" : "iglens-grid", x1: M.left, x2: W - M.right, y1: y(t), y2: y(t) }));
    svg.appendChild(s("text", { class: "iglens-tick", x: M.left - 6, y: y(t), "text-anchor": "end", "dominant-baseline": "middle" }, `${t}%`));
  }
  const { labels, step } = xLabels(b, W - M.left - M.right);
  const axis = s("g", { class: "iglens-xaxis" });
  for (let L = 0; L < labels.length; L += step) {
    axis.appendChild(s("text", { class: "iglens-tick iglens-xtick-label", x: x(b[L]), y: H - M.bottom + 14, "text-anchor": "middle" }, labels[L]));
  }
  svg.appendChild(axis);
  svg.appendChild(s("text", { class: "iglens-xtitle", x: (M.left + W - M.right) / 2, y: H - 4, "text-anchor": "middle" }, "block"));
}

/**
 * One series: its polyline and a dot (with a title) per boundary.
 * @param {CurveSeries} c @param {number[]} b @param {(v: number) => number} x @param {(v: number) => number} y
 * @param {boolean} subject the walk's subject (the first series)
 */
function seriesGroup(c, b, x, y, subject) {
  const g = s("g", { class: `iglens-lesson-series iglens-lesson-${c.key}${subject ? " iglens-lesson-subject" : ""}`, "data-series": c.key });
  const pts = [];
  for (let L = 0; L < b.length; L++) {
    const v = c.probs[L];
    if (!Number.isFinite(v)) continue;
    pts.push(`${x(b[L]).toFixed(1)},${y(100 * v).toFixed(1)}`);
    if (b.length <= 65) {
      const where = L === 0 ? "at the embeddings" : `after block ${b[L]}`;
      g.appendChild(
        s("circle", { class: "iglens-lesson-dot", cx: x(b[L]), cy: y(100 * v), r: 2.2 }, s("title", {}, `${c.name} ${where}: ${fmtPercentPlain(v)}`)),
      );
    }
  }
  const values = Array.from(c.probs, (v) => String(v)).join(" ");
  g.insertBefore(
    s("polyline", { class: "iglens-lesson-line", "data-series": c.key, "data-values": values, points: pts.join(" "), fill: "none" }),
    g.firstChild,
  );
  return g;
}

/**
 * The curve of `series` over the result's boundaries, with the cursor at boundary `cursor`.
 * @param {{r: import("../../model/result.js").Result, series: CurveSeries[], W: number, H?: number, cursor: number, label: string}} o
 * @returns {{svg: SVGElement, setCursor: (L: number) => void}}
 */
export function lessonCurve(o) {
  const { r, series, W, label } = o;
  const H = o.H ?? 200;
  const b = r.boundaries;
  const svg = s("svg", { class: "iglens-chart iglens-lesson-curve", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
  const x = linearScale([b[0] - 0.6, b[r.k] + 0.6], [M.left, W - M.right]);
  const y = linearScale([0, 100], [H - M.bottom, M.top]);
  drawFrame(svg, b, W, H, x, y);
  const cursorLine = s("line", { class: "iglens-lesson-cursor", y1: M.top - 4, y2: H - M.bottom });
  svg.appendChild(cursorLine);
  const rings = series.map((c, q) =>
    s("circle", { class: `iglens-lesson-ring iglens-lesson-${c.key}${q ? "" : " iglens-lesson-subject"}`, "data-series": c.key, r: 5 }),
  );
  series.forEach((c, q) => svg.appendChild(seriesGroup(c, b, x, y, q === 0)));
  for (const ring of rings) svg.appendChild(ring);

  /** @param {number} L */
  function setCursor(L) {
    const cx = x(b[L]);
    svg.setAttribute("data-cursor", String(L));
    cursorLine.setAttribute("x1", String(cx));
    cursorLine.setAttribute("x2", String(cx));
    series.forEach((c, q) => {
      const v = c.probs[L];
      rings[q].setAttribute("cx", String(cx));
      rings[q].setAttribute("cy", String(y(Number.isFinite(v) ? 100 * v : 0)));
    });
  }
  setCursor(o.cursor);
  return { svg, setCursor };
}

/** The narrowest curve drawn (its axes and labels need this much). */
export const MIN_CURVE_WIDTH = 200;

/**
 * The curve in a figure of the student view, drawn at the figure's width — and drawn again
 * whenever that width changes: a resize of the window or the notebook's panel, a theme switch
 * or presentation mode that lays the page out again, a view built while it was hidden (its
 * width then unknown). The walk's cursor stays where it is.
 * @param {Omit<Parameters<typeof lessonCurve>[0], "W" | "cursor"> & {cursor: () => number}} o
 * @returns {{el: HTMLElement, svg: () => SVGElement, setCursor: (L: number) => void, fit: () => void, destroy: () => void}}
 */
export function fittedCurve(o) {
  const el = h("figure", { class: "iglens-figure iglens-lesson-figure" });
  let W = 0;
  let curve = /** @type {ReturnType<typeof lessonCurve>|null} */ (null);
  /** Draw at the figure's width now (560 px while it is not laid out), unless drawn at it already. */
  function fit() {
    const inner = el.clientWidth;
    const next = Math.max(MIN_CURVE_WIDTH, Math.floor(inner || 564) - 4);
    if (curve && (next === W || !inner)) return;
    W = next;
    curve = lessonCurve({ ...o, W, cursor: o.cursor() });
    el.replaceChildren(curve.svg);
  }
  fit();
  const stop = onResize(el, fit);
  return {
    el,
    svg: () => /** @type {SVGElement} */ (curve?.svg),
    setCursor: (L) => curve?.setCursor(L),
    fit,
    destroy: stop,
  };
}
