/**
 * The student view's slide export: two buttons (`data-lesson-export="png"` / `"svg"`) that
 * download the picture a teacher puts on a slide (figures/lesson.js `lessonFigure`: titled with
 * the prompt, the answer and the lens; the top guesses; the curves in percent), and a status.
 * The detail panel's curve has its own (views/detail/index.js, `curveFigure`).
 * @module views/lesson/export
 */
import { h, listen } from "../../lib/dom.js";
import { renderFigure, download, figureFileName } from "../../figures/download.js";
import { lessonSubject, lessonFigure } from "../../figures/lesson.js";
import { slideTitleLines } from "../../figures/titles.js";

/** How long "saved …" stays beside the buttons. */
const SAVED_MS = 5000;

/**
 * Buttons that export a figure as PNG or SVG, with a status line.
 * @param {{root: HTMLElement}} ctx where the download link is attached
 * @param {string} what the buttons' words ("the lesson", "this curve")
 * @param {string} attr the buttons' data attribute (`data-lesson-export`, `data-curve-export`)
 * @param {() => ({draw: (make: any) => any, title: string, view: string, model: string}|null)} figure what to draw now
 * @param {boolean} [label] the words beside the buttons (default true)
 * @returns {{el: HTMLElement, destroy: () => void}}
 */
export function slideExport(ctx, what, attr, figure, label = true) {
  const status = h("span", { class: "iglens-slide-export-status iglens-muted", role: "status" });
  let timer = /** @type {ReturnType<typeof setTimeout>|null} */ (null);
  const say = (/** @type {string} */ text, ms = 0) => {
    if (timer) clearTimeout(timer);
    timer = ms > 0 ? setTimeout(() => say(""), ms) : null;
    status.textContent = text;
    status.title = text;
  };
  const buttons = /** @type {const} */ (["png", "svg"]).map((kind) =>
    h("button", {
      type: "button",
      class: "iglens-export iglens-slide-export",
      [attr]: kind,
      title: `Download ${what} as ${kind.toUpperCase()} for a slide (titled: prompt, answer, lens)`,
      text: `\u2913 ${kind.toUpperCase()}`,
    }),
  );
  const offs = buttons.map((b, q) =>
    listen(b, "click", async () => {
      const f = figure();
      if (!f) return;
      const kind = q ? "svg" : "png";
      say("exporting\u2026");
      try {
        const blob = await renderFigure(kind, f.draw, f.title);
        const file = figureFileName(f.view, f.model, kind);
        download(blob, file, ctx.root);
        say(`saved ${file}`, SAVED_MS);
      } catch (err) {
        say(`could not export: ${err instanceof Error ? err.message : String(err)}`);
      }
    }),
  );
  // a group named for screen readers; the words beside the buttons only where there is room
  const el = h(
    "div",
    { class: "iglens-slide-export-bar", role: "group", "aria-label": `Download ${what} for a slide` },
    label ? h("span", { class: "iglens-muted", text: `${what} for a slide:` }) : null,
    ...buttons,
    status,
  );
  return {
    el,
    destroy: () => {
      offs.forEach((off) => off());
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * The student view's export bar: the lesson shown now as a slide.
 * @param {import("../context.js").Context} ctx
 * @param {() => import("../../model/lesson.js").Lesson|null} lesson the shown lesson
 * @param {(c: import("../../model/lesson.js").LessonSeries, lesson: import("../../model/lesson.js").Lesson) => string} legend the view's key text
 */
export function lessonExport(ctx, lesson, legend) {
  return slideExport(
    ctx,
    "the lesson",
    "data-lesson-export",
    () => {
      const r = ctx.result;
      const l = lesson();
      if (!r || !l) return null;
      const theme = ctx.theme;
      return {
        draw: (make) => lessonFigure(make, r, l, { theme, legend: (c) => legend(c, l) }),
        title: slideTitleLines(r, "lesson", lessonSubject(r, l)).join(" \u00b7 "),
        view: "lesson",
        model: r.modelName || r.family,
      };
    },
    false,
  );
}
