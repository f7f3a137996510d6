/**
 * Colour scales: colour-blind-safe, theme-aware, fast (257-entry lookup tables).
 *
 * - diverging (signed contributions, Δp): ColorBrewer RdBu reversed (blue < 0 < red), the
 *   same map the static matplotlib views use (`RdBu_r`), always centred at 0 with symmetric
 *   limits. On a dark theme the centre is a dark neutral and lightness grows with |value|,
 *   so large values stay the most salient on either background.
 * - sequential (p_final): ColorBrewer Purples, from the background to saturated.
 * - ordinal (onset block): viridis, early → late.
 * Interpolation runs in CIE Lab, so steps look even.
 * @module colorscale
 */

/** @typedef {[number, number, number]} RGB */
/** @typedef {"light"|"dark"} Theme */

/** @param {string} hex "#rrggbb" @returns {RGB} */
export function hexToRgb(hex) {
  const h = hex.replace("#", "");
  const full =
    h.length === 3
      ? h
          .split("")
          .map((c) => c + c)
          .join("")
      : h;
  const n = parseInt(full.slice(0, 6), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/** @param {RGB} rgb */
export function rgbToHex([r, g, b]) {
  return (
    "#" +
    [r, g, b]
      .map((x) =>
        Math.round(Math.max(0, Math.min(255, x)))
          .toString(16)
          .padStart(2, "0"),
      )
      .join("")
  );
}

/** @param {number} c 0..255 */
const toLinear = (c) => {
  const s = c / 255;
  return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
};
/** @param {number} l 0..1 */
const toSrgb = (l) => 255 * (l <= 0.0031308 ? 12.92 * l : 1.055 * l ** (1 / 2.4) - 0.055);

/** sRGB → CIE Lab (D65). @param {RGB} rgb @returns {RGB} */
export function rgbToLab([r, g, b]) {
  const R = toLinear(r),
    G = toLinear(g),
    B = toLinear(b);
  const f = (/** @type {number} */ t) => (t > 216 / 24389 ? Math.cbrt(t) : ((24389 / 27) * t + 16) / 116);
  const x = f((0.4124 * R + 0.3576 * G + 0.1805 * B) / 0.95047);
  const y = f(0.2126 * R + 0.7152 * G + 0.0722 * B);
  const z = f((0.0193 * R + 0.1192 * G + 0.9505 * B) / 1.08883);
  return [116 * y - 16, 500 * (x - y), 200 * (y - z)];
}

/** CIE Lab → sRGB (clamped). @param {RGB} lab @returns {RGB} */
export function labToRgb([L, a, bb]) {
  const fy = (L + 16) / 116,
    fx = fy + a / 500,
    fz = fy - bb / 200;
  const inv = (/** @type {number} */ t) => (t ** 3 > 216 / 24389 ? t ** 3 : (116 * t - 16) / (24389 / 27));
  const X = inv(fx) * 0.95047,
    Y = inv(fy),
    Z = inv(fz) * 1.08883;
  const R = 3.2406 * X - 1.5372 * Y - 0.4986 * Z;
  const G = -0.9689 * X + 1.8758 * Y + 0.0415 * Z;
  const B = 0.0557 * X - 0.204 * Y + 1.057 * Z;
  return /** @type {RGB} */ ([R, G, B].map((c) => Math.max(0, Math.min(255, toSrgb(Math.max(0, Math.min(1, c)))))));
}

/** Relative luminance (WCAG). @param {RGB} rgb */
export function luminance([r, g, b]) {
  return 0.2126 * toLinear(r) + 0.7152 * toLinear(g) + 0.0722 * toLinear(b);
}

/** Readable text colour on a background (LIT switches text colour for contrast). @param {RGB} bg */
export function textColorFor(bg) {
  const L = luminance(bg);
  // contrast with black = (L+.05)/.05, with white = 1.05/(L+.05)
  return (L + 0.05) / 0.05 >= 1.05 / (L + 0.05) ? "#111111" : "#ffffff";
}

/**
 * A piecewise-Lab ramp through `stops` ([t, "#hex"], t ascending over [0, 1]) as a LUT.
 * @param {Array<[number, string]>} stops
 * @param {number} [n]
 */
export function ramp(stops, n = 257) {
  const labs = stops.map(([t, hex]) => /** @type {[number, RGB]} */ ([t, rgbToLab(hexToRgb(hex))]));
  const lut = new Uint8ClampedArray(n * 3);
  for (let q = 0; q < n; q++) {
    const t = n === 1 ? 0 : q / (n - 1);
    let s = 0;
    while (s < labs.length - 2 && t > labs[s + 1][0]) s++;
    const [t0, a] = labs[s];
    const [t1, b] = labs[s + 1];
    const u = t1 > t0 ? Math.max(0, Math.min(1, (t - t0) / (t1 - t0))) : 0;
    const rgb = labToRgb([a[0] + u * (b[0] - a[0]), a[1] + u * (b[1] - a[1]), a[2] + u * (b[2] - a[2])]);
    lut[q * 3] = rgb[0];
    lut[q * 3 + 1] = rgb[1];
    lut[q * 3 + 2] = rgb[2];
  }
  return lut;
}

/** ColorBrewer RdBu (11 classes), blue → red (i.e. RdBu reversed, negative → positive). */
export const RDBU_R = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"];
/** Bar colours shared with the static views (the RdBu ends). */
export const POSITIVE = "#b2182b";
export const NEGATIVE = "#2166ac";
export const POSITIVE_DARK = "#ef8a62";
export const NEGATIVE_DARK = "#67a9cf";
/** The causal check's drop bars (neutral charcoal, distinct from the red/blue of the
 * contributions and the orange of the non-monotone marks). */
export const ABLATION = "#4b4f56";
export const ABLATION_DARK = "#c9d1d9";
/** Non-monotone accent (orange, distinct from the red/blue of the signs). */
export const NONMONOTONE = "#f1a340";
/** ColorBrewer Purples (9). */
export const PURPLES = ["#fcfbfd", "#efedf5", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#54278f", "#3f007d"];
/** viridis, 10 samples. */
export const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];

/** @param {string[]} hexes evenly spaced */
const even = (hexes) => hexes.map((h, q) => /** @type {[number, string]} */ ([q / (hexes.length - 1), h]));

const DIVERGING_STOPS = {
  light: even(RDBU_R),
  // Dark: a dark neutral at 0; lightness rises with |t| on both sides.
  dark: /** @type {Array<[number, string]>} */ ([
    [0, "#a6d3f0"],
    [0.12, "#5aa2d6"],
    [0.3, "#2c6fb0"],
    [0.5, "#2e3338"],
    [0.7, "#a8323e"],
    [0.88, "#e0705c"],
    [1, "#fdc2a4"],
  ]),
};
const SEQUENTIAL_STOPS = {
  light: even(PURPLES),
  dark: /** @type {Array<[number, string]>} */ ([
    [0, "#2e3035"],
    [0.35, "#4f3b8f"],
    [0.7, "#8f86c8"],
    [1, "#e2dff5"],
  ]),
};

/** @type {Map<string, Uint8ClampedArray>} */
const cache = new Map();
/** @param {string} key @param {() => Uint8ClampedArray} make */
function cached(key, make) {
  let lut = cache.get(key);
  if (!lut) {
    lut = make();
    cache.set(key, lut);
  }
  return lut;
}

/**
 * @typedef {object} Scale
 * @property {Uint8ClampedArray} lut 257·3 bytes (odd, so 0 sits exactly on the middle entry)
 * @property {number} lo value at the first LUT entry
 * @property {number} hi value at the last LUT entry
 * @property {(v: number) => number} index LUT index of a value (-1 for NaN)
 * @property {(v: number) => RGB|null} rgb
 * @property {(v: number) => string} css "#rrggbb" ("" for NaN)
 * @property {"diverging"|"sequential"|"ordinal"} kind
 */

/**
 * @param {Uint8ClampedArray} lut @param {number} lo @param {number} hi
 * @param {"diverging"|"sequential"|"ordinal"} kind
 * @returns {Scale}
 */
function makeScale(lut, lo, hi, kind) {
  const n = lut.length / 3;
  const span = hi - lo || 1;
  /** @param {number} v */
  const index = (v) => {
    if (!Number.isFinite(v)) return -1;
    const t = (v - lo) / span;
    return Math.max(0, Math.min(n - 1, Math.round(t * (n - 1))));
  };
  return {
    lut,
    lo,
    hi,
    kind,
    index,
    rgb: (v) => {
      const q = index(v);
      return q < 0 ? null : [lut[q * 3], lut[q * 3 + 1], lut[q * 3 + 2]];
    },
    css: (v) => {
      const q = index(v);
      return q < 0 ? "" : rgbToHex([lut[q * 3], lut[q * 3 + 1], lut[q * 3 + 2]]);
    },
  };
}

/**
 * Diverging scale centred at 0 with symmetric limits [-vmax, vmax].
 * @param {number} vmax > 0 (non-positive or NaN → 1)
 * @param {Theme} [theme]
 */
export function divergingScale(vmax, theme = "light") {
  const v = Number.isFinite(vmax) && vmax > 0 ? vmax : 1;
  return makeScale(
    cached(`div-${theme}`, () => ramp(DIVERGING_STOPS[theme])),
    -v,
    v,
    "diverging",
  );
}

/**
 * Sequential scale on [lo, hi] (default [0, 1], a probability).
 * @param {Theme} [theme] @param {number} [lo] @param {number} [hi]
 */
export function sequentialScale(theme = "light", lo = 0, hi = 1) {
  return makeScale(
    cached(`seq-${theme}`, () => ramp(SEQUENTIAL_STOPS[theme])),
    lo,
    hi,
    "sequential",
  );
}

/**
 * Ordinal scale for n ordered categories (onset segment 0..n-1), viridis.
 * @param {number} n
 */
export function ordinalScale(n) {
  const lut = cached("viridis", () => ramp(even(VIRIDIS)));
  return makeScale(lut, 0, Math.max(1, n - 1), "ordinal");
}

/**
 * "Nice" tick values covering [lo, hi] (about `count` of them), 1-2-5 steps; includes 0
 * whenever the range spans it.
 * @param {number} lo @param {number} hi @param {number} [count]
 * @returns {{ticks: number[], step: number}}
 */
export function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo) || !Number.isFinite(lo) || !Number.isFinite(hi)) return { ticks: [lo], step: 1 };
  const raw = (hi - lo) / Math.max(1, count);
  const e = Math.floor(Math.log10(raw));
  const f = raw / 10 ** e;
  let step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * 10 ** e;
  const make = () => {
    const out = [];
    const first = Math.ceil(lo / step - 1e-9);
    const last = Math.floor(hi / step + 1e-9);
    for (let q = first; q <= last; q++) out.push(Number((q * step).toPrecision(12)));
    return out;
  };
  let ticks = make();
  // never fewer than three ticks (a bar with only "0" says nothing): shrink 5 → 2 → 1
  for (let guard = 0; ticks.length < 3 && guard < 6; guard++) {
    const m = Number((step / 10 ** Math.floor(Math.log10(step))).toPrecision(3));
    step = Number((step * (m === 5 ? 0.4 : 0.5)).toPrecision(12));
    ticks = make();
  }
  return { ticks, step };
}

