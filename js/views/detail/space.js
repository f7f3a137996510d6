/**
 * The coordinate space shared by the detail panel's three charts for one position and one
 * width: margins (local to this render: a presentation-mode panel and a plain one on the
 * same page each get their own), the x scale over depth, the position's series, and the
 * helpers every chart draws with (frame, shading of flagged segments, axes).
 * @module views/detail/space
 */
import { h, s, uniqueId } from "../../lib/dom.js";
import { linearScale, clamp } from "../../lib/layout.js";
import { niceTicks, formatTick, POSITIVE, NEGATIVE, POSITIVE_DARK, NEGATIVE_DARK, NONMONOTONE } from "../../lib/colorscale.js";
import { againstSegments, againstSteps, flagged } from "../../lib/nonmonotone.js";
import { contributionRow, lensRow, pathRow } from "../../model/result.js";
import { readPathTrait } from "../../model/path.js";

/** Height of the x tick-label band under each chart. */
const XLABELS = 15;

/**
 * @param {import("../context.js").Context} ctx
 * @param {import("../../model/result.js").Result} r @param {number} i @param {number} W
 */
export function chartSpace(ctx, r, i, W) {
  const present = ctx.root.classList.contains("iglens-present");
  const M = present ? { left: 70, right: 16, top: 10, bottom: 6 } : { left: 58, right: 14, top: 8, bottom: 6 };
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
  return {
    W,
    M,
    XL,
    present,
    dark,
    pos,
    neg,
    b,
    k,
    c,
    lens,
    lazyTrait,
    lazy,
    path,
    m,
    segFlags,
    stepFlags,
    x,
    hatch,
    frame,
    shade,
    yAxis,
    yTitle,
    xTicks,
    xAxis,
  };
}

/** @typedef {ReturnType<typeof chartSpace>} ChartSpace */
/** @typedef {ReturnType<ChartSpace["frame"]>} ChartFrame */

/**
 * A chart's legend: one key per series (a CSS class draws its swatch), and — for the
 * logit-lens labels — how many labels were left out to avoid collisions.
 * @param {Array<[string, string]>} items [swatch class, text]
 * @param {number} [labels] labels wanted (top-1 changes)
 * @param {number} [hidden] labels left out
 */
export function chartLegend(items, labels = 0, hidden = 0) {
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
