/**
 * The student view (`view = "lesson"`): one answer and one position in plain words. The
 * header names the answer and lists the output's top 5 guesses at the selected position in
 * percent; the curve draws the answer's probability after each block (and the position's next
 * token, and the `versus` answer to compare with); the lens column lists each block's top
 * guesses there. A walk moves a cursor through the blocks — a slider, a play button, ←/→ and
 * space when the view has focus — and tells one sentence per notable block (js/model/walk.js).
 * No estimator, steps, boundaries or head shares: those stay in the other views.
 * Token and answer texts are inserted as text only.
 * @module views/lesson
 */
import { h, clear, listen, showWholeLines } from "../../lib/dom.js";
import { formatToken, quoteToken } from "../../lib/tokens.js";
import { lessonData, lessonPosition } from "../../model/lesson.js";
import { notableBlocks, readout, stepCursor, playNext } from "../../model/walk.js";
import { fittedCurve } from "./curve.js";
import { lensColumn, guessChip } from "./column.js";
import { lessonExport } from "./export.js";
import { lessonNotes } from "./notes.js";
import { createPromptBox, createCompareBox } from "../prompt.js";
import { createGamePanel } from "../gates.js";

/** Milliseconds per block while the walk plays. */
export const PLAY_MS = 550;

/** @param {string} text @param {number} [maxLen] */
const chip = (text, maxLen = 24) => h("span", { class: "iglens-chip", title: quoteToken(text), text: formatToken(text, { maxLen }) });

/**
 * The header: the answer (or the next token) and the output's top guesses at the position.
 * @param {import("../../model/result.js").Result} r @param {import("../../model/lesson.js").Lesson} lesson
 */
function lessonHead(r, lesson) {
  const what = r.answer
    ? h("p", { class: "iglens-lesson-answer" }, h("span", { class: "iglens-lesson-key", text: "The model's answer" }), chip(r.answer.text, 60))
    : h(
        "p",
        { class: "iglens-lesson-answer" },
        h("span", { class: "iglens-lesson-key", text: "Next token after" }),
        h("span", { class: "iglens-chip", text: lesson.input }),
        lesson.target ? h("span", { class: "iglens-muted", text: "\u2192" }) : null,
        lesson.target ? h("span", { class: "iglens-chip", text: lesson.target }) : null,
      );
  const top = h(
    "div",
    { class: "iglens-lesson-top5", "data-lesson-top5": lesson.position },
    h("span", { class: "iglens-lesson-key", text: `Its guesses after \u201c${lesson.input}\u201d` }),
    h("ol", { class: "iglens-lesson-top-list" }, ...lesson.top.map((g) => h("li", {}, guessChip(g)))),
  );
  return h("div", { class: "iglens-lesson-head" }, what, top);
}

/** The legend's text of a series. @param {import("../../model/lesson.js").LessonSeries} c @param {import("../../model/lesson.js").Lesson} lesson */
function legendText(c, lesson) {
  const t = formatToken(c.label, { maxLen: 40 });
  if (c.key === "answer") return `the whole answer \u201c${t}\u201d (all its tokens)`;
  if (c.key === "versus") return `compare with \u201c${t}\u201d`;
  return `the next token ${t} after \u201c${lesson.input}\u201d`;
}

/** @param {import("../../model/lesson.js").Lesson} lesson */
function legend(lesson) {
  return h(
    "div",
    { class: "iglens-chart-legend iglens-lesson-legend" },
    ...lesson.series.map((c, q) =>
      h(
        "span",
        { class: "iglens-key", "data-series": c.key },
        h("span", { class: `iglens-key-swatch iglens-lesson-swatch iglens-lesson-${c.key}${q ? "" : " iglens-lesson-subject"}`, "aria-hidden": "true" }),
        h("span", { text: legendText(c, lesson) }),
      ),
    ),
  );
}

/** The walk's controls: play, the block slider and the readout. @param {number} k */
function walkBar(k) {
  const play = h("button", { type: "button", class: "iglens-lesson-play", "data-action": "lesson-play", "aria-pressed": "false", text: "\u25b6 play" });
  const slider = h("input", { type: "range", class: "iglens-lesson-slider", name: "lesson-block", min: 0, max: k, step: 1, "aria-label": "block" });
  const out = h("output", { class: "iglens-lesson-readout", "aria-live": "polite" });
  return { el: h("div", { class: "iglens-lesson-walk" }, play, slider, out), play, slider, out };
}

