/**
 * The causal check under chart (a) of the detail panel: the button that asks Python to
 * zero-ablate each segment (the `ablation` command; or why it is off: no kernel), where
 * (the answer position only, or every position), an optional counterfactual prompt and its
 * answer, the state of the computation (`running`), and — with the check of the shown
 * position — the legend, the caption in numbers and the plain sentence under it.
 * @module views/detail/ablation
 */
import { h, uniqueId } from "../../lib/dom.js";
import { ABLATION, ABLATION_DARK, POSITIVE, NEGATIVE, POSITIVE_DARK, NEGATIVE_DARK } from "../../lib/colorscale.js";
import { contributionRow, segmentText } from "../../model/result.js";
import { fmtProb } from "../../lib/format.js";
import { causalSummary, checkFields, defaultChoice, positionsText, rhoText, agreementSentence } from "../../model/ablation.js";
import { kernelNote, requestError } from "../kernel.js";

/** What one ablation removes, in the button's words. @param {import("../../model/result.js").Result} r */
export function ablationUnit(r) {
  return r.halves ? "sub-layer" : r.singleBlocks ? "block" : "segment";
}

/** Static pages: why the button does nothing (its title), and in short (beside it). */
export const ABLATE_HINT = "The causal check runs the model: open this view in a notebook with its IGLens (iglens_viz.widget.show) to ablate.";
export const ABLATE_SHORT_HINT = "needs a Python kernel with the model";

/** Direct effect and patching colours: the total's grey is ABLATION; patching is teal. */
export const PATCHING = "#1b7f79";
export const PATCHING_DARK = "#5ccfc4";

/**
 * What this view's controls ask for, per context (they survive the detail's re-renders).
 * @type {WeakMap<object, import("../../model/ablation.js").CheckChoice>}
 */
const choices = new WeakMap();

/** The causal check's controls' choice for a context. @param {object} ctx */
export function choiceOf(ctx) {
  let c = choices.get(ctx);
  if (!c) choices.set(ctx, (c = defaultChoice()));
  return c;
}

/**
 * The controls: where the total effect's ablation acts (two radio buttons) and the optional
 * counterfactual prompt with its answer token.
 * @param {object} ctx @param {boolean} live
 */
function checkControls(ctx, live) {
  const choice = choiceOf(ctx);
  const name = uniqueId("ablation-positions");
  const radio = (/** @type {"target"|"all"} */ value, /** @type {string} */ text, /** @type {string} */ title) => {
    const input = h("input", { type: "radio", name, value, "data-positions": value });
    input.checked = choice.positions === value;
    input.disabled = !live;
    input.addEventListener("change", () => {
      if (input.checked) choice.positions = value;
    });
    return h("label", { class: "iglens-ablation-option", title }, input, h("span", { text }));
  };
  const text = (/** @type {"counterfactual"|"contrast"} */ key, /** @type {string} */ label, /** @type {string} */ placeholder, /** @type {string} */ cls) => {
    const input = h("input", { type: "text", class: cls, name: `ablation-${key}`, placeholder, spellcheck: "false", autocomplete: "off", "aria-label": label });
    input.value = choice[key];
    input.disabled = !live;
    input.addEventListener("input", () => {
      choice[key] = input.value;
    });
    return input;
  };
  return h(
    "div",
    { class: "iglens-ablation-controls" },
    h(
      "div",
      { class: "iglens-ablation-positions", role: "radiogroup", "aria-label": "Ablate each segment" },
      h("span", { class: "iglens-muted", text: "ablate at" }),
      radio("target", "answer position", "Zero-ablate each segment at the answer position only (the token's own position)"),
      radio("all", "all positions", "Zero-ablate each segment at every position"),
    ),
    h(
      "div",
      { class: "iglens-ablation-counterfactual" },
      text(
        "counterfactual",
        "Counterfactual prompt (optional): the same template and token length, another subject",
        "counterfactual prompt (optional, same token length)",
        "iglens-ablation-prompt",
      ),
      text("contrast", "Its answer token (empty: the model's top-1)", "its answer", "iglens-ablation-contrast"),
    ),
  );
}

/**
 * The causal check running: Python's `running` names one, or this view's own is not answered.
 * @param {import("../context.js").Context} ctx
 */
export const ablationBusy = (ctx) => ctx.running()?.command === "ablation" || !!ctx.commands.pending("ablation");

/**
 * The error of this view's latest causal check when it was for position i of the shown result,
 * until a later request is sent (a message belongs to its request: js/views/kernel.js).
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r @param {number} i
 */
export function ablationError(ctx, r, i) {
  return requestError(ctx.commands, "ablation", (sent) => sent.fields.result_id === r.id && sent.fields.position === i);
}

