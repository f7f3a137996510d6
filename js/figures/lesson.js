/**
 * The student view as a slide (PNG / SVG).
 * @module figures/lesson
 */
import { formatToken } from "../lib/tokens.js";
import { fmtPercentPlain } from "../lib/format.js";
import { notableBlocks } from "../model/walk.js";
import { figureTheme } from "./theme.js";
import { slideTitleLines, drawTitle } from "./titles.js";
import { slideColor, drawPercentCurves } from "./percent-curves.js";
/** @typedef {import("./painters.js").Painter} Painter */

/** What the student view is about, for its title. @param {import("../model/result.js").Result} r @param {import("../model/lesson.js").Lesson} lesson */
export function lessonSubject(r, lesson) {
  const versus = lesson.series.find((c) => c.key === "versus");
  const vs = versus ? ` vs \u201c${formatToken(versus.label, { maxLen: 60 })}\u201d` : "";
  if (r.answer) return `answer: \u201c${formatToken(r.answer.text, { maxLen: 80 })}\u201d${vs}`;
  return `next token after \u201c${lesson.input}\u201d: ${lesson.target || "\u2013"}${vs}`;
}

/**
 * The student view as a slide: the title (prompt, answer, lens), the output's top guesses at the
 * lesson's position in percent, the curves of the answer's probability after each block on a
 * 0–100% axis (the view's series, in its order), their key, and the walk's sentences of the
 * notable blocks (the view's story). Token text as text only.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("../model/result.js").Result} r @param {import("../model/lesson.js").Lesson} lesson
 * @param {{theme: "light"|"dark", legend: (c: import("../model/lesson.js").LessonSeries) => string}} o `legend`: the view's key text of a series
 */
export function lessonFigure(make, r, lesson, o) {
  const th = figureTheme(o.theme);
  const lines = slideTitleLines(r, "lesson", lessonSubject(r, lesson));
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const W = 960,
    guessH = 30,
    chartH = 320,
    keyH = 22 * Math.max(1, lesson.series.length) + 8;
  const events = notableBlocks(lesson.walk);
  const storyH = events.length ? 34 + 20 * events.length : 0;
  const H = titleH + guessH + chartH + 56 + keyH + storyH;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const guesses = lesson.top.map((g) => `${g.text} ${fmtPercentPlain(g.p)}`).join("   ");
  p.text(16, titleH + guessH / 2, `The model's top guesses after \u201c${lesson.input}\u201d:  ${guesses}`, { size: 14, weight: 600, fill: th.fg });
  const top = titleH + guessH + 10;
  if (lesson.series.length) {
    drawPercentCurves(p, r, lesson.series, { x0: 64, top, w: W - 64 - 24, h: chartH - 10, yMax: 100, theme: o.theme });
  } else {
    p.text(W / 2, top + chartH / 2, "The lens values here are differences (a contrast): no probability to draw.", {
      size: 13,
      anchor: "middle",
      fill: th.muted,
    });
  }
  let ky = top + chartH + 44;
  for (const c of lesson.series) {
    p.line(64, ky, 90, ky, slideColor(c.key, o.theme), 3, c.key === "token" ? "6 4" : undefined);
    p.text(98, ky, o.legend(c), { size: 13, fill: th.fg });
    ky += 22;
  }
  if (events.length) p.text(16, ky + 8, "Block by block:", { size: 13.5, weight: 600, fill: th.fg });
  for (const [q, e] of events.entries()) p.text(32, ky + 34 + 20 * q, `\u2022 ${e.sentence}`, { size: 13, fill: th.fg });
  return p;
}
