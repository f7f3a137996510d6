/**
 * The token strip's marks of issue 23: the chat template folded into one chip per run (the
 * `template` switch, template-fold.js beside it) and the positions that carry a teacher note (the
 * `notes` trait, notes.js: a dot, and the note's text in the chip's title). The template's
 * positions are the result trait's `template_positions`.
 * @module views/strip/marks
 */
import { listen } from "../../lib/dom.js";
import { applyFold, foldRuns, skipFolded, templateFolded, templateMask } from "./template-fold.js";
import { readNotes } from "../../model/notes.js";

/**
 * @param {import("../context.js").Context} ctx
 * @param {{list: HTMLElement, foldBox: HTMLInputElement, foldSwitch: HTMLElement}} d the strip's elements
 * @param {() => HTMLElement[]} chips the chips, by position
 * @param {(r: import("../../model/result.js").Result, i: number) => string} describe a chip's title
 * @param {() => void} refit the strip's lines changed (folded or unfolded): scroll to whole lines again
 */
export function stripMarks(ctx, d, chips, describe, refit) {
  /** the positions folded now (null: none) */
  let folded = /** @type {boolean[]|null} */ (null);

  /** Fold or unfold the chat template as the `template` switch and the view say. */
  function refold() {
    const r = ctx.result;
    folded = null;
    if (!r) return;
    const template = templateMask(ctx.model.get("result")?.template_positions, r.T);
    const runs = foldRuns({ T: r.T, answerStart: r.answerStart, template });
    const on = templateFolded(ctx.model.get("template"), ctx.model.get("view"));
    d.foldSwitch.hidden = !runs.length;
    d.foldBox.checked = on;
    folded = applyFold(d.list, chips(), on ? runs : []);
    refit();
  }

  /** Mark the positions that have a teacher note. */
  function markNotes() {
    const r = ctx.result;
    if (!r) return;
    const noted = new Map();
    for (const n of readNotes(ctx.model.get("notes"), r.T, r.nBlocks)) if (n.position !== null && !noted.has(n.position)) noted.set(n.position, n.text);
    chips().forEach((chip, i) => {
      const text = noted.get(i);
      chip.classList.toggle("iglens-token-noted", text !== undefined);
      if (text !== undefined) chip.setAttribute("data-note", "");
      else chip.removeAttribute("data-note");
      chip.title = describe(r, i) + (text !== undefined ? ` \u00b7 note: ${text}` : "");
    });
  }

  /** @type {Array<[string, () => void]>} */
  const traits = [
    ["change:template", refold],
    ["change:view", refold],
    ["change:notes", markNotes],
  ];
  for (const [name, fn] of traits) ctx.model.on(name, fn);
  const off = listen(d.foldBox, "change", () => ctx.setTrait("template", d.foldBox.checked ? "folded" : "shown"));

  return {
    /** A new result's chips: fold and mark them. */
    update() {
      refold();
      markNotes();
    },
    /** A click in the strip: on a folded chip, unfold (true: handled). @param {Event} e */
    click(e) {
      if (!(e.target instanceof Element && e.target.closest(".iglens-template-fold"))) return false;
      ctx.setTrait("template", "shown");
      return true;
    },
    /** Where a key's move lands (null: not a moving key), past the folded positions. @param {number|null} next @param {number} cur */
    skip: (next, cur) => (next === null ? null : skipFolded(next, cur, folded)),
    destroy() {
      off();
      for (const [name, fn] of traits) ctx.model.off(name, fn);
    },
  };
}
