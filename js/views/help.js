/**
 * "What am I looking at?", in two levels, one click away: a short student version (a few plain
 * sentences: what the curve is, what a block is, readable is not computed) and the researcher
 * text behind a "More detail" switch. The student view (`view = "lesson"`) opens on the
 * student version; the full views show both. A change of view resets the switch to the view's
 * level.
 * @module views/help
 */
import { h, listen, uniqueId } from "../lib/dom.js";
import { ruleText } from "../lib/nonmonotone.js";
import { lensPhrase } from "../model/lens-name.js";

/** @param {string} term @param {...(string|Node)} rest */
const p = (term, ...rest) => h("p", {}, h("strong", { text: term }), " ", ...rest);

/** The student version: a few plain sentences, no formulas. */
export const STUDENT_HELP = [
  "The curve shows how sure the model is of the answer after each block, in percent: we read the model's half-finished work at that depth, as if it had to answer there.",
  "A block is one of the model's layers. The text passes through all of them in turn, and each one changes what the model would say next.",
  "Where the curve climbs is where the answer becomes readable. Readable is not the same as computed: a block can do work that only a later block makes readable, and the causal check (in the full view) tests which blocks the answer needs.",
  "On the token chips, \u2423 is a space and \u21b5 a line break. A rise of 10 percentage points is one from 6% to 16%: the difference of two percentages.",
];

/**
 * The help button and panel; `update(result)` fills in what depends on the result (the
 * non-monotone threshold, the lens). With the widget's `model`, the level follows its `view`.
 * @param {{get: (key: string) => any, on: (event: string, fn: () => void) => void, off?: (event: string, fn: () => void) => void}} [model]
 */
