/**
 * The view switcher: tabs "heatmap | grid | compare | lesson" over the main view slot (the
 * `view` trait, so Python and exported pages choose the opening view), and the export buttons
 * (`data-export="png"` / `data-export="svg"`) that download the shown view as a figure. The
 * student view ("lesson") has its own slide buttons (views/lesson/export.js: these are hidden
 * there) and puts the root in
 * lesson mode (`.iglens-lesson-mode`: the dashboard's controls, detail and answers panels
 * hidden, widget.css).
 *
 * Only the shown view draws: the others rebuild when they are shown again.
 * @module views/switcher
 */
import { h, listen } from "../lib/dom.js";
import { VIEWS } from "../model/comparison.js";
import { createGrid } from "./grid/index.js";
import { createCompare } from "./compare/index.js";
import { createLesson } from "./lesson/index.js";
import { lensGridName } from "../model/lens-name.js";
import { compareFigure } from "../figures/compare.js";
import { withDetail } from "../figures/detail.js";
import { renderFigure, download, downloadsBlocked, figureFileName } from "../figures/download.js";
import { gridFigure } from "../figures/grid.js";
import { heatmapFigure, heatmapRows } from "../figures/heatmap.js";
import { titleLines } from "../figures/titles.js";
import { toBase64 } from "../model/codec.js";

/** How long "saved …" stays beside the export buttons. */
const SAVED_MS = 5000;
/**
 * Pictures sent to Python to write, for a frame that blocks downloads (the `save` command);
 * `say` shows where Python saved each, or why not. Without a kernel, the note names
 * `w.save_png` / `w.save_svg`.
 * @param {import("./context.js").Context} ctx @param {(text: string) => void} say
 */
function savesThroughPython(ctx, say) {
  /** The save awaiting its answer: its command id and file. */
  let saving = /** @type {{id: string, file: string}|null} */ (null);
  const off = ctx.commands.listen((event) => {
    if (event.type !== "answer" || !saving || event.sent.id !== saving.id) return;
    const { file } = saving;
    saving = null;
    const { answer } = event;
    say(
      answer.ok
        ? `${BLOCKED_NOTE} Python saved ${file} in the kernel's working folder`
        : `${BLOCKED_NOTE} Python could not save ${file}: ${answer.error?.message}`,
    );
  });
  return {
    off,
    /** @param {Blob} blob @param {string} file @param {"png"|"svg"} kind */
    async save(blob, file, kind) {
      const id = ctx.commands.kernel() === "live" ? ctx.command("save", { name: file, data: toBase64(await blobBytes(blob)) }) : null;
      saving = id ? { id, file } : null;
      say(id ? `${BLOCKED_NOTE} sending ${file} to Python\u2026` : `${BLOCKED_NOTE} in a cell, w.save_${kind}("${file}") writes the picture`);
    },
  };
}

/** A Blob's bytes (FileReader: older engines and jsdom lack `Blob.arrayBuffer`). @param {Blob} blob @returns {Promise<ArrayBuffer>} */
function blobBytes(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(/** @type {ArrayBuffer} */ (reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsArrayBuffer(blob);
  });
}

/** The note of a frame that blocks downloads (kept on screen: the file is not where a download goes). */
export const BLOCKED_NOTE = "This frame blocks downloads:";

const TAB_LABELS = { heatmap: "Heatmap", grid: "Logit-lens grid", compare: "Compare", lesson: "Lesson" };

/** @param {string} text */
const capitalized = (text) => text.charAt(0).toUpperCase() + text.slice(1);

/**
 * @typedef {object} HeatmapLike the heatmap view's surface the switcher uses
 * @property {HTMLElement} el
 * @property {() => void} full
 */

/**
 * The tabs, the export buttons and their status, over the slot of the views.
 * @param {import("./context.js").Context} ctx @param {HTMLElement[]} viewEls
 */
