/**
 * Recompute controls (only when a Python kernel is attached: the `interactive` trait),
 * prefilled from the result's `controls` (else from the `request` trait). Apply writes the
 * `request` trait `{target, contrast, boundaries, estimator, steps}` (boundaries: "all",
 * "every:K", "sublayer" or a custom list) and saves; Python
 * answers through `busy`, `error` and a new `result`.
 * @module views/controls
 */
import { h, listen } from "../dom.js";

export const BOUNDARY_PRESETS = [
  ["all", "every block"],
  ["every:2", "every 2 blocks"],
  ["every:5", "every 5 blocks"],
  ["sublayer", "attn / MLP halves"],
  ["custom", "custom\u2026"],
];
export const ESTIMATORS = [
  ["prediction_aware", "prediction-aware (exact)"],
  ["riemann", "Riemann (gradient)"],
];

/**
 * Build the request from the form's current values.
 * @param {{target: string, contrast: string, boundaries: string, custom: string, estimator: string, steps: string}} v
 */
export function makeRequest(v) {
  const steps = Math.max(1, Math.trunc(Number(v.steps)) || 1);
  return {
    target: v.target.trim() === "" ? "predicted" : v.target,
    contrast: v.contrast,
    boundaries: v.boundaries === "custom" ? v.custom.trim() : v.boundaries,
    estimator: v.estimator,
    steps,
  };
}

/** The form's fields, the Apply button, progress, cancel and the error line. */
function controlsDom() {
  const target = h("input", {
    name: "target",
    type: "text",
    class: "iglens-input",
    placeholder: "predicted \u00b7 next \u00b7 a token",
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": "target",
  });
  const targetList = h("datalist", {});
  for (const v of ["predicted", "next"]) targetList.appendChild(h("option", { value: v }));
  const listId = `iglens-targets-${Math.random().toString(36).slice(2, 9)}`;
  targetList.id = listId;
  target.setAttribute("list", listId);
  const contrast = h("input", {
    name: "contrast",
    type: "text",
    class: "iglens-input",
    placeholder: "none",
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": "contrast token",
  });
  const boundaries = h("select", { name: "boundaries", class: "iglens-input", "aria-label": "boundaries" });
  for (const [v, label] of BOUNDARY_PRESETS) boundaries.appendChild(h("option", { value: v, text: label }));
  const custom = h("input", {
    name: "boundaries_custom",
    type: "text",
    class: "iglens-input iglens-custom",
    placeholder: "0,10,20,30",
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": "custom boundaries",
  });
  const estimator = h("select", { name: "estimator", class: "iglens-input", "aria-label": "estimator" });
  for (const [v, label] of ESTIMATORS) estimator.appendChild(h("option", { value: v, text: label }));
  const steps = h("input", {
    name: "steps",
    type: "number",
    min: 1,
    step: 1,
    value: 1,
    class: "iglens-input iglens-steps",
    "aria-label": "interpolation steps",
  });
  const apply = h(
    "button",
    { type: "submit", class: "iglens-apply" },
    h("span", { class: "iglens-spinner", "aria-hidden": "true" }),
    h("span", { class: "iglens-apply-label", text: "Apply" }),
  );
  const status = h("div", { class: "iglens-status", role: "status", "aria-live": "polite" });
  // a whole-prompt recompute: its progress (the share of interior points done) and a way out
  const progress = h("progress", { class: "iglens-progress", max: 1, "aria-label": "recompute progress" });
  progress.hidden = true;
  const cancel = h("button", { type: "button", class: "iglens-cancel", "data-action": "cancel", text: "Cancel" });
  cancel.hidden = true;
  const error = h("div", { class: "iglens-error", role: "alert" });
  error.hidden = true;

  const field = (/** @type {string} */ label, /** @type {HTMLElement[]} */ inputs, /** @type {string} */ tip) =>
    h("label", { class: "iglens-field", title: tip }, h("span", { class: "iglens-field-label", text: label }), ...inputs);

  const form = h(
    "form",
    { class: "iglens-controls-form", novalidate: true },
    field(
      "target",
      [target, targetList],
      "Token whose probability is attributed: predicted (the model's top-1), next (the text's next token), or a token such as \" Paris\"",
    ),
    field("contrast", [contrast], "Optional: attribute p(target) \u2212 p(contrast) for this token"),
    field(
      "boundaries",
      [boundaries, custom],
      "Segment boundaries: every block, every K blocks, each block's attention and MLP halves (sublayer), or a list such as 0,10,20,30",
    ),
    field("estimator", [estimator], "prediction-aware: exact, credits observed changes; Riemann: classic IG gradient sum (has discretization error)"),
    field("steps", [steps], "Interpolation steps m per segment (>1 shows the path inside each segment)"),
    apply,
  );
  const el = h(
    "section",
    { class: "iglens-controls", "aria-label": "Recompute" },
    form,
    h("div", { class: "iglens-progress-row" }, status, progress, cancel),
    error,
  );
  return { target, contrast, boundaries, custom, estimator, steps, apply, status, progress, cancel, error, form, el };
}