/**
 * Tick label: enough decimals for the step, U+2212 minus sign.
 * @param {number} v @param {number} step
 */
export function formatTick(v, step) {
  if (v === 0) return "0";
  const abs = Math.abs(step);
  const a = Math.abs(v);
  const s =
    abs < 1e-3 || a >= 1e5 ? a.toExponential(Math.max(0, Math.round(Math.log10(a / abs)))) : a.toFixed(Math.max(0, -Math.floor(Math.log10(abs) + 1e-9)));
  return (v < 0 ? "\u2212" : "") + s;
}

/**
 * Legend ticks of a scale: positions along it in [0, 1] and labels.
 * @param {Scale} scale @param {number} [count]
 */
export function legendTicks(scale, count = 4) {
  const { ticks, step } = niceTicks(scale.lo, scale.hi, count);
  const span = scale.hi - scale.lo || 1;
  return ticks.map((v) => ({ value: v, t: (v - scale.lo) / span, label: formatTick(v, step) }));
}

/**
 * A CSS linear-gradient of a scale (for legend bars).
 * @param {Scale} scale @param {string} [direction]
 */
export function cssGradient(scale, direction = "to right") {
  const n = scale.lut.length / 3;
  const stops = [];
  for (let s = 0; s <= 10; s++) {
    const q = Math.round((s / 10) * (n - 1));
    stops.push(`${rgbToHex([scale.lut[q * 3], scale.lut[q * 3 + 1], scale.lut[q * 3 + 2]])} ${s * 10}%`);
  }
  return `linear-gradient(${direction}, ${stops.join(", ")})`;
}

