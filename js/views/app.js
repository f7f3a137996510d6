/**
 * The composite view: header, help, controls, token strip, layer heatmap and detail panel,
 * all driven by one model (selection and hover are traits, so linking works the same in
 * Jupyter and in the static HTML export).
 * @module app
 */
import { h, listen } from "../lib/dom.js";
import { createContext, loadResult, loadComponents, loadAblation } from "./context.js";
import { createStrip } from "./strip/index.js";
import { createHeatmap } from "./heatmap/index.js";
import { createDetail } from "./detail/index.js";
import { createControls } from "./controls.js";
import { createHelp } from "./help.js";
import { createAnswers } from "./answers/index.js";
import { createViews } from "./switcher.js";
import { parseCssColor, luminance } from "../lib/colorscale.js";
import { formatToken } from "../lib/tokens.js";
import { lensFact } from "../model/lens-name.js";

/**
 * Light or dark, from the first opaque background at or above `el` (what the user sees),
 * else the OS preference.
 * @param {HTMLElement} el
 * @returns {"light"|"dark"}
 */
export function detectTheme(el) {
  const forced = el.closest?.("[data-iglens-theme]")?.getAttribute("data-iglens-theme");
  if (forced === "dark" || forced === "light") return forced;
  /** @type {Element|null} */
  let node = el;
  while (node) {
    const c = parseCssColor(getComputedStyle(node).backgroundColor);
    if (c && c.alpha > 0.5) return luminance(c.rgb) < 0.2 ? "dark" : "light";
    node = node.parentElement;
  }
  try {
    if (typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches) return "dark";
  } catch {
    /* no media queries */
  }
  return "light";
}

/**
 * The widget's parts, built and placed under `root`.
 * @param {import("./context.js").Context} ctx @param {HTMLElement} root
 */
function buildParts(ctx, root) {
  const help = createHelp(ctx.model);
  const titleMeta = h("span", { class: "iglens-meta" });
  /** @type {{heatmap: ReturnType<typeof createHeatmap>, detail: ReturnType<typeof createDetail>, strip: ReturnType<typeof createStrip>, views: ReturnType<typeof createViews>}|null} */
  let redraw = null;
  // a div, not a <header>: inside the widget's region a banner landmark would not be top-level
  const head = h(
    "div",
    { class: "iglens-head" },
    h("span", { class: "iglens-logo", "aria-hidden": "true" }),
    h("span", { class: "iglens-title", text: "IG-Lens" }),
    titleMeta,
    h("span", { class: "iglens-spacer" }),
    presentButton(root, () => {
      if (!redraw) return;
      redraw.heatmap.full();
      redraw.views.full(); // the shown grid or compare view lays out again (a shorter grid)
      redraw.detail.render();
      redraw.heatmap.updateSelection(true);
      redraw.strip.scrollToSelected(); // the chips changed size: the selected one back in the strip's view
    }),
    help.button,
  );
  const controls = createControls(ctx);
  const notice = h("div", { class: "iglens-notice", role: "status" });
  const strip = createStrip(ctx);
  const heatmap = createHeatmap(ctx);
  const detail = createDetail(ctx);
  const views = createViews(ctx, heatmap); // tabs: heatmap | grid | compare, and the export buttons
  redraw = { heatmap, detail, strip, views };
  const main = h("div", { class: "iglens-main" }, views.el, detail.el);
  const answers = createAnswers(ctx); // the span ledger and answer vs answer, under the main view
  root.append(head, help.panel, controls.el, notice, strip.el, main, answers.el);
  return { help, titleMeta, controls, notice, strip, heatmap, detail, views, main, answers };
}

/** @typedef {ReturnType<typeof buildParts>} Parts */

/**
 * Presentation mode: text of at least 14 px everywhere (a projector), toggled in the header.
 * @param {HTMLElement} root @param {() => void} redraw
 */
function presentButton(root, redraw) {
  const b = h(
    "button",
    {
      type: "button",
      class: "iglens-present-toggle",
      "data-action": "present",
      "aria-pressed": "false",
      title: "Presentation mode: larger text for a projector",
    },
    h("span", { text: "Aa" }),
    h("span", { class: "iglens-present-label", text: "present" }),
  );
  b.addEventListener("click", () => {
    const on = !root.classList.contains("iglens-present");
    root.classList.toggle("iglens-present", on);
    b.setAttribute("aria-pressed", on ? "true" : "false");
    redraw();
  });
  return b;
}