/**
 * The causal check under chart (a): the button (or why it is off), the state of the
 * computation, and — with drops for position i — the legend and the caption in numbers.
 * @param {import("../context.js").Context} ctx
 * @param {import("../../model/result.js").Result} r @param {number} i
 * @param {import("../../model/ablation.js").Ablation|null} abl the check of position i
 * @param {boolean} dark
 */
export function ablationBox(ctx, r, i, abl, dark) {
  const interactive = !!ctx.model.get("interactive");
  const live = ctx.live();
  const busy = live && ablationBusy(ctx);
  const unit = ablationUnit(r);
  const box = h("div", { class: "iglens-ablation", "data-position": i });
  const head = h("div", { class: "iglens-ablation-head" });
  box.appendChild(head);
  const statusId = uniqueId("ablation-status");
  const status = h("span", { class: "iglens-ablation-status iglens-muted", id: statusId, role: "status" });
  const other = ctx.ablation.ablation && ctx.ablation.ablation.position !== i ? ctx.ablation.ablation.position : -1;
  // a page without a live kernel that carries this position's drops shows them, no button
  if (live || !abl) {
    const label = `Causal check (ablate each ${unit})`;
    const note = kernelNote(ctx);
    const button = h(
      "button",
      {
        type: "button",
        class: "iglens-ablate",
        "data-action": "ablate",
        "aria-describedby": statusId,
        title: live ? `Zero-ablate each ${unit} in the model and draw the drop of ${r.targetName} at [${i}] beside the contributions` : note || ABLATE_HINT,
      },
      h("span", { class: "iglens-spinner", "aria-hidden": "true" }),
      h("span", { class: "iglens-ablate-label", text: label }),
    );
    if (!live) {
      button.disabled = true;
      status.textContent = (interactive ? note : ABLATE_SHORT_HINT) + (other >= 0 ? ` \u00b7 this page carries the drops of position ${other}` : "");
      if (interactive) status.classList.add("iglens-kernel-note");
    } else if (busy) {
      // aria-disabled, not disabled: the button keeps the keyboard focus while Python works
      button.setAttribute("aria-disabled", "true");
      button.setAttribute("aria-busy", "true");
      button.classList.add("iglens-busy");
      status.textContent = `ablating each ${unit}\u2026`;
    }
    button.addEventListener("click", () => {
      if (!ctx.live() || ablationBusy(ctx) || ctx.running()) return;
      ctx.command("ablation", checkFields(r.id, i, choiceOf(ctx)));
    });
    head.appendChild(button);
    head.appendChild(status);
    // where to ablate and the counterfactual: only where a kernel can act on them
    if (live) box.appendChild(checkControls(ctx, live));
  } else head.appendChild(status);

  const err = busy ? null : (ablationError(ctx, r, i) ?? ctx.ablation.error);
  if (err) box.appendChild(h("p", { class: "iglens-ablation-error", role: "alert", text: err }));
  if (!abl) return box;

  if (!busy && live && Number.isFinite(abl.seconds)) status.textContent = `computed in ${abl.seconds < 10 ? abl.seconds.toFixed(2) : abl.seconds.toFixed(0)} s`;
  const swatch = (/** @type {string} */ cls, /** @type {string} */ fill) => {
    const sw = h("span", { class: `iglens-ablation-swatch ${cls}`, "aria-hidden": "true" });
    sw.style.background = fill;
    return sw;
  };
  const pos = dark ? POSITIVE_DARK : POSITIVE;
  const neg = dark ? NEGATIVE_DARK : NEGATIVE;
  const grey = dark ? ABLATION_DARK : ABLATION;
  const teal = dark ? PATCHING_DARK : PATCHING;
  const hollow = (/** @type {string} */ color) => {
    const sw = swatch("iglens-ablation-swatch-hollow", "transparent");
    sw.style.border = `1.5px solid ${color}`;
    return sw;
  };
  const key = (/** @type {string} */ series, /** @type {Node[]} */ marks, /** @type {string} */ text) =>
    h("span", { class: "iglens-ablation-key", "data-series": series }, ...marks, h("span", { text }));
  box.appendChild(
    h(
      "div",
      { class: "iglens-ablation-legend" },
      key("contribution", [swatch("iglens-ablation-swatch-half", pos), swatch("iglens-ablation-swatch-half", neg)], "IG-Lens contribution"),
      key("ablation", [swatch("", grey)], `total effect: ablation drop (${abl.mode}, ${positionsText(abl.positions)})`),
      abl.direct ? key("direct", [hollow(grey)], "direct effect (later blocks frozen)") : null,
      abl.patching ? key("patching-total", [swatch("", teal)], "patching, total") : null,
      abl.patching ? key("patching-direct", [hollow(teal)], "patching, direct") : null,
    ),
  );
  box.appendChild(ablationCaption(r, i, abl));
  return box;
}

