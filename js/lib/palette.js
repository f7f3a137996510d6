/**
 * The colours the canvas views draw with, read once per theme from the widget's CSS custom
 * properties (`--iglens-*`, which follow the host's theme), with one fallback per theme; the
 * grey of a missing value (NaN) is defined here only.
 * @module palette
 */
import { hexToRgb } from "./colorscale.js";

/** The grey of a missing value (NaN, no target) in every view and exported figure. */
export const NAN_COLOR = { light: "#dcdcdc", dark: "#3a3f45" };

/** @param {"light"|"dark"} theme */
export const nanColor = (theme) => (theme === "dark" ? NAN_COLOR.dark : NAN_COLOR.light);

/** @param {"light"|"dark"} theme @returns {import("./colorscale.js").RGB} */
export const nanRgb = (theme) => hexToRgb(nanColor(theme));

/**
 * @typedef {object} Palette
 * @property {string} fg @property {string} muted @property {string} bg
 * @property {string} grid tile gaps (the background) @property {string} line hairlines
 * @property {string} accent @property {string} answer @property {string} nan
 * @property {string} font the widget's font family
 */

/** The fallback palette of a theme (what the CSS defines by default). @param {"light"|"dark"} theme @returns {Palette} */
export function defaultPalette(theme) {
  const dark = theme === "dark";
  const bg = dark ? "#0d1117" : "#ffffff";
  return {
    fg: dark ? "#e6edf3" : "#1f2328",
    muted: dark ? "#9198a1" : "#656d76",
    bg,
    grid: bg,
    line: dark ? "#30363d" : "#d0d7de",
    accent: dark ? "#4493f8" : "#0969da",
    answer: dark ? "#b692f6" : "#8250df",
    nan: nanColor(theme),
    font: "system-ui, sans-serif",
  };
}

/**
 * The palette in use under `root` (its computed custom properties, else the theme's defaults).
 * @param {Element} root @param {"light"|"dark"} theme @returns {Palette}
 */
export function readPalette(root, theme) {
  const cs = getComputedStyle(root);
  const fb = defaultPalette(theme);
  const v = (/** @type {string} */ name, /** @type {string} */ fallback) => cs.getPropertyValue(name).trim() || fallback;
  const bg = v("--iglens-bg", fb.bg);
  return {
    fg: v("--iglens-fg", fb.fg),
    muted: v("--iglens-fg-muted", fb.muted),
    bg,
    grid: bg,
    line: fb.line,
    accent: v("--iglens-accent", fb.accent),
    answer: v("--iglens-answer", fb.answer),
    nan: fb.nan,
    font: cs.fontFamily || fb.font,
  };
}