function switcherDom(ctx, viewEls) {
  const tabs = VIEWS.map((name) =>
    h("button", {
      type: "button",
      role: "tab",
      class: "iglens-tab",
      "data-view-tab": name,
      id: `${ctx.root.id || "iglens"}-tab-${name}`,
      "aria-selected": "false",
      text: TAB_LABELS[name],
    }),
  );
  const status = h("span", { class: "iglens-export-status iglens-muted", role: "status" });
  const exportButtons = /** @type {const} */ (["png", "svg"]).map((kind) =>
    h("button", {
      type: "button",
      class: "iglens-export",
      "data-export": kind,
      title: `Download the shown view as ${kind.toUpperCase()} (with a title: model, prompt, target, estimator)`,
      text: `\u2913 ${kind.toUpperCase()}`,
    }),
  );
  const bar = h(
    "div",
    { class: "iglens-viewbar" },
    h("div", { class: "iglens-tabs", role: "tablist", "aria-label": "View" }, ...tabs),
    h("span", { class: "iglens-spacer" }),
    status,
    ...exportButtons,
  );
  const slot = h("div", { class: "iglens-view-slot" }, ...viewEls);
  const el = h("div", { class: "iglens-views" }, bar, slot);
  return { tabs, status, exportButtons, el };
}

/**
 * What exporting view `name` draws, and the figure's title.
 * @param {string} name @param {import("../model/result.js").Result} r
 * @param {ReturnType<typeof createGrid>} grid @param {ReturnType<typeof createCompare>} compare
 * @param {"light"|"dark"} theme @param {number} sel the selected position
 * @returns {{draw: (make: any) => any, title: string}}
 */
function figureFor(name, r, grid, compare, theme, sel) {
  /** @type {(make: any) => any} */
  let draw;
  let title = titleLines(r, name).join(" \u00b7 ");
  if (name === "grid") {
    const cols = grid.visible() ?? [Math.max(0, sel - 6), Math.min(r.T - 1, Math.max(0, sel - 6) + 15)];
    draw = (make) => gridFigure(make, r, { theme, columns: cols, mode: grid.mode(), selected: sel });
    title = titleLines(r, lensGridName(r.lens)).join(" \u00b7 ");
  } else if (name === "compare") {
    const cmp = compare.comparison();
    draw = (make) => compareFigure(make, cmp, { theme, pins: compare.pins(), y: compare.yMode(), selected: sel });
    title = titleLines(r, cmp.multi ? "comparison" : "pinned tokens").join(" \u00b7 ");
  } else {
    draw = (make) => heatmapFigure(make, r, { theme, rows: heatmapRows(r.T, sel), selected: sel });
    title = titleLines(r, "layer heatmap").join(" \u00b7 ");
  }
  return { draw, title };
}

/**
 * @param {import("./context.js").Context} ctx
 * @param {HeatmapLike} heatmap the existing heatmap view (created by app.js)
 */
