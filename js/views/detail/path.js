/**
 * The interior path of the shown position under chart (b): asking Python for it lazily (the
 * `path` command, once per result, position and steps; then for every newly selected token),
 * the box with its legend and controls, and the Riemann terms of one segment.
 * @module views/detail/path
 */
import { h } from "../../lib/dom.js";
import { contributionRow, segmentText } from "../../model/result.js";
import { fmtSigned } from "../../lib/format.js";
import { readPathTrait } from "../../model/path.js";
import { chartLegend } from "./space.js";
import { kernelNote } from "../kernel.js";

/** The interior-path steps asked for lazily (from the panel's box; shared by the panels of a page). */
const DEFAULT_PATH_STEPS = 8;

/** Per context: the interior-path steps the user asked for (0: none yet). */
const pathWishes = /** @type {WeakMap<object, {steps: number}>} */ (new WeakMap());

/** @param {import("../context.js").Context} ctx */
function pathWish(ctx) {
  let w = pathWishes.get(ctx);
  if (!w) {
    w = { steps: 0 };
    pathWishes.set(ctx, w);
  }
  return w;
}

/**
 * This view's latest `path` command when it asked for position i of result r (at `steps`
 * when given), else null.
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r
 * @param {number} i @param {number} [steps]
 */
function sentFor(ctx, r, i, steps) {
  const sent = ctx.commands.latest("path");
  if (!sent || sent.fields.result_id !== r.id || sent.fields.position !== i) return null;
  return steps === undefined || sent.fields.steps === steps ? sent : null;
}

/**
 * Ask Python for the interior path of position i at `steps` (the `path` command); once per
 * (result, position, steps) unless `again`.
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r
 * @param {number} i @param {number} steps @param {boolean} [again] send even if sent before
 */
export function requestPath(ctx, r, i, steps, again = false) {
  pathWish(ctx).steps = steps;
  if (!ctx.live() || (!again && sentFor(ctx, r, i, steps))) return;
  ctx.command("path", { result_id: r.id, position: i, steps });
}

/**
 * The selected token's interior path, fetched lazily: once the user has asked for a path,
 * every newly selected token asks Python for its own (milliseconds, one token).
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r
 * @param {number} i @param {boolean} preview
 */
export function autoRequestPath(ctx, r, i, preview) {
  const wish = pathWish(ctx);
  if (preview || r.pathProbs || !wish.steps || !ctx.live() || !r.hasTarget[i]) return;
  const have = readPathTrait(ctx.model.get("path"), r).path;
  if (have && have.position === i && have.m === wish.steps) return;
  requestPath(ctx, r, i, wish.steps);
}

/**
 * Under chart (b): the legend of the path, what it shows, and (interactive, no path in the
 * result) the box that asks Python for this token's path.
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r
 * @param {number} i @param {number} m steps of the path drawn (0: none)
 * @param {boolean} lazy the path drawn was computed for this token
 * @param {import("../../model/path.js").PathTrait} trait @param {boolean} dark
 */
export function pathBox(ctx, r, i, m, lazy, trait, dark) {
  void dark;
  const box = h("div", { class: "iglens-pathbox" });
  if (m > 0) {
    box.appendChild(
      chartLegend([
        ["iglens-key-dot", "after each block"],
        ["iglens-key-chord", "straight line between blocks"],
        ["iglens-key-path", `along the path inside each segment (m=${m})`],
        ["iglens-key-flag", "\u00d7 a step against its segment"],
      ]),
    );
    box.appendChild(
      h("p", {
        class: "iglens-caption iglens-path-teach",
        text:
          "Inside a segment the state moves in a straight line from h\u2090 to h_b; the coloured line is the probability read along it. " +
          "Where it bends away from the dashed line, the segment's change does not arrive evenly: most of it lands at the steepest steps, " +
          "and a step that dips against the segment's direction is marked \u00d7.",
      }),
    );
  }
  const interactive = !!ctx.model.get("interactive");
  if (r.pathProbs) return box;
  if (!interactive) {
    if (!m)
      box.appendChild(
        h("p", {
          class: "iglens-muted iglens-path-hint",
          text: "The path inside each segment needs steps > 1: attribute with steps=8, or open this view in a notebook with the model to compute it for one token.",
        }),
      );
    return box;
  }
  const live = ctx.live();
  const wish = pathWish(ctx);
  const steps = h("input", {
    type: "number",
    name: "path_steps",
    class: "iglens-input iglens-steps",
    min: 2,
    max: r.maxSteps,
    step: 1,
    value: wish.steps || (lazy ? m : DEFAULT_PATH_STEPS),
    "aria-label": "interpolation steps of the path",
  });
  const button = h("button", {
    type: "button",
    class: "iglens-path-button",
    "data-action": "path",
    text: m ? "Recompute the path" : "Show the path inside each segment",
  });
  const status = h("span", { class: "iglens-muted iglens-path-status", role: "status" });
  const asked = sentFor(ctx, r, i);
  const error = asked?.answer?.error?.message ?? trait.error;
  if (!live) {
    // no kernel to ask: nothing here may look live
    steps.disabled = true;
    button.disabled = true;
    button.title = kernelNote(ctx);
    status.textContent = kernelNote(ctx);
    status.classList.add("iglens-kernel-note");
  } else if (lazy && trait.path) status.textContent = `computed for this token in ${Math.max(1, Math.round(trait.path.seconds * 1000))} ms`;
  else if (asked && !asked.answer) status.textContent = "computing\u2026";
  button.addEventListener("click", () => {
    const n = Math.max(2, Math.min(r.maxSteps, Math.trunc(Number(steps.value)) || DEFAULT_PATH_STEPS));
    if (!ctx.live()) return;
    requestPath(ctx, r, i, n, true);
    status.textContent = "computing\u2026";
  });
  steps.addEventListener("keydown", (e) => {
    e.stopPropagation();
    if (e.key === "Enter") button.click();
  });
  box.appendChild(
    h(
      "div",
      { class: "iglens-path-ask" },
      h("label", { class: "iglens-field" }, h("span", { class: "iglens-field-label", text: "m =" }), steps),
      button,
      status,
    ),
  );
  if (error) box.appendChild(h("p", { class: "iglens-ablation-error iglens-path-error", role: "alert", text: error }));
  return box;
}

/**
 * The Riemann terms of one segment (the picked one, else the onset): m numbers whose sum is
 * the Riemann estimate of its contribution at m steps, next to the shown contribution.
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r
 * @param {number} i @param {import("../../model/path.js").LazyPath} lazy
 */
export function riemannTerms(ctx, r, i, lazy) {
  const j = ctx.segmentFocus.index === i && ctx.segmentFocus.j >= 0 ? ctx.segmentFocus.j : Math.max(0, r.onset[i]);
  const terms = /** @type {Float64Array} */ (lazy.terms).subarray(j * lazy.m, (j + 1) * lazy.m);
  let sum = 0;
  for (const t of terms) if (Number.isFinite(t)) sum += t;
  const shown = Array.from(terms.slice(0, 16), (t) => fmtSigned(t)).join(" ");
  return h(
    "p",
    { class: "iglens-caption iglens-riemann-terms", "data-segment": j },
    h("strong", { text: `Riemann terms of ${segmentText(r, j)} (m=${lazy.m}): ` }),
    h("span", { class: "iglens-mono", text: shown + (terms.length > 16 ? " \u2026" : "") }),
    h("span", { text: ` \u2014 sum ${fmtSigned(sum)}; contribution shown ${fmtSigned(contributionRow(r, i)[j])}` }),
  );
}
