/**
 * Number formatting shared by the views.
 * @module format
 */

const MINUS = "\u2212";

/**
 * Python's `format(v, ".{d}e")`: mantissa with d decimals, exponent with a sign and at
 * least two digits ("3.0e-08").
 * @param {number} v @param {number} [digits]
 */
export function pyExp(v, digits = 1) {
  if (!Number.isFinite(v)) return String(v);
  const [mant, exp] = v.toExponential(digits).split("e");
  const e = Number(exp);
  return `${mant}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
}

/**
 * Python's `format(v, "+.{d}f")`.
 * @param {number} v @param {number} [digits]
 */
export function pySigned(v, digits = 4) {
  if (!Number.isFinite(v)) return String(v);
  return (v < 0 || Object.is(v, -0) ? "-" : "+") + Math.abs(v).toFixed(digits);
}

/**
 * A signed value for display: 4 decimals, or 2 significant digits in exponent form when
 * tiny; typographic minus. NaN → "–".
 * @param {number} v
 */
export function fmtSigned(v) {
  if (!Number.isFinite(v)) return "\u2013";
  if (v === 0) return "0";
  const a = Math.abs(v);
  const body = a >= 1e-3 ? a.toFixed(4) : a.toExponential(1);
  return (v < 0 ? MINUS : "+") + body;
}

/**
 * A probability (or lens value) for a person to read: 3 decimals; below 0.001 (a block-0
 * probability such as 3.7e-33) "< 0.001" (or "> −0.001" for a tiny negative difference).
 * @param {number} p
 */
export function fmtProb(p) {
  if (!Number.isFinite(p)) return "\u2013";
  if (p === 0) return "0";
  const a = Math.abs(p);
  if (a < 1e-3) return p < 0 ? `> ${MINUS}0.001` : "< 0.001";
  return (p < 0 ? MINUS : "") + a.toFixed(3);
}

/**
 * The completeness line: "Σ contributions = x, Δp = y, |error| = z".
 * @param {number} sum @param {number} deltaP
 */
export function completenessText(sum, deltaP) {
  return `\u03a3 contributions = ${pySigned(sum, 4)}, \u0394p = ${pySigned(deltaP, 4)}, |error| = ${pyExp(Math.abs(sum - deltaP), 1)}`;
}

/**
 * A probability in percent: 2 decimals ("12.34%"), or Python's ".1e" below 0.01% (a joint
 * probability of several tokens is often tiny: "8.3e-05%"). NaN → "–".
 * @param {number} p a probability, 0 … 1
 */
export function fmtPercent(p) {
  if (!Number.isFinite(p)) return "\u2013";
  const v = 100 * Math.abs(p);
  if (v === 0) return "0%";
  return (p < 0 ? MINUS : "") + (v >= 0.01 ? v.toFixed(2) : pyExp(v, 1)) + "%";
}

/**
 * A log-probability (or any signed sum of them) with 4 decimals and a typographic minus:
 * "−12.6838", "+3.9509". NaN → "–".
 * @param {number} v
 */
export function fmtLog(v) {
  if (!Number.isFinite(v)) return "\u2013";
  return (v < 0 ? MINUS : "+") + Math.abs(v).toFixed(4);
}

/**
 * A probability in percent for a student: whole percent from 10% ("45%"), one decimal below
 * ("9.4%"), "<0.1%" below 0.1% (never 3.7e-33), one decimal near certainty ("99.7%",
 * ">99.9%"; "100%" only for 1). NaN → "–".
 * @param {number} p a probability, 0 … 1
 */
export function fmtPercentPlain(p) {
  if (!Number.isFinite(p)) return "\u2013";
  if (p === 0) return "0%";
  const sign = p < 0 ? MINUS : "";
  const a = Math.abs(p);
  const v = 100 * a;
  if (v < 0.1) return `${sign}<0.1%`;
  if (v < 9.95) return `${sign}${v.toFixed(1)}%`;
  if (v < 99.5) return `${sign}${Math.round(v)}%`;
  if (a >= 1) return `${sign}100%`;
  return v >= 99.95 ? `${sign}>99.9%` : `${sign}${v.toFixed(1)}%`;
}
