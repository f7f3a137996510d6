/**
 * The contribution bitmap: one pixel per cell (rows: positions, columns: segments), coloured
 * on a diverging scale, NaN in the palette's grey. The heatmap scales it up without
 * smoothing (and squeezes it into its overview), the compare view draws one per result.
 * `paintContributions` writes into any RGBA buffer (testable without a DOM);
 * `contributionBitmap` wraps it in an offscreen canvas.
 * @module paint/bitmap
 */
import { context2d } from "../lib/dom.js";

/**
 * @typedef {object} Cells what the painter reads of a result
 * @property {number} T rows @property {number} k columns
 * @property {ArrayLike<number>} contributions T·k, row-major
 */

/**
 * Each row's largest finite |contribution| (1 where a row has none): the per-row colour limit.
 * @param {Cells} r @returns {Float64Array}
 */
export function rowLimits(r) {
  const out = new Float64Array(r.T);
  for (let i = 0; i < r.T; i++) {
    let m = 0;
    for (let j = 0; j < r.k; j++) {
      const v = r.contributions[i * r.k + j];
      if (Number.isFinite(v) && Math.abs(v) > m) m = Math.abs(v);
    }
    out[i] = m > 0 ? m : 1;
  }
  return out;
}

/**
 * Write the cells as RGBA pixels (opaque) into `px` (T·k·4 bytes, e.g. an ImageData's data).
 * @param {Uint8ClampedArray|number[]} px
 * @param {Cells} r
 * @param {import("../lib/colorscale.js").Scale} scale
 * @param {import("../lib/colorscale.js").RGB} nan the colour of a NaN cell
 * @param {ArrayLike<number>|null} [rowDiv] divide row i by rowDiv[i] first (per-row scale)
 */
export function paintContributions(px, r, scale, nan, rowDiv = null) {
  const lut = scale.lut;
  for (let i = 0; i < r.T; i++) {
    const div = rowDiv ? rowDiv[i] : 1;
    for (let j = 0; j < r.k; j++) {
      const o = (i * r.k + j) * 4;
      const q = scale.index(r.contributions[i * r.k + j] / div);
      if (q < 0) {
        px[o] = nan[0];
        px[o + 1] = nan[1];
        px[o + 2] = nan[2];
      } else {
        px[o] = lut[q * 3];
        px[o + 1] = lut[q * 3 + 1];
        px[o + 2] = lut[q * 3 + 2];
      }
      px[o + 3] = 255;
    }
  }
}

/**
 * The bitmap as an offscreen canvas (k × T pixels), or null where canvases cannot draw.
 * @param {Cells} r @param {import("../lib/colorscale.js").Scale} scale
 * @param {import("../lib/colorscale.js").RGB} nan @param {ArrayLike<number>|null} [rowDiv]
 * @returns {HTMLCanvasElement|null}
 */
export function contributionBitmap(r, scale, nan, rowDiv = null) {
  const c = document.createElement("canvas");
  c.width = Math.max(1, r.k);
  c.height = Math.max(1, r.T);
  const cx = context2d(c);
  if (!cx) return null;
  const img = cx.createImageData(c.width, c.height);
  paintContributions(img.data, r, scale, nan, rowDiv);
  cx.putImageData(img, 0, 0);
  return c;
}
