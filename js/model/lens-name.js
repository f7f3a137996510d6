/**
 * The lens a result's states were read through, in words (`result.lens`: "logit", the raw
 * logit lens, or a fitted lens's name: "shortcut", "tuned", "jacobian", a saved lens's name).
 * The name is untrusted text: every label here goes through `formatToken` (control and bidi
 * characters as visible escapes) and the views insert it as text only. Pure: no DOM.
 * @module lens-name
 */
import { formatToken } from "../lib/tokens.js";
import { FITTED_KINDS, LENS_KINDS, LENS_LABELS } from "./protocol.js";

/** The raw logit lens: the model's own final norm and head, on the states as they are. */
export const LOGIT = LENS_KINDS[0];

/**
 * The lenses the controls offer: [value sent in `controls.lens`, label] (Python's lens kinds
 * and labels, iglens_viz.core.coordinates).
 * @type {ReadonlyArray<readonly [import("./protocol.js").LensKind, string]>}
 */
export const LENS_OPTIONS = LENS_KINDS.map((kind) => /** @type {const} */ ([kind, LENS_LABELS[kind]]));

/** The lens select's tooltip: what a fitted lens is and what its first use costs. */
export const LENS_TIP =
  "The coordinates every state is read in. logit lens: the model's own final norm and head on each state as it is. " +
  "A fitted lens (linear shortcut, tuned lens, Jacobian lens) first maps the state at each depth towards the last block's; " +
  "it is fitted once on text the model itself samples, then cached, so its first use takes a while";

/** True for the raw logit lens ("logit", or no name: a payload from before lenses). @param {string|null|undefined} name */
export const isLogitLens = (name) => !name || name === LOGIT;

/** The lens's name as shown (formatted: no raw control or bidi character). @param {string} name */
export const lensLabel = (name) => formatToken(isLogitLens(name) ? LOGIT : name, { maxLen: 40 });

/**
 * The lens in a phrase, as the Python plots name it: "logit lens", "shortcut lens", "tuned
 * lens", "jacobian lens", "<saved name> lens".
 * @param {string} name
 */
export const lensPhrase = (name) => `${lensLabel(name)} lens`;

/** The phrase with a capital first letter, for the start of a title. @param {string} name */
export function lensTitle(name) {
  const p = lensPhrase(name);
  return p.charAt(0).toUpperCase() + p.slice(1);
}

/**
 * The fact the header and the exported titles add under a fitted lens (`lens: shortcut`);
 * null under the logit lens (the default says nothing).
 * @param {string} name
 */
export const lensFact = (name) => (isLogitLens(name) ? null : `lens: ${lensLabel(name)}`);

/** The lens grid's name: "logit-lens grid", "shortcut-lens grid" … @param {string} name */
export const lensGridName = (name) => `${lensLabel(name)}-lens grid`;

/** The lenses fitted on their first use (the rest of LENS_OPTIONS needs no fit; iglens_viz.lenses.FITTED_KINDS). */
export const FITTED_LENSES = FITTED_KINDS;

/**
 * The controls' note before Apply when the lens chosen is a fitted one that is not cached for
 * this model (Python's `cached_lenses`) and not the shown result's: its first fit takes
 * minutes. null otherwise.
 * @param {string} choice the lens select's value
 * @param {string} shown the shown result's lens (`controls.lens || lens`)
 * @param {unknown} cached the `cached_lenses` trait
 */
export function firstFitNote(choice, shown, cached) {
  const fitted = /** @type {readonly string[]} */ (FITTED_LENSES);
  if (!fitted.includes(choice) || choice === shown) return null;
  if (Array.isArray(cached) && cached.includes(choice)) return null;
  return (
    `The ${lensLabel(choice)} lens is not fitted for this model yet: Apply fits it first, which takes minutes on a CPU ` +
    "(then it is cached). Cancel stops the fit; a tuned or Jacobian fit resumes where it stopped."
  );
}

const FIT_PHASES = /** @type {Record<string, string>} */ ({
  corpus: "sampling its corpus",
  states: "reading the corpus's states",
  fit: "fitting",
});

/** Seconds as "40 s", "3 min", "1.2 h". @param {number} s */
const duration = (s) => (s < 90 ? `${Math.max(1, Math.round(s))} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

/**
 * The status line of a lens fit in progress (Python's `running.fit`): "Fitting the tuned
 * lens: fitting 20/250 steps · about 3 min left". null for no fit.
 * @param {unknown} fit
 */
export function fitStatus(fit) {
  if (!fit || typeof fit !== "object") return null;
  const f = /** @type {{kind?: unknown, phase?: unknown, done?: unknown, total?: unknown, unit?: unknown, remaining_s?: unknown}} */ (fit);
  const phase = FIT_PHASES[String(f.phase)] ?? "fitting";
  const left = typeof f.remaining_s === "number" && Number.isFinite(f.remaining_s) ? ` \u00b7 about ${duration(f.remaining_s)} left` : "";
  return `First use of the ${lensLabel(String(f.kind ?? ""))} lens: ${phase} ${Number(f.done)}/${Number(f.total)} ${formatToken(String(f.unit ?? ""), { maxLen: 20 })}${left}`;
}
