/**
 * The causal check under chart (a) of the detail panel: the button that asks Python to
 * zero-ablate each segment (the `ablation` command; or why it is off: no kernel), the state of
 * the computation (`running`), and — with the drops of the shown position — the legend and
 * the caption in numbers.
 * @module views/detail/ablation
 */
import { h, uniqueId } from "../../dom.js";
import { ABLATION, ABLATION_DARK, POSITIVE, NEGATIVE, POSITIVE_DARK, NEGATIVE_DARK } from "../../colorscale.js";
import { contributionRow, segmentText } from "../../result.js";
import { fmtProb } from "../../format.js";
import { compareAblation, rhoText } from "../../ablation.js";
import { kernelNote } from "../kernel.js";

/** What one ablation removes, in the button's words. @param {import("../../result.js").Result} r */
export function ablationUnit(r) {
  return r.halves ? "sub-layer" : r.singleBlocks ? "block" : "segment";
}

/** Static pages: why the button does nothing (its title), and in short (beside it). */
export const ABLATE_HINT = "The causal check runs the model: open this view in a notebook with its IGLens (iglens_viz.widget.show) to ablate.";
export const ABLATE_SHORT_HINT = "needs a Python kernel with the model";

/**
 * The causal check running: Python's `running` names one, or this view's own is not answered.
 * @param {import("../context.js").Context} ctx
 */
export const ablationBusy = (ctx) => ctx.running()?.command === "ablation" || !!ctx.commands.pending("ablation");

/**
 * The error of this view's latest causal check when it was for position i of the shown result.
 * @param {import("../context.js").Context} ctx @param {import("../../result.js").Result} r @param {number} i
 */
export function ablationError(ctx, r, i) {
  const sent = ctx.commands.latest("ablation");
  if (!sent?.answer?.error || sent.fields.result_id !== r.id || sent.fields.position !== i) return null;
  return sent.answer.error.message;
}

/**
 * The causal check under chart (a): the button (or why it is off), the state of the
 * computation, and — with drops for position i — the legend and the caption in numbers.
 * @param {import("../context.js").Context} ctx
 * @param {import("../../result.js").Result} r @param {number} i
 * @param {import("../../ablation.js").Ablation|null} abl the check of position i
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
      ctx.command("ablation", { result_id: r.id, position: i });
    });
    head.appendChild(button);
  }
  head.appendChild(status);

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
  box.appendChild(
    h(
      "div",
      { class: "iglens-ablation-legend" },
      h(
        "span",
        { class: "iglens-ablation-key", "data-series": "contribution" },
        swatch("iglens-ablation-swatch-half", pos),
        swatch("iglens-ablation-swatch-half", neg),
        h("span", { text: "IG-Lens contribution" }),
      ),
      h(
        "span",
        { class: "iglens-ablation-key", "data-series": "ablation" },
        swatch("", dark ? ABLATION_DARK : ABLATION),
        h("span", { text: `ablation drop (${abl.mode})` }),
      ),
    ),
  );
  box.appendChild(ablationCaption(r, i, abl));
  return box;
}

/**
 * The caption in numbers: Spearman's ρ between contributions and drops over the segments,
 * and whether the largest contribution and the largest drop are the same segment.
 * @param {import("../../result.js").Result} r @param {number} i
 * @param {import("../../ablation.js").Ablation} abl
 */
export function ablationCaption(r, i, abl) {
  const cmp = compareAblation(contributionRow(r, i), abl.drops);
  const f = abl.targetName ?? r.targetName;
  const what = r.halves ? "attention or MLP write" : r.singleBlocks ? "block" : "segment";
  const words =
    cmp.topContribution < 0 || cmp.topDrop < 0
      ? "no finite drop to compare"
      : cmp.agree
        ? `the largest contribution and the largest drop are both ${segmentText(r, cmp.topContribution)}: agree`
        : `the largest contribution is ${segmentText(r, cmp.topContribution)}, the largest drop ${segmentText(r, cmp.topDrop)}: disagree`;
  const p = h(
    "p",
    {
      class: "iglens-caption iglens-ablation-caption " + (cmp.agree ? "iglens-ablation-agree" : "iglens-ablation-disagree"),
      "data-agree": cmp.agree ? "true" : "false",
      "data-rho": String(cmp.rho),
    },
    h("span", { text: `Drop of ${f} at [${i}] when each ${what} is zero-ablated (its total effect through later blocks) against its contribution: ` }),
    h("strong", { class: "iglens-ablation-rho", text: `Spearman \u03c1 = ${rhoText(cmp.rho)}` }),
    h("span", { text: ` over ${cmp.n} segments; ` }),
    h("strong", { class: "iglens-ablation-verdict", text: words }),
    h("span", { text: "." }),
    Number.isFinite(abl.clean) ? h("span", { class: "iglens-muted", text: ` Unablated ${f} = ${fmtProb(abl.clean)}.` }) : null,
  );
  return p;
}