/** The notable blocks' sentences, each a button to its block. @param {import("../../model/walk.js").WalkEvent[]} events */
function story(events) {
  if (!events.length) return h("p", { class: "iglens-muted iglens-lesson-story", text: "Nothing changes much from block to block." });
  return h(
    "ol",
    { class: "iglens-lesson-story", "aria-label": "what happens, block by block" },
    ...events.map((e) =>
      h("li", {}, h("button", { type: "button", class: "iglens-lesson-event", "data-block": e.L, "data-kinds": e.kinds.join(" "), text: e.sentence })),
    ),
  );
}

/** @param {import("../../model/result.js").Result} r */
const glossary = (r) =>
  h("p", {
    class: "iglens-lesson-glossary iglens-muted",
    text:
      `block: one of the model's ${r.nBlocks} layers \u00b7 probability: how sure the model is \u00b7 ` +
      "the model's guess: the token it would write next if it stopped after that block",
  });

/**
 * @param {import("../context.js").Context} ctx
 */
export function createLesson(ctx) {
  const el = h("section", { class: "iglens-lesson", "data-view": "lesson", tabindex: 0, "aria-label": "Lesson: the answer, block by block" });
  /** the walk's boundary (-1: not placed yet, the output) */
  let L = -1;
  let timer = /** @type {ReturnType<typeof setInterval>|null} */ (null);
  /** @type {{lesson: import("../../model/lesson.js").Lesson, curve: ReturnType<typeof fittedCurve>, column: ReturnType<typeof lensColumn>,
   *   walk: ReturnType<typeof walkBar>, events: import("../../model/walk.js").WalkEvent[], storyEl: HTMLElement,
   *   notes: ReturnType<typeof lessonNotes>}|null} */
  let shown = null;
  // a new question, and the answer to compare with (with a kernel): built once, so what is
  // typed survives the view's rebuilds
  const ask = createPromptBox(ctx, { placeholder: "Ask the model a question\u2026", hideStatic: true });
  const versus = createCompareBox(ctx);
  // which block: the block-gate game of the lesson's position, in a class's words
  const game = createGamePanel(ctx, { plain: true });

  function build() {
    shown?.notes.destroy();
    shown?.curve.destroy();
    clear(el);
    shown = null;
    const r = ctx.result;
    if (!r) return;
    const lesson = lessonData(r, lessonPosition(r, ctx.selected()));
    if (L < 0 || L > r.k) L = r.k;
    const walk = walkBar(r.k);
    const events = notableBlocks(lesson.walk);
    const storyEl = story(events);
    const column = lensColumn(lesson);
    const left = h("div", { class: "iglens-lesson-left" });
    const notes = lessonNotes(ctx, lesson, () => L);
    const head = lessonHead(r, lesson);
    head.append(notes.editor); // a corner of the header: it takes no line of the view
    el.append(head, notes.callouts, h("div", { class: "iglens-lesson-body" }, left, column.el));
    const W = Math.max(280, (left.clientWidth || 560) - 4);
    // drawn at its column's width, and again at every new width (a resize, theme or mode change)
    const curve = fittedCurve({ r, series: lesson.series, H: 170, cursor: () => L, label: "the answer's probability after each block, in percent" });
    const figure = lesson.series.length
      ? curve.el
      : h("p", { class: "iglens-muted iglens-lesson-nocurve", text: "The lens values here are differences (a contrast): no probability to draw." });
    game.show(r, lesson.position, W, ctx.theme === "dark");
    left.append(figure, legend(lesson), walk.el, storyEl, game.el, glossary(r));
    curve.fit();
    el.querySelector(".iglens-lesson-head")?.append(exporter.el); // PNG / SVG for a slide: a corner of the header, no line of its own
    el.prepend(ask.el); // the question first
    left.insertBefore(versus.el, walk.el); // under the curve's legend
    versus.prefill();
    el.setAttribute("data-position", String(lesson.position));
    shown = { lesson, curve, column, walk, events, storyEl, notes };
    setCursor(L, L !== r.k); // the walk's list opens at its first step, unless the walk is under way
  }

  /** Move the walk to boundary `next`: the curve's cursor, the column's row, the readout, the list of steps (`follow`). @param {number} next @param {boolean} [follow] */
  function setCursor(next, follow = true) {
    if (!shown || !ctx.result) return;
    L = stepCursor(next, 0, ctx.result.k);
    const { curve, column, walk, lesson, storyEl } = shown;
    el.setAttribute("data-cursor", String(L));
    curve.setCursor(L);
    column.setCursor(L);
    walk.slider.value = String(L);
    shown.notes.setCursor(L);
    const o = readout(lesson.walk, L);
    walk.out.textContent = [o.label, `the model's guess: ${o.guess}`, ...o.values.map((v) => `${v.name} ${v.text}`)].join(" \u00b7 ");
    let step = follow ? null : storyEl.firstElementChild;
    for (const b of storyEl.querySelectorAll("[data-block]")) {
      const on = Number(b.getAttribute("data-block")) === L;
      if (on) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
      if (on && follow) step = b.parentElement;
    }
    showWholeLines(storyEl, step);
  }

  function pause() {
    if (timer) clearInterval(timer);
    timer = null;
    if (shown) {
      shown.walk.play.setAttribute("aria-pressed", "false");
      shown.walk.play.textContent = "\u25b6 play";
    }
  }

  function play() {
    const r = ctx.result;
    if (!r || !shown) return;
    const first = playNext(L, r.k, true);
    if (first === null) return;
    setCursor(first);
    shown.walk.play.setAttribute("aria-pressed", "true");
    shown.walk.play.textContent = "\u275a\u275a pause";
    timer = setInterval(() => {
      const next = ctx.result && !el.hidden && el.isConnected ? playNext(L, ctx.result.k, false) : null;
      if (next === null) pause();
      else setCursor(next);
    }, PLAY_MS);
  }

  const toggle = () => (timer ? pause() : play());
  const exporter = lessonExport(ctx, () => shown?.lesson ?? null, legendText);
  const offs = lessonListeners(el, {
    setCursor: (next) => (pause(), setCursor(next)),
    step: (d) => (pause(), setCursor(L + d)),
    toggle,
    end: () => ctx.result?.k ?? 0,
  });
  const onNotes = () => shown?.notes.update();
  ctx.model.on("change:notes", onNotes);

  return {
    el,
    /** The walk's boundary now. */
    cursor: () => L,
    /** Playing now. */
    playing: () => timer !== null,
    play,
    pause,
    setCursor,
    /** New result or theme, or shown again. */
    full() {
      pause();
      if (ctx.result && L > ctx.result.k) L = -1;
      build();
    },
    /** A new width: the curve drawn at it (its own observer does so too), the steps' list whole again. */
    resize() {
      shown?.curve.fit();
      if (shown) showWholeLines(shown.storyEl);
    },
    /** The selection moved: the lesson is about the new position (the walk stays at its block). */
    updateSelection() {
      const r = ctx.result;
      if (r && shown && shown.lesson.position !== lessonPosition(r, ctx.selected())) build();
    },
    destroy() {
      pause();
      ask.destroy();
      versus.destroy();
      game.destroy();
      shown?.notes.destroy();
      shown?.curve.destroy();
      ctx.model.off("change:notes", onNotes);
      offs.forEach((off) => off());
      exporter.destroy();
    },
  };
}

