/**
 * Recompute controls (shown when the widget is `interactive`; live only while a kernel
 * answers, else disabled with a note), prefilled from the result's `controls`. Apply sends
 * the `recompute` command with `controls: {target, contrast, boundaries, estimator, steps, lens}`
 * (boundaries: "all", "every:K", "sublayer" or a custom list; lens: "logit", "shortcut",
 * "tuned", "jacobian", or the shown result's own lens to keep it); Python names it in `running`
 * while it runs, reports `progress`, and answers with a new `result` (or an error envelope,
 * shown in the error line). Cancel sends `cancel` naming the running command. Under the form,
 * the prompt box (js/views/prompt.js) asks a new question: the `ask` command.
 * @module views/controls
 */
import { h, listen } from "../lib/dom.js";
import { kernelNote, requestError } from "./kernel.js";
import { createPromptBox } from "./prompt.js";
import { LENS_OPTIONS, LENS_TIP, firstFitNote, fitStatus, isLogitLens, lensLabel } from "../model/lens-name.js";
import { formatToken } from "../lib/tokens.js";

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
 * Build the request from the form's current values (`lens`: the select's value, "logit" when
 * empty; left out when not given, which keeps the shown result's lens).
 * @param {{target: string, contrast: string, boundaries: string, custom: string, estimator: string, steps: string, lens?: string}} v
 */
export function makeRequest(v) {
  const steps = Math.max(1, Math.trunc(Number(v.steps)) || 1);
  /** @type {{target: string, contrast: string, boundaries: string, estimator: string, steps: number, lens?: string}} */
  const out = {
    target: v.target.trim() === "" ? "predicted" : v.target,
    contrast: v.contrast,
    boundaries: v.boundaries === "custom" ? v.custom.trim() : v.boundaries,
    estimator: v.estimator,
    steps,
  };
  if (v.lens !== undefined) out.lens = v.lens === "" ? "logit" : v.lens;
  return out;
}

/**
 * Fill the lens select: the logit lens and the fitted kinds, plus the shown result's own lens
 * when it is none of these (a saved lens: its value is what Python gave in `controls.lens`,
 * sent back to keep it; its label the result's name, formatted); selects the result's.
 * @param {HTMLSelectElement} select @param {import("../model/result.js").Result} r
 */
export function fillLensSelect(select, r) {
  const keep = r.controls.lens || r.lens;
  const known = LENS_OPTIONS.some(([v]) => v === keep) || isLogitLens(keep);
  const options = LENS_OPTIONS.map(([v, label]) => h("option", { value: v, text: label }));
  if (!known) {
    // text nodes only: the name and the path are untrusted
    options.push(h("option", { value: keep, text: `${lensLabel(r.lens)} (this result's lens)`, title: formatToken(keep, { maxLen: 200 }) }));
  }
  select.replaceChildren(...options);
  select.value = isLogitLens(keep) ? "logit" : keep;
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
  const lens = /** @type {HTMLSelectElement} */ (h("select", { name: "lens", class: "iglens-input", "aria-label": "lens", title: LENS_TIP }));
  for (const [v, label] of LENS_OPTIONS) lens.appendChild(h("option", { value: v, text: label }));
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
  const note = h("div", { class: "iglens-kernel-note iglens-muted", role: "status" });
  note.hidden = true;
  // before Apply: a fitted lens chosen that is not cached yet takes minutes to fit first
  const fitHint = h("div", { class: "iglens-fit-note iglens-muted", role: "note" });
  fitHint.hidden = true;

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
    field("lens", [lens], LENS_TIP),
    apply,
  );
  const el = h(
    "section",
    { class: "iglens-controls", "aria-label": "Recompute" },
    form,
    fitHint,
    note,
    h("div", { class: "iglens-progress-row" }, status, progress, cancel),
    error,
  );
  return { target, contrast, boundaries, custom, estimator, steps, lens, apply, status, progress, cancel, error, note, fitHint, form, el };
}

/**
 * @param {import("./context.js").Context} ctx
 */