export function createHelp(model) {
  const nonmonotoneRule = h("span", {});
  const currentLens = h("span", { class: "iglens-help-lens" });
  const panel = h("div", { class: "iglens-help", role: "region", "aria-label": "What am I looking at?" });
  panel.hidden = true;
  const student = h("div", { class: "iglens-help-student", "data-help-level": "student" }, ...STUDENT_HELP.map((t) => h("p", { text: t })));
  const researcherId = uniqueId("help-detail");
  const researcher = h("div", { class: "iglens-help-researcher", "data-help-level": "researcher", id: researcherId });
  const more = h("button", {
    type: "button",
    class: "iglens-help-more iglens-link",
    "data-action": "help-more",
    "aria-controls": researcherId,
    "aria-expanded": "false",
  });
  panel.append(student, more, researcher);
  researcher.append(
    p(
      "Lens probability.",
      "After every block L the model has a hidden state h",
      h("sub", { text: "L" }),
      ". Reading it through the model's own final norm and unembedding head (the \u201clogit lens\u201d) gives a probability for the target token: f(h",
      h("sub", { text: "L" }),
      "). At L = n it is the model's real output probability.",
    ),
    p(
      "Fitted lenses.",
      "The logit lens is blind in early blocks: their states are not yet in the coordinates the head reads. The \u201clens\u201d control reads every state through a fitted lens instead ",
      "(a linear shortcut, a tuned lens or a Jacobian lens: a map of the state at each depth towards the last block's, fitted once on text the model samples itself, then cached), before the same norm and head. ",
      "The contributions still add up exactly; the head split then has one more column, coord: the change of the lens's coordinates along the segment, at its last block. ",
      currentLens,
    ),
    p(
      "Contribution.",
      "The contribution of a segment (a block, or a range of blocks) is how much that lens probability changes across it: f(h",
      h("sub", { text: "end" }),
      ") \u2212 f(h",
      h("sub", { text: "start" }),
      "), computed as an Integrated-Gradients integral along the straight path between the two states. ",
      "The contributions add up exactly to \u0394p = f(h",
      h("sub", { text: "n" }),
      ") \u2212 f(h",
      h("sub", { text: "0" }),
      ")\u2014the completeness line checks it.",
    ),
    p(
      "What it measures.",
      "A conditional marginal: how much more probability the final norm + head can read out after the segment, given the state before it. ",
      "It is not the total causal effect of a block\u2014a block can also matter through what later blocks do with its output. ",
      "For causal effects use ablation or direct-logit attribution.",
    ),
    p(
      "Sub-layers.",
      "With the boundaries \u201cattn / MLP halves\u201d each block is split in two: 12.attn (its attention write) and 12.mlp (its MLP), ",
      "read from the state between them (depth 11.5 is the state after block 12's attention).",
    ),
    p(
      "Heads and MLPs.",
      "Under the charts, a segment's contribution is split over the attention heads (h0, h1, \u2026), the MLP and the rest of the attention write ",
      "of each block in it; the shares add up to the segment's contribution. It shows the onset segment; click a bar or a heatmap cell to show another.",
    ),
    p(
      "Onset.",
      "The segment with the largest signed contribution: where the readout sees most of the token's probability arrive (outlined in the heatmap). Whether that is where the probability is made is what the causal check tests.",
    ),
    p(
      "Non-monotone.",
      "When the probability rises and then partly falls (or the reverse), ",
      nonmonotoneRule,
      ": shaded and hatched in the charts, marked \u25b2/\u25bc, and listed in words. ",
      "With more than one interpolation step, steps moving against their own segment are marked \u00d7. ",
      "Across the prompt, non-monotone tokens have an orange corner in the strip and an orange mark in the heatmap's labels; ",
      "\u201cnon-monotone\u201d in \u201ccolour by\u201d shades them by how much moves against \u0394p, and the list under the strip jumps to them.",
    ),
    p(
      "Inside a segment.",
      "Click \u201cShow the path inside each segment\u201d (a notebook with the model) to read the probability along the straight line between two blocks' states, ",
      "for the selected token only (milliseconds); the whole prompt's steps stay as they are.",
    ),
    p(
      "Long prompts and projectors.",
      "The strip on the right of the heatmap is an overview of every row: click it to scroll there, or type a position or a word in \u201cjump to\u201d. ",
      "The colour scale can follow the whole prompt, each row, or a fixed number you set (kept when you recompute). \u201cpresent\u201d enlarges all text for a projector.",
    ),
    p(
      "Answer.",
      "When the model generated an answer, the positions from the last prompt token on predict the answer's tokens: ",
      "they are marked \u201canswer\u201d in the strip and the detail, and the heatmap rows under the purple line predict the generated answer.",
    ),
    p(
      "Spans and whole answers.",
      "Shift-click a token, drag across tokens or press Shift+\u2190/\u2192 in the strip to pick a span of positions (Esc clears it). ",
      "Under the main view, its ledger: the probability that the span's targets all come, F = \u03a0 p(token), as the lens reads it after each block, ",
      "and each segment's change of log F, which adds up exactly to log p(span) \u2212 log F at the embeddings and splits over the span's tokens. ",
      "Without a span it shows the whole answer. With a second answer (versus=), the answer-vs-answer view shows both answers' F and ",
      "each segment's change of the gap log p(a) \u2212 log p(b) (or p(a) \u2212 p(b)).",
    ),
    p(
      "Reading the views.",
      "Red is positive, blue negative, and the colour scale is centred at 0. Click a token (or a heatmap row) to select it; hover to preview; \u2190 \u2192 move the selection, Esc clears.",
    ),
  );
  const button = h(
    "button",
    { type: "button", class: "iglens-help-toggle", "aria-expanded": "false" },
    h("span", { class: "iglens-help-icon", "aria-hidden": "true", text: "?" }),
    h("span", { text: "What am I looking at?" }),
  );
  /** the switch's choice in the shown view (null: the view's own level) */
  let choice = /** @type {boolean|null} */ (null);
  const lessonView = () => !!model && model.get("view") === "lesson";
  /** Show the level: the researcher text unless the student view opens on the student version. */
  const apply = () => {
    const detailed = choice ?? !lessonView();
    researcher.hidden = !detailed;
    panel.setAttribute("data-help-shown", detailed ? "researcher" : "student");
    more.setAttribute("aria-expanded", detailed ? "true" : "false");
    more.textContent = detailed ? "Less detail" : "More detail";
  };
  const onView = () => {
    choice = null;
    apply();
  };
  model?.on("change:view", onView);
  const offs = [
    listen(button, "click", () => {
      panel.hidden = !panel.hidden;
      button.setAttribute("aria-expanded", panel.hidden ? "false" : "true");
    }),
    listen(more, "click", () => {
      choice = !!researcher.hidden;
      apply();
    }),
  ];
  apply();
  const off = () => {
    offs.forEach((f) => f());
    model?.off?.("change:view", onView);
  };
  /** @param {import("../model/result.js").Result|null} r */
  const update = (r) => {
    currentLens.textContent = r ? `This result is read through the ${lensPhrase(r.lens)}.` : "";
    nonmonotoneRule.textContent = r
      ? `the segments that move ${ruleText(r.nonmonotoneThreshold)} are flagged`
      : "the segments that move against \u0394p are flagged";
  };
  update(null);
  return { button, panel, update, destroy: off };
}