/**
 * Parse a computed CSS colour ("rgb(…)", "rgba(…)", "#hex") to RGB + alpha.
 * @param {string} css
 * @returns {{rgb: RGB, alpha: number}|null}
 */
export function parseCssColor(css) {
  const s = (css || "").trim();
  let m = s.match(/^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/i);
  if (m) {
    let a = m[4] === undefined ? 1 : parseFloat(m[4]);
    if (m[4] && m[4].endsWith("%")) a /= 100;
    return { rgb: [Number(m[1]), Number(m[2]), Number(m[3])], alpha: a };
  }
  m = s.match(/^#([0-9a-f]{3}|[0-9a-f]{6})$/i);
  if (m) return { rgb: hexToRgb(s), alpha: 1 };
  return null;
}

const OPPOSITION_STOPS = {
  light: /** @type {Array<[number, string]>} */ ([
    [0, "#f7f7f7"],
    [0.35, "#fdd49e"],
    [0.7, "#f1a340"],
    [1, "#b35806"],
  ]),
  dark: /** @type {Array<[number, string]>} */ ([
    [0, "#2e3338"],
    [0.35, "#7f4a12"],
    [0.7, "#d9822b"],
    [1, "#fdc98a"],
  ]),
};

/**
 * Sequential orange scale on [0, 1] for the "non-monotone" colouring: the share of a token's
 * largest |contribution| that moves against Δp (0 = monotone, neutral).
 * @param {Theme} [theme]
 */
export function oppositionScale(theme = "light") {
  return makeScale(
    cached(`opp-${theme}`, () => ramp(OPPOSITION_STOPS[theme])),
    0,
    1,
    "sequential",
  );
}