export function createControls(ctx) {
  const { target, contrast, boundaries, custom, estimator, steps, lens, apply, status, progress, cancel, error, note, fitHint, form, el } = controlsDom();
  const promptBox = createPromptBox(ctx);
  el.append(promptBox.el); // after the form's own lines: a new question, not a recompute
  /** The recomputes this form's Apply sent (the compare box sends its own). */
  const applied = new Set();

  function prefill() {
    const src = ctx.result ? ctx.result.controls : null;
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
    if (ctx.result) {
      steps.max = String(ctx.result.maxSteps); // the request's limit, from Python
      fillLensSelect(lens, ctx.result);
    }
  }

  /** While this view's recompute switches to a fitted lens: its first use fits it (a while). */
  function fitNote() {
    const sent = ctx.commands.pending("recompute")?.fields?.controls?.lens;
    if (typeof sent !== "string" || isLogitLens(sent) || !ctx.result || sent === (ctx.result.controls.lens || ctx.result.lens)) return "";
    return ` (the ${lensLabel(sent)} lens is fitted on its first use, then cached)`;
  }

  /** The recompute running (Python's `running`, or this view's own, not answered yet). */
  const busyNow = () => ctx.running()?.command === "recompute" || !!ctx.commands.pending("recompute");

  function sync() {
    el.hidden = !ctx.model.get("interactive");
    const live = ctx.live();
    const busy = busyNow();
    const running = ctx.running();
    // without a kernel nothing here may look live: every field off, and the note says why
    for (const input of [target, contrast, boundaries, custom, estimator, steps, lens]) input.disabled = !live;
    apply.disabled = !live || busy || !!running;
    apply.title = !live ? kernelNote(ctx) : running && !busy ? "the causal check is running: wait for it" : "";
    note.hidden = live;
    note.textContent = live ? "" : kernelNote(ctx);
    note.setAttribute("data-kernel", ctx.commands.kernel());
    el.classList.toggle("iglens-busy", busy);
    el.classList.toggle("iglens-no-kernel", !live);
    el.setAttribute("aria-busy", busy ? "true" : "false");
    const p = Number(ctx.model.get("progress"));
    const known = busy && Number.isFinite(p) && p >= 0;
    progress.hidden = !known;
    if (known) progress.value = p;
    else progress.removeAttribute("value");
    cancel.hidden = !busy || !live;
    const fitting = busy ? fitStatus(ctx.model.get("running")?.fit) : null; // a lens fitted on first use: its phase, time left
    status.textContent = fitting ?? (busy ? (known ? `Computing\u2026 ${Math.round(100 * p)}%` : "Computing\u2026") + fitNote() : "");
    const hint = live && !busy && ctx.result ? firstFitNote(lens.value, ctx.result.controls.lens || ctx.result.lens, ctx.model.get("cached_lenses")) : null;
    fitHint.hidden = !hint;
    fitHint.textContent = hint ?? "";
    const msg = requestError(ctx.commands, "recompute", (sent) => applied.has(sent.id)); // this form's Apply only
    error.hidden = !msg;
    error.textContent = msg ?? "";
  }

  ctx.model.on("change:cached_lenses", sync);
  const offs = [
    () => ctx.model.off("change:cached_lenses", sync),
    listen(lens, "change", sync),
    listen(boundaries, "change", () => {
      custom.hidden = boundaries.value !== "custom";
      if (!custom.hidden) custom.focus();
    }),
    listen(form, "submit", (e) => {
      e.preventDefault();
      if (!ctx.live() || busyNow() || ctx.running()) return;
      const controls = makeRequest({
        target: target.value,
        contrast: contrast.value,
        boundaries: boundaries.value,
        custom: custom.value,
        estimator: estimator.value,
        steps: steps.value,
        lens: lens.value,
      });
      const id = ctx.command("recompute", { result_id: ctx.result ? ctx.result.id : "", controls });
      if (id) applied.add(id);
      sync();
    }),
    listen(cancel, "click", () => {
      // the running command (Python's `running`), else this view's own recompute
      const id = ctx.running()?.id ?? ctx.commands.pending("recompute")?.id;
      if (!id) return;
      ctx.command("cancel", { request_id: id });
      sync();
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
      promptBox.destroy();
    },
  };
}
