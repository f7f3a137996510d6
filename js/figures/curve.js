/**
 * The detail panel's cumulative curve of one position as a slide (PNG / SVG).
 * @module figures/curve
 */
import { formatToken } from "../lib/tokens.js";
import { idText } from "../model/result.js";
import { figureTheme } from "./theme.js";
import { slideTitleLines, drawTitle } from "./titles.js";
import { drawPercentCurves, percentTop } from "./percent-curves.js";
/** @typedef {import("./painters.js").Painter} Painter */

/** The detail curve's subject: "p(target) of ␣Ho at [41] ␣is". @param {import("../model/result.js").Result} r @param {number} i */
export function curveSubject(r, i) {
  const tgt = formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 40 });
  return `${r.targetName} of ${tgt} at [${i}] ${formatToken(r.tokens[i], { maxLen: 40 })}`;
}

/**
 * The detail panel's cumulative curve of position i as a slide: the title (prompt, token and
 * target, lens) and the lens probability of the target after each block, in percent (the
 * detail panel's chart (b)). Token text as text only.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("../model/result.js").Result} r @param {number} i @param {{theme: "light"|"dark"}} o
 */
export function curveFigure(make, r, i, o) {
  const th = figureTheme(o.theme);
  const lines = slideTitleLines(r, "curve", curveSubject(r, i));
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const W = 960,
    chartH = 340;
  const H = titleH + chartH + 60;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const probs = Array.from({ length: r.k + 1 }, (_, L) => r.lensProbs[i * (r.k + 1) + L]);
  drawPercentCurves(p, r, [{ key: "curve", probs }], { x0: 64, top: titleH + 10, w: W - 64 - 24, h: chartH - 10, yMax: percentTop(probs), theme: o.theme });
  return p;
}