/**
 * The view's listeners: the slider, the play button, a click on a block (a row of the
 * column, a sentence), and the keys when the view has focus (←/→ step, Home/End, space plays).
 * @param {HTMLElement} el
 * @param {{setCursor: (L: number) => void, step: (d: number) => void, toggle: () => void, end: () => number}} v
 * @returns {Array<() => void>}
 */
function lessonListeners(el, v) {
  const isSlider = (/** @type {EventTarget|null} */ t) => t instanceof HTMLInputElement && t.name === "lesson-block";
  return [
    listen(el, "input", (e) => {
      if (isSlider(e.target)) v.setCursor(Number(/** @type {HTMLInputElement} */ (e.target).value));
    }),
    listen(el, "click", (e) => {
      const t = e.target instanceof Element ? e.target.closest("button") : null;
      if (!t || !el.contains(t)) return;
      if (t.getAttribute("data-action") === "lesson-play") v.toggle();
      else if (t.hasAttribute("data-block")) v.setCursor(Number(t.getAttribute("data-block")));
    }),
    listen(el, "keydown", (/** @type {KeyboardEvent} */ e) => {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      const slider = isSlider(e.target);
      const t = e.target;
      // typing in a field (the note editor, a text box) is not the walk's
      if (t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || (t instanceof HTMLInputElement && !slider)) return;
      if (e.key === " " || e.key === "Spacebar") {
        const b = e.target instanceof Element ? e.target.closest("button") : null;
        if (b && b.getAttribute("data-action") === "lesson-play") return; // its own click toggles
        e.preventDefault();
        v.toggle();
        return;
      }
      // the slider's keys are the walk's too, stepped here: a notebook's own key handlers (JupyterLab's
      // command mode) would otherwise take them from the focused slider before it steps
      const d = e.key === "ArrowRight" || (slider && e.key === "ArrowUp") ? 1 : e.key === "ArrowLeft" || (slider && e.key === "ArrowDown") ? -1 : 0;
      if (d) v.step(d);
      else if (e.key === "Home") v.setCursor(0);
      else if (e.key === "End") v.setCursor(v.end());
      else return;
      e.preventDefault();
      e.stopPropagation(); // the strip's and tabs' arrow keys are not this view's
    }),
  ];
}