export function createViews(ctx, heatmap) {
  heatmap.el.setAttribute("data-view", "heatmap"); // like the grid's and the compare view's roots
  const grid = createGrid(ctx);
  const compare = createCompare(ctx);
  const lesson = createLesson(ctx);
  /** @type {Record<string, {el: HTMLElement, full: () => void, resize?: () => void, updateSelection?: (scroll: boolean) => void}>} */
  const views = { heatmap, grid, compare, lesson };
  const { tabs, status, exportButtons, el } = switcherDom(ctx, [heatmap.el, grid.el, compare.el, lesson.el]);
  /** which views must rebuild before they are shown */
  const stale = new Set(["grid", "compare", "lesson"]);
  let current = "";

  const active = () => {
    const v = ctx.model.get("view");
    return VIEWS.includes(v) ? v : "heatmap";
  };

  /** Show the active view (and draw it when `draw`: not before the first paint). */
  function show(draw = true) {
    const name = active();
    el.setAttribute("data-active-view", name);
    for (const t of tabs) {
      const on = t.getAttribute("data-view-tab") === name;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
    }
    for (const [n, v] of Object.entries(views)) v.el.hidden = n !== name;
    ctx.root.classList.toggle("iglens-lesson-mode", name === "lesson");
    for (const b of exportButtons) b.hidden = name === "lesson";
    if (name !== "lesson") lesson.pause();
    const changed = name !== current;
    current = name;
    if (draw && (changed || stale.has(name))) {
      stale.delete(name);
      if (ctx.result) views[name].full();
    }
  }

  let sayTimer = /** @type {ReturnType<typeof setTimeout>|null} */ (null);
  /** The export's status (its full text also as the title: a narrow bar cuts it); cleared after `ms`. @param {string} text @param {number} [ms] */
  function say(text, ms = 0) {
    if (sayTimer) clearTimeout(sayTimer);
    sayTimer = null;
    status.textContent = text;
    status.title = text;
    if (ms > 0) sayTimer = setTimeout(() => say(""), ms);
  }

  const viaPython = savesThroughPython(ctx, say);
  /** The shown view as a figure, downloaded (to Python where the frame blocks it). @param {"png"|"svg"} kind */
  async function exportView(kind) {
    const r = ctx.result;
    if (!r) return;
    const name = active();
    const theme = ctx.theme;
    const sel = ctx.selected();
    const { draw, title } = figureFor(name, r, grid, compare, theme, sel);
    say("exporting\u2026");
    try {
      // the detail panel's charts of the selected token below the view (the curve for a slide)
      const blob = await renderFigure(kind, withDetail(draw, r, { theme, selected: sel }), title);
      const file = figureFileName(name, r.modelName || r.family, kind);
      if (downloadsBlocked()) return await viaPython.save(blob, file, kind);
      download(blob, file, ctx.root);
      say(`saved ${file}`, SAVED_MS);
    } catch (err) {
      say(`could not export: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  const onView = () => show(true);
  const onPins = () => {
    if (active() === "compare") compare.full();
    else stale.add("compare");
  };
  const onComparison = onPins;
  ctx.model.on("change:view", onView);
  ctx.model.on("change:pinned", onPins);
  ctx.model.on("change:comparison", onComparison);

  const offs = [
    ...tabs.map((t) => listen(t, "click", () => ctx.setTrait("view", t.getAttribute("data-view-tab")))),
    ...tabs.map((t) =>
      listen(t, "keydown", (/** @type {KeyboardEvent} */ e) => {
        const q = VIEWS.indexOf(/** @type {any} */ (t.getAttribute("data-view-tab")));
        const next = e.key === "ArrowRight" ? (q + 1) % VIEWS.length : e.key === "ArrowLeft" ? (q + VIEWS.length - 1) % VIEWS.length : -1;
        if (next < 0) return;
        e.preventDefault();
        ctx.setTrait("view", VIEWS[next]);
        tabs[next].focus();
      }),
    ),
    ...exportButtons.map((b) =>
      listen(b, "click", () => {
        exportView(/** @type {any} */ (b.getAttribute("data-export")));
      }),
    ),
  ];

  show(false);

  return {
    el,
    grid,
    compare,
    lesson,
    /** The shown view's name. */
    active,
    exportView,
    /** New result or theme: the shown grid/compare view rebuilds, the hidden ones later. */
    full() {
      stale.add("grid");
      stale.add("compare");
      stale.add("lesson");
      // the grid's tab names the result's lens: "Logit-lens grid", "Shortcut-lens grid" …
      const gridTab = tabs[VIEWS.indexOf("grid")];
      if (gridTab) gridTab.textContent = ctx.result ? capitalized(lensGridName(ctx.result.lens)) : TAB_LABELS.grid;
      const name = active();
      if (name !== "heatmap" && stale.has(name)) {
        stale.delete(name);
        views[name].full();
      }
    },
    resize() {
      const name = active();
      if (name === "grid") grid.resize();
      else if (name === "compare") compare.resize();
      else if (name === "lesson") lesson.resize();
      for (const other of ["grid", "compare", "lesson"]) if (other !== name) stale.add(other);
    },
    /** Selection or hover changed. @param {boolean} scroll */
    updateSelection(scroll) {
      const name = active();
      if (name === "grid") grid.updateSelection(scroll);
      else if (name === "compare") compare.updateSelection(scroll);
      else if (name === "lesson") lesson.updateSelection();
    },
    destroy() {
      ctx.model.off("change:view", onView);
      ctx.model.off("change:pinned", onPins);
      ctx.model.off("change:comparison", onComparison);
      offs.forEach((off) => off());
      viaPython.off();
      if (sayTimer) clearTimeout(sayTimer);
      grid.destroy();
      compare.destroy();
      lesson.destroy();
    },
  };
}