/**
 * @param {import("./context.js").Context} ctx
 */
export function createControls(ctx) {
  const { target, contrast, boundaries, custom, estimator, steps, apply, status, progress, cancel, error, form, el } = controlsDom();

  function prefill() {
    const r = ctx.result;
    const req = ctx.model.get("request");
    const src = r ? r.controls : req && typeof req === "object" ? req : null;
    if (!src) return;
    target.value = String(src.target ?? "predicted");
    contrast.value = String(src.contrast ?? "");
    const spec = String(src.boundaries ?? "all");
    const preset = BOUNDARY_PRESETS.some(([v]) => v === spec && v !== "custom") ? spec : spec === "" || spec === "every" ? "all" : "custom";
    boundaries.value = preset;
    custom.value = preset === "custom" ? spec : "";
    custom.hidden = preset !== "custom";
    if (ESTIMATORS.some(([v]) => v === src.estimator)) estimator.value = String(src.estimator);
    steps.value = String(Math.max(1, Number(src.steps) || 1));
    if (r) steps.max = String(r.maxSteps); // the request's limit, from Python
  }

  function sync() {
    const interactive = !!ctx.model.get("interactive");
    el.hidden = !interactive;
    const busy = !!ctx.model.get("busy");
    apply.disabled = busy;
    el.classList.toggle("iglens-busy", busy);
    el.setAttribute("aria-busy", busy ? "true" : "false");
    const p = Number(ctx.model.get("progress"));
    const known = busy && Number.isFinite(p) && p >= 0;
    progress.hidden = !known;
    if (known) progress.value = p;
    else progress.removeAttribute("value");
    cancel.hidden = !busy;
    status.textContent = busy ? (known ? `Computing\u2026 ${Math.round(100 * p)}%` : "Computing\u2026") : "";
    const msg = ctx.model.get("error");
    error.hidden = !msg;
    error.textContent = msg ? String(msg) : "";
  }

  const offs = [
    listen(boundaries, "change", () => {
      custom.hidden = boundaries.value !== "custom";
      if (!custom.hidden) custom.focus();
    }),
    listen(form, "submit", (e) => {
      e.preventDefault();
      if (ctx.model.get("busy")) return;
      const request = makeRequest({
        target: target.value,
        contrast: contrast.value,
        boundaries: boundaries.value,
        custom: custom.value,
        estimator: estimator.value,
        steps: steps.value,
      });
      // A counter makes every Apply a change, so applying the same settings again still recomputes.
      const previous = ctx.model.get("request");
      ctx.setTrait("request", { ...request, _n: ((previous && previous._n) || 0) + 1 });
    }),
    listen(cancel, "click", () => {
      const previous = ctx.model.get("cancel_request");
      ctx.setTrait("cancel_request", { _n: ((previous && previous._n) || 0) + 1 });
      status.textContent = "Cancelling\u2026";
    }),
    // keys typed in the form must not drive the strip/heatmap shortcuts
    listen(form, "keydown", (e) => e.stopPropagation()),
  ];

  prefill();
  sync();
  return {
    el,
    prefill,
    sync,
    destroy() {
      offs.forEach((off) => off());
    },
  };
}