/** The header's line about the result, the notice, what is hidden without one. @param {import("./context.js").Context} ctx @param {Parts} p */
function showMeta(ctx, p) {
  const r = ctx.result;
  /** @type {Array<[string, boolean]>} each part and whether it is technical (hidden in the student view) */
  const parts = [];
  if (r) {
    if (r.modelName) parts.push([r.modelName, false]);
    parts.push([`${r.nBlocks} blocks`, false]);
    parts.push([`${r.T} positions`, true]);
    // the controls' text through the token formatter: leading spaces show as \u2423
    const tok = (/** @type {string} */ t) => formatToken(t, { maxLen: 40 });
    parts.push([`target: ${tok(r.controls.target)}` + (r.hasContrast && r.controls.contrast ? ` vs ${tok(r.controls.contrast)}` : ""), true]);
    const lens = lensFact(r.lens); // "lens: shortcut" under a fitted lens; nothing under the logit lens
    if (lens) parts.push([lens, false]);
    if (r.k !== r.nBlocks) parts.push([`${r.k} segments`, true]);
    parts.push([r.estimator === "riemann" ? `Riemann, m=${r.steps}` : `m=${r.steps}`, true]);
  }
  // one span per part: a narrow header wraps between parts instead of cutting one
  p.titleMeta.replaceChildren(
    ...parts.map(([part, tech], q) => h("span", { class: "iglens-meta-part" + (tech ? " iglens-meta-tech" : ""), text: (q ? " \u00b7 " : "") + part })),
  );
  p.help.update(r);
  p.notice.hidden = !!r;
  p.notice.textContent = r ? "" : ctx.resultError ? `Could not read the result: ${ctx.resultError}` : "No attribution to show yet.";
  p.strip.el.hidden = !r;
  p.main.hidden = !r;
}

/** Light or dark under root now; true when that changed. @param {HTMLElement} root @param {import("./context.js").Context} ctx */
function applyTheme(root, ctx) {
  const theme = detectTheme(root);
  root.classList.toggle("iglens-dark", theme === "dark");
  root.style.colorScheme = theme;
  if (theme !== ctx.theme) {
    ctx.theme = theme;
    return true;
  }
  return false;
}

/** @param {HTMLElement} root */
function layoutMode(root) {
  const w = root.clientWidth;
  root.classList.toggle("iglens-wide", w >= 940);
  root.classList.toggle("iglens-narrow", w > 0 && w < 560);
}

/**
 * model → views: the handler of each trait the views follow.
 * @param {import("./context.js").Context} ctx @param {import("./context.js").Model} model @param {Parts} p
 * @returns {Array<[string, () => void]>}
 */
function traitHandlers(ctx, model, p) {
  const { strip, heatmap, views, detail, controls } = p;
  const onResult = () => {
    ctx.result = loadResult(ctx, model.get("result"));
    loadComponents(ctx);
    loadAblation(ctx);
    ctx.segmentFocus = { index: -1, j: -1 };
    ctx.span = null; // a span of the previous result's positions means nothing in this one
    showMeta(ctx, p);
    strip.build();
    p.answers.render();
    controls.prefill();
    heatmap.full();
    views.full();
    detail.render();
    strip.scrollToSelected();
    heatmap.updateSelection(true);
  };
  const onSelection = () => {
    // a segment picked for another token does not carry over to the new one
    if (ctx.segmentFocus.index !== ctx.selected()) ctx.segmentFocus = { index: -1, j: -1 };
    strip.updateSelection(true);
    heatmap.updateSelection(true);
    views.updateSelection(true);
    detail.update();
  };
  const onHover = () => {
    strip.updateSelection(false);
    heatmap.updateSelection(false);
    views.updateSelection(false);
    detail.update();
  };
  const onColor = () => strip.recolor();
  const onControls = () => controls.sync();
  const onComponents = () => {
    loadComponents(ctx);
    detail.updateComponents();
  };
  const onInteractive = () => {
    controls.sync();
    detail.render(); // the heads' "computing…" or static hint; the causal check's button
  };
  const onAblation = () => {
    loadAblation(ctx);
    detail.render();
  };
  const onPath = () => detail.render();
  const onView = () => {
    // back from the student view: the panels it hid lay out again at their width
    if (model.get("view") === "lesson") return;
    detail.render();
    p.answers.render();
  };
  const onRunning = () => {
    controls.sync();
    detail.render(); // the causal check's busy state
  };
  return [
    ["change:result", onResult],
    ["change:selected", onSelection],
    ["change:hovered", onHover],
    ["change:color_by", onColor],
    ["change:interactive", onInteractive],
    ["change:components", onComponents],
    ["change:ablation", onAblation],
    ["change:running", onRunning],
    ["change:progress", onControls],
    ["change:path", onPath],
    ["change:view", onView],
  ];
}

/**
 * commands → views: what each answer (and the kernel's state, and a causal check sent)
 * redraws.
 * @param {Parts} p
 * @returns {(event: import("../model/commands.js").CommandEvent) => void}
 */
