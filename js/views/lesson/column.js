/**
 * The student view's lens column: one row per boundary (embeddings at the top, the output at
 * the bottom) with the lens's top tokens at the lesson's position and their probabilities in
 * percent; the walk's row is highlighted (`aria-current`) and kept in view. Token text goes
 * in as text only.
 * @module views/lesson/column
 */
import { h, scrollIntoContainer } from "../../lib/dom.js";
import { quoteToken } from "../../lib/tokens.js";
import { fmtPercentPlain } from "../../lib/format.js";

/**
 * A guess as a chip and its percentage.
 * @param {import("../../model/lesson.js").Guess} g
 */
export function guessChip(g) {
  return h(
    "span",
    { class: "iglens-lesson-guess" + (g.isTarget ? " iglens-lesson-is-target" : ""), title: quoteToken(g.raw) },
    h("span", { class: "iglens-chip", text: g.text }),
    h("span", { class: "iglens-lesson-pct", text: fmtPercentPlain(g.p) }),
  );
}

/**
 * The column's elements for a lesson.
 * Each row is a button with `data-block` (the view moves its cursor there on a click).
 * @param {import("../../model/lesson.js").Lesson} lesson
 */
export function lensColumn(lesson) {
  const rows = lesson.column.map((c) =>
    h(
      "button",
      { type: "button", class: "iglens-lesson-row", "data-block": c.L, title: `${c.label}: the model's top guesses` },
      h("span", { class: "iglens-lesson-row-label", text: c.L === 0 ? "emb" : c.label.replace(/^block /, "") }),
      h("span", { class: "iglens-lesson-row-guesses" }, ...c.top.map(guessChip)),
    ),
  );
  const box = h("div", { class: "iglens-lesson-rows", role: "group", "aria-label": "top guesses after each block" }, ...rows);
  const title = lesson.input ? `The model's guess after each block, reading \u201c${lesson.input}\u201d` : "The model's guess after each block";
  const el = h("div", { class: "iglens-lesson-column", "data-lesson-column": lesson.position }, h("h3", { class: "iglens-lesson-subtitle", text: title }), box);

  /** Highlight row L and scroll it into the column's view. @param {number} L */
  function setCursor(L) {
    rows.forEach((row, q) => {
      if (q === L) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    });
    if (rows[L] && box.clientHeight) scrollIntoContainer(box, rows[L], 8);
  }
  return { el, box, rows, setCursor };
}
