/**
 * Folding the chat template in the token strip: the result's `template_positions` (the
 * system prompt, role markers and the assistant's header, as Python found them) are
 * hidden behind one chip per run when the `template` switch says so ("auto": in the
 * student view only; "folded": everywhere; "shown": never). Positions keep their numbers:
 * the chips stay in the strip, hidden, and every other view is unchanged. A position that
 * predicts the answer (i >= answerStart) never folds.
 * @module template-fold
 */
import { h } from "../../lib/dom.js";
import { TEMPLATE_MODES } from "../../model/protocol.js";

/** The `template` switch's values (iglens_viz.protocol.state.TEMPLATE_MODES). */
export { TEMPLATE_MODES };

/**
 * The protocol's `template_positions` as a per-position mask (null: the prompt was not
 * wrapped, or the value is not a list of positions).
 * @param {unknown} raw @param {number} T
 * @returns {boolean[]|null}
 */
export function templateMask(raw, T) {
  if (!Array.isArray(raw)) return null;
  const mask = new Array(T).fill(false);
  for (const t of raw) {
    if (!Number.isInteger(t) || t < 0 || t >= T) return null;
    mask[t] = true;
  }
  return mask;
}

/**
 * The runs of consecutive template positions that fold: `[start, end]` inclusive, before
 * `answerStart` only.
 * @param {{T: number, answerStart: number, template: boolean[]|null}} r
 * @returns {Array<[number, number]>}
 */
export function foldRuns(r) {
  /** @type {Array<[number, number]>} */
  const runs = [];
  if (!r.template) return runs;
  const stop = Math.min(r.T, r.answerStart);
  for (let i = 0; i < stop; i++) {
    if (!r.template[i]) continue;
    let j = i;
    while (j + 1 < stop && r.template[j + 1]) j++;
    runs.push([i, j]);
    i = j;
  }
  return runs;
}

/**
 * Whether the template folds now.
 * @param {unknown} mode the `template` trait @param {unknown} view the `view` trait
 */
export function templateFolded(mode, view) {
  if (mode === "folded") return true;
  if (mode === "shown") return false;
  return view === "lesson";
}

/**
 * A folded run's chip: an option of the strip's listbox (a listbox holds options only),
 * named by its text, whose click unfolds the template (the switch does it by keyboard).
 * @param {[number, number]} run
 */
function foldChip(run) {
  const [a, b] = run;
  const n = b - a + 1;
  return h("span", {
    class: "iglens-template-fold",
    role: "option",
    "aria-selected": "false",
    "data-fold-start": a,
    "data-fold-end": b,
    title: `the chat template, positions ${a}\u2013${b} (${n} tokens): click to show them`,
    text: `\u2026 template \u00b7 ${n} tokens`,
  });
}

/**
 * Fold the strip's chips: unfolds everything, then hides the chips of `runs` (and the line
 * breaks after them) and puts one chip before each run. Returns the folded mask (null:
 * nothing folded).
 * @param {HTMLElement} list the strip's listbox @param {HTMLElement[]} items its chips, by position
 * @param {Array<[number, number]>} runs
 * @returns {boolean[]|null}
 */
export function applyFold(list, items, runs) {
  for (const chip of list.querySelectorAll(".iglens-template-fold")) chip.remove();
  for (const el of list.querySelectorAll("[data-folded]")) {
    el.removeAttribute("data-folded");
    /** @type {HTMLElement} */ (el).hidden = false;
  }
  if (!runs.length) return null;
  const folded = new Array(items.length).fill(false);
  for (const run of runs) {
    for (let i = run[0]; i <= run[1]; i++) {
      folded[i] = true;
      const chip = items[i];
      if (!chip) continue;
      chip.hidden = true;
      chip.setAttribute("data-folded", "");
      const next = chip.nextElementSibling;
      if (next && next.classList.contains("iglens-break")) {
        /** @type {HTMLElement} */ (next).hidden = true;
        next.setAttribute("data-folded", "");
      }
    }
    items[run[0]]?.before(foldChip(run));
  }
  return folded;
}

/**
 * The next position a key moves to, stepping over folded positions in the key's direction
 * (the other way when the end is folded; `next` itself when nothing is folded).
 * @param {number} next @param {number} cur @param {boolean[]|null} folded
 */
export function skipFolded(next, cur, folded) {
  if (!folded || next < 0 || !folded[next]) return next;
  const d = next >= cur ? 1 : -1;
  for (let i = next; i >= 0 && i < folded.length; i += d) if (!folded[i]) return i;
  for (let i = next; i >= 0 && i < folded.length; i -= d) if (!folded[i]) return i;
  return next;
}