function commandHandler(p) {
  const { controls, detail } = p;
  return (event) => {
    if (event.type === "kernel") {
      controls.sync();
      detail.render();
      return;
    }
    const kind = event.sent.kind;
    if (kind === "recompute" || kind === "cancel") {
      if (event.type === "answer") controls.sync();
    } else if (kind === "ablation" || kind === "gates") {
      controls.sync(); // (a later request takes an earlier one's message away)
      detail.render();
    } else if (kind === "path" && event.type === "answer") detail.render();
    else if (kind === "components" && event.type === "answer") detail.updateComponents();
  };
}

/**
 * Resize + theme changes: lay out again when the width changes (and on the first attach,
 * read the real background), re-theme when the page's theme changes.
 * @param {HTMLElement} root @param {Parts} p @param {() => void} rethemeAll
 * @returns {() => void} cleanup
 */
function observePage(root, p, rethemeAll) {
  const { strip, heatmap, views, detail } = p;
  let lastW = -1;
  let opened = false;
  /** @type {ResizeObserver|null} */
  let ro = null;
  let rafId = 0;
  if (typeof ResizeObserver === "function") {
    ro = new ResizeObserver(() => {
      if (rafId) return;
      const run = () => {
        rafId = 0;
        const w = root.clientWidth;
        if (w === lastW) return;
        const first = lastW <= 0;
        lastW = w;
        if (w === 0) return; // detached or hidden: nothing to lay out until it is back
        layoutMode(root);
        if (first) rethemeAll(); // attached to the page now: the real background is known
        heatmap.resize(); // back in the page after a detach: redrawn at the view's own scroll offset
        if (!opened && w > 0) {
          // open on the selection, both views scrolled to it
          opened = true;
          strip.scrollToSelected();
          heatmap.centreSelection();
        }
        views.resize();
        detail.resize();
        p.answers.resize();
      };
      rafId = typeof requestAnimationFrame === "function" ? requestAnimationFrame(run) : (run(), 0);
    });
    ro.observe(root);
  }
  /** @type {MutationObserver|null} */
  let mo = null;
  if (typeof MutationObserver === "function" && typeof document !== "undefined") {
    mo = new MutationObserver(rethemeAll);
    for (const target of [document.documentElement, document.body].filter(Boolean)) {
      mo.observe(target, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name", "theme", "data-iglens-theme", "style"] });
    }
  }
  /** @type {MediaQueryList|null} */
  let mq = null;
  try {
    mq = typeof matchMedia === "function" ? matchMedia("(prefers-color-scheme: dark)") : null;
  } catch {
    mq = null;
  }
  mq?.addEventListener?.("change", rethemeAll);
  return () => {
    ro?.disconnect();
    mo?.disconnect();
    mq?.removeEventListener?.("change", rethemeAll);
    if (rafId && typeof cancelAnimationFrame === "function") cancelAnimationFrame(rafId);
  };
}

/**
 * anywidget render hook.
 * @param {{model: import("./context.js").Model, el: HTMLElement}} props
 * @returns {() => void} cleanup
 */
export function render({ model, el }) {
  const root = h("div", { class: "iglens-root", role: "region", "aria-label": "IG-Lens" });
  el.appendChild(root);
  const ctx = createContext(model, root);
  const p = buildParts(ctx, root);
  const { strip, heatmap, views, detail } = p;

  const onFocus = () => detail.updateComponents();
  ctx.focusListeners.add(onFocus);
  const onSpan = () => {
    strip.updateSpan();
    p.answers.render();
  };
  ctx.spanListeners.add(onSpan);
  const handlers = traitHandlers(ctx, model, p);
  for (const [ev, fn] of handlers) model.on(ev, fn);
  const offCommands = ctx.commands.listen(commandHandler(p));

  // first paint ----------------------------------------------------------------------------
  applyTheme(root, ctx);
  layoutMode(root);
  showMeta(ctx, p);
  strip.recolor();
  heatmap.full();
  views.full();
  detail.render();
  p.answers.render();

  const rethemeAll = () => {
    if (applyTheme(root, ctx)) {
      strip.recolor();
      heatmap.full();
      views.full();
      detail.render();
      p.answers.render();
    }
  };
  const unobserve = observePage(root, p, rethemeAll);
  ctx.commands.start(); // hello: is a kernel listening?

  const offs = [
    // Escape anywhere in the widget clears the span, else the selection (inputs stop their own keys).
    listen(root, "keydown", (e) => {
      if (e.key !== "Escape") return;
      if (ctx.span) ctx.setSpan(null);
      else if (ctx.selected() >= 0) ctx.select(-1);
      else return;
      e.preventDefault();
    }),
  ];

  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
    offCommands();
    ctx.focusListeners.delete(onFocus);
    ctx.spanListeners.delete(onSpan);
    offs.forEach((off) => off());
    unobserve();
    ctx.flush();
    ctx.dispose();
    strip.destroy();
    heatmap.destroy();
    views.destroy();
    detail.destroy();
    p.answers.destroy();
    p.controls.destroy();
    p.help.destroy();
    root.remove();
  };
}
