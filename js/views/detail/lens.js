/**
 * Chart (c) of the detail panel: the lens's (the logit lens's, or the fitted one's) top-1 token after each boundary and its
 * probability, labelled where the top-1 changes (labels that would collide are counted in
 * the legend), next to the target's value.
 * @module views/detail/lens
 */
import { s } from "../../lib/dom.js";
import { formatToken, quoteToken } from "../../lib/tokens.js";
import { linearScale, clamp } from "../../lib/layout.js";
import { formatTick } from "../../lib/colorscale.js";
import { topAt, depthText } from "../../model/result.js";
import { fmtProb } from "../../lib/format.js";
import { chartLegend } from "./space.js";
import { lensPhrase } from "../../model/lens-name.js";

/**
 * @param {import("../../model/result.js").Result} r @param {number} i @param {import("./space.js").ChartSpace} S
 * @returns {import("./space.js").ChartFrame|null} null without top tokens
 */
export function lensChart(r, i, S) {
  const { W, M, present, b, k, lens, x, frame, shade, yTitle, xAxis } = S;
  const Hc = 162 + (present ? 16 : 0);
  const cBottom = Hc - 32 - (present ? 8 : 0);
  let C = null;
  if (r.K > 0) {
    const name = lensPhrase(r.lens); // "logit lens", or the fitted lens the result was read through
    C = frame(Hc, `${name} top-1`, `(c) ${name}: the lens's top-1 token after block L and its probability`);
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
  }
  return C;
}