/**
 * The caption in numbers: Spearman's ρ of each series (total, direct and, with a
 * counterfactual, the patching effects) against the contributions over the segments, the
 * segment where each is largest, and a plain sentence saying what agreement and disagreement mean
 * (`agreementSentence`: readable in the lens is not computed there).
 * @param {import("../../model/result.js").Result} r @param {number} i
 * @param {import("../../model/ablation.js").Ablation} abl
 */
export function ablationCaption(r, i, abl) {
  const sum = causalSummary(contributionRow(r, i), abl);
  const cmp = sum.total;
  const f = abl.targetName ?? r.targetName;
  const what = r.halves ? "attention or MLP write" : r.singleBlocks ? "block" : "segment";
  const rho = (/** @type {string} */ series, /** @type {string} */ name, /** @type {import("../../model/ablation.js").Comparison} */ c) =>
    h("span", { class: "iglens-ablation-rho", "data-series": series, "data-rho": String(c.rho) }, h("strong", { text: `${name} ρ = ${rhoText(c.rho)}` }));
  /** @type {Array<[string, string, import("../../model/ablation.js").Comparison|null]>} */
  const all = [
    ["ablation", "total", cmp],
    ["direct", "direct", sum.direct],
    ["patching-total", "patching total", sum.patchTotal],
    ["patching-direct", "patching direct", sum.patchDirect],
  ];
  const shown = all.filter((e) => e[2] !== null);
  const parts = [];
  for (const [q, [series, name, c]] of shown.entries()) {
    if (q) parts.push(h("span", { text: ", " }));
    parts.push(rho(series, name, /** @type {import("../../model/ablation.js").Comparison} */ (c)));
  }
  const largest = cmp.topContribution < 0 ? "" : `The largest contribution is ${segmentText(r, cmp.topContribution)}`;
  const tops = shown
    .filter((e) => /** @type {import("../../model/ablation.js").Comparison} */ (e[2]).topDrop >= 0)
    .map(([, name, c]) => `${name} ${segmentText(r, /** @type {import("../../model/ablation.js").Comparison} */ (c).topDrop)}`);
  const where = largest ? `${largest}; the largest effect: ${tops.length ? tops.join(", ") : "none finite"}.` : "No finite contribution to compare.";
  const p = h(
    "p",
    {
      class: "iglens-caption iglens-ablation-caption",
      "data-agree": cmp.agree ? "true" : "false",
      "data-rho": String(cmp.rho),
    },
    h("span", { text: `Effect on ${f} at [${i}] of each ${what}, zero-ablated ${positionsText(abl.positions)}, against its contribution: Spearman ` }),
    ...parts,
    h("span", { text: ` over ${cmp.n} segments. ` }),
    h("span", { class: "iglens-ablation-verdict", text: where }),
    Number.isFinite(abl.clean) ? h("span", { class: "iglens-muted", text: ` Unablated ${f} = ${fmtProb(abl.clean)}.` }) : null,
  );
  const notes = [p];
  if (abl.patching) notes.push(patchingCaption(abl.patching));
  notes.push(
    h("p", { class: "iglens-caption iglens-ablation-sentence", "data-agree": cmp.agree ? "true" : "false", text: agreementSentence(cmp, ablationUnit(r)) }),
  );
  return h("div", { class: "iglens-ablation-captions" }, ...notes);
}

/**
 * What the patching effects are: the counterfactual prompt's tokens and answer, the metric.
 * @param {import("../../model/ablation.js").Patching} pt
 */
function patchingCaption(pt) {
  const tokens = pt.tokens.map((t) => JSON.stringify(t)).join(" ");
  const metric = `logit(target) − logit(${JSON.stringify(pt.contrast)})`;
  const m =
    Number.isFinite(pt.cleanMetric) && Number.isFinite(pt.corruptMetric)
      ? ` (clean ${pt.cleanMetric.toFixed(2)}, counterfactual ${pt.corruptMetric.toFixed(2)})`
      : "";
  return h(
    "p",
    { class: "iglens-caption iglens-ablation-patching-caption" },
    h("span", {
      text: `Patching: each segment's update at the answer position replaced by the counterfactual prompt's [${tokens}]; normalised effect on ${metric}${m}.`,
    }),
    pt.normalized ? null : h("span", { class: "iglens-ablation-warning", text: " The two prompts' metrics are equal: the effects are undefined." }),
    ...pt.warnings.map((w) => h("span", { class: "iglens-muted", text: ` ${w}` })),
  );
}
