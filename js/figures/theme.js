/**
 * The colours of an exported figure, per theme (the NaN grey from the palette, defined once).
 * @module figures/theme
 */
import { NAN_COLOR } from "../lib/palette.js";

/**
 * @typedef {object} Theme colours of an exported figure
 * @property {string} bg @property {string} fg @property {string} muted @property {string} grid
 * @property {string} accent @property {string} answer @property {string} nan
 */

/** @param {"light"|"dark"} theme @returns {Theme} */
export function figureTheme(theme) {
  return theme === "dark"
    ? { bg: "#0f1419", fg: "#e6edf3", muted: "#9aa4af", grid: "#30363d", accent: "#4493f8", answer: "#b692f6", nan: NAN_COLOR.dark }
    : { bg: "#ffffff", fg: "#1f2328", muted: "#5b6470", grid: "#d5dbe1", accent: "#0969da", answer: "#8250df", nan: NAN_COLOR.light };
}
