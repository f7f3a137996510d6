/**
 * The colour legend of a figure: a horizontal bar of the scale, its title and ticks.
 * @module figures/legend
 */
import { rgbToHex, legendTicks } from "../lib/colorscale.js";

/**
 * A horizontal colour legend.
 * @param {import("./painters.js").Painter} p @param {import("../lib/colorscale.js").Scale} scale @param {string} title
 * @param {number} x @param {number} y @param {number} w @param {import("./theme.js").Theme} th
 */
export function drawLegendBar(p, scale, title, x, y, w, th) {
  p.text(x, y, title, { size: 11.5, fill: th.muted });
  const n = 48;
  const n3 = scale.lut.length / 3;
  for (let q = 0; q < n; q++) {
    const idx = Math.round((q / (n - 1)) * (n3 - 1));
    p.rect(x + (q * w) / n, y + 10, w / n + 0.5, 10, rgbToHex([scale.lut[idx * 3], scale.lut[idx * 3 + 1], scale.lut[idx * 3 + 2]]));
  }
  for (const t of legendTicks(scale, 3)) {
    p.line(x + t.t * w, y + 20, x + t.t * w, y + 24, th.muted, 1);
    p.text(x + t.t * w, y + 31, t.label, { size: 10.5, anchor: "middle", fill: th.muted });
  }
}
