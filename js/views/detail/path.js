/**
 * The interior path of the shown position under chart (b): asking Python for it lazily (the
 * `path_request` trait, once per result, position and steps; then for every newly selected
 * token), the box with its legend and controls, and the Riemann terms of one segment.
 * @module views/detail/path
 */
import { h } from "../../dom.js";
import { contributionRow, segmentText } from "../../result.js";
import { fmtSigned } from "../../format.js";
import { readPathTrait } from "../../path.js";
import { chartLegend } from "./space.js";

/** The interior-path steps asked for lazily (from the panel's box; shared by the panels of a page). */
const DEFAULT_PATH_STEPS = 8;

/** Per context: the interior-path steps the user asked for, and the last request sent. */
const pathWishes = /** @type {WeakMap<object, {steps: number, sent: {r: object|null, i: number, steps: number}}>} */ (new WeakMap());

/** @param {import("../context.js").Context} ctx */
function pathWish(ctx) {
  let w = pathWishes.get(ctx);
  if (!w) {
    w = { steps: 0, sent: { r: null, i: -1, steps: 0 } };
    pathWishes.set(ctx, w);
  }
  return w;
}

/**
 * Ask Python for the interior path of position i at `steps` (the `path_request` trait);
 * once per (result, position, steps).
 * @param {import("../context.js").Context} ctx @param {import("../../result.js").Result} r
 * @param {number} i @param {number} steps @param {boolean} [again] send even if sent before
 */
export function requestPath(ctx, r, i, steps, again = false) {
  const wish = pathWish(ctx);
  wish.steps = steps;
  if (!again && wish.sent.r === r && wish.sent.i === i && wish.sent.steps === steps) return;
  wish.sent = { r, i, steps };
  const previous = ctx.model.get("path_request");
  ctx.setTrait("path_request", { position: i, steps, _n: ((previous && previous._n) || 0) + 1 });
}

/**
 * The selected token's interior path, fetched lazily: once the user has asked for a path,
 * every newly selected token asks Python for its own (milliseconds, one token).
 * @param {import("../context.js").Context} ctx @param {import("../../result.js").Result} r
 * @param {number} i @param {boolean} preview
 */
export function autoRequestPath(ctx, r, i, preview) {
  const wish = pathWish(ctx);
  if (preview || r.pathProbs || !wish.steps || !ctx.model.get("interactive") || !r.hasTarget[i]) return;
  const have = readPathTrait(ctx.model.get("path"), r).path;
  if (have && have.position === i && have.m === wish.steps) return;
  requestPath(ctx, r, i, wish.steps);
}

/**
 * Under chart (b): the legend of the path, what it shows, and (interactive, no path in the
 * result) the box that asks Python for this token's path.
 * @param {import("../context.js").Context} ctx @param {import("../../result.js").Result} r
 * @param {number} i @param {number} m steps of the path drawn (0: none)
 * @param {boolean} lazy the path drawn was computed for this token
 * @param {import("../../path.js").PathTrait} trait @param {boolean} dark
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
  const waiting = wish.sent.r === r && wish.sent.i === i && !(lazy && m === wish.sent.steps) && !(trait.error && trait.errorPosition === i);
  if (lazy && trait.path) status.textContent = `computed for this token in ${Math.max(1, Math.round(trait.path.seconds * 1000))} ms`;
  else if (waiting) status.textContent = "computing\u2026";
  button.addEventListener("click", () => {
    const n = Math.max(2, Math.min(r.maxSteps, Math.trunc(Number(steps.value)) || DEFAULT_PATH_STEPS));
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
  if (trait.error && (trait.errorPosition === null || trait.errorPosition === i)) {
    box.appendChild(h("p", { class: "iglens-ablation-error iglens-path-error", role: "alert", text: trait.error }));
  }
  return box;
}

/**
 * The Riemann terms of one segment (the picked one, else the onset): m numbers whose sum is
 * the Riemann estimate of its contribution at m steps, next to the shown contribution.
 * @param {import("../context.js").Context} ctx @param {import("../../result.js").Result} r
 * @param {number} i @param {import("../../path.js").LazyPath} lazy
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
