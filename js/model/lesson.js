/**
 * What the student view shows, read from the decoded result: the position it is about, the
 * output's top 5 there, the lens column (each boundary's top tokens at that position), the
 * probabilities it draws in percent (the whole answer, the position's next token, and the
 * `versus` answer to compare with) and the walk's input. Pure: no DOM.
 * @module lesson
 */
import { topAt, lensRow, depthText } from "./result.js";
import { formatToken } from "../lib/tokens.js";

/** Tokens listed in each row of the lens column. */
export const COLUMN_TOP = 3;

/** Tokens in the header's "the model's guesses". */
export const HEADER_TOP = 5;

/**
 * @typedef {object} Guess
 * @property {string} text the token's display text (formatted; untrusted: insert as text)
 * @property {string} raw the token as the payload has it
 * @property {number} p its probability
 * @property {boolean} isTarget it is the position's target (the token the answer goes on with)
 *
 * @typedef {object} LessonSeries a probability drawn on the curve, one value per boundary
 * @property {"answer"|"token"|"versus"} key
 * @property {string} name how sentences name it ("the whole answer", "␣Ho", "the other answer")
 * @property {string} label the legend's text: the answer's or the token's text
 * @property {ArrayLike<number>} probs k+1 probabilities
 *
 * @typedef {object} Lesson
 * @property {number} position the position the header and the lens column are about
 * @property {string} input the token at that position (display text)
 * @property {string} target its target (display text; "" without one)
 * @property {Guess[]} top the output's top tokens there (HEADER_TOP)
 * @property {Array<{L: number, label: string, top: Guess[]}>} column each boundary's top tokens
 * @property {LessonSeries[]} series what the curve draws, the walk's subject first
 * @property {import("./walk.js").WalkInput} walk
 */

/** @param {string} t */
const show = (t) => formatToken(t, { maxLen: 16 });

/** A token compared as a word: trimmed, without the leading-space markers (Ġ, ▁, ␣), lower case. @param {string} t */
const asWord = (t) =>
  t
    .trim()
    .replace(/^[ \t\r\n\u0120\u2581\u2423]+/u, "")
    .toLowerCase();

/**
 * Where a result opens when nothing is selected: the first answer position whose target is a
 * content token (a letter or digit, not a special token such as `<|im_end|>`) that does not
 * occur among the prompt's tokens — "[41] ␣is → ␣Ho", not the answer's opening words, which
 * repeat the question. Else the first position that predicts the answer, else the last
 * position, or the nearest earlier one with a target (-1 for an empty result). The rule of
 * Python's `iglens_viz.protocol.opening.opening_position`, which picks the widget's opening
 * selection: Escape (no selection) brings the student view back to the same token.
 * @param {import("./result.js").Result} r
 */
export function openingPosition(r) {
  if (r.T === 0) return -1;
  const start = Math.min(Math.max(r.answerStart, 0), r.T);
  const prompt = new Set(r.tokens.slice(0, start + 1).map((t) => asWord(String(t))));
  for (let i = start; i < r.T - 1; i++) {
    const word = asWord(String(r.targetTokens[i] ?? ""));
    if (r.hasTarget[i] && /[\p{L}\p{N}]/u.test(word) && !/^<[^<>]*>$/.test(word) && !prompt.has(word)) return i;
  }
  const fallback = Math.min(start, r.T - 1);
  for (let i = fallback; i >= 0; i--) if (r.hasTarget[i]) return i;
  return fallback;
}

/**
 * The position the lesson is about: the selection, else where the result opens
 * ({@link openingPosition}: the answer's first content token).
 * @param {import("./result.js").Result} r @param {number} selected
 */
export function lessonPosition(r, selected) {
  if (selected >= 0 && selected < r.T) return selected;
  return openingPosition(r);
}

/**
 * The top-n tokens at boundary L of position i, as guesses.
 * @param {import("./result.js").Result} r @param {number} i @param {number} L @param {number} n
 * @returns {Guess[]}
 */
export function guessesAt(r, i, L, n) {
  const target = r.hasTarget[i] ? r.targetIds[i] : -1;
  return topAt(r, i, L, n).map((t) => ({ text: show(t.text), raw: t.text, p: t.p, isTarget: t.id === target }));
}

/**
 * The curve's series: the whole answer (when the result has one), the position's next token
 * (unless it is the whole one-token answer, or the lens values are differences), and the
 * answer to compare with.
 * @param {import("./result.js").Result} r @param {number} i
 * @returns {LessonSeries[]}
 */
export function lessonSeries(r, i) {
  /** @type {LessonSeries[]} */
  const out = [];
  const a = r.answer;
  if (a) out.push({ key: "answer", name: "the whole answer", label: a.text, probs: a.lensProbs });
  const same = a && a.n === 1 && a.positions[0] === i;
  if (r.hasTarget[i] && !r.signedProbs && !same) {
    const t = show(r.targetTokens[i]);
    out.push({ key: "token", name: t, label: r.targetTokens[i], probs: lensRow(r, i) });
  }
  if (r.versus) out.push({ key: "versus", name: "the other answer", label: r.versus.text, probs: r.versus.lensProbs });
  return out;
}

/**
 * Everything the student view shows about position i.
 * @param {import("./result.js").Result} r @param {number} i
 * @returns {Lesson}
 */
export function lessonData(r, i) {
  const column = [];
  for (let L = 0; L <= r.k; L++) column.push({ L, label: depthText(r.boundaries[L]), top: guessesAt(r, i, L, COLUMN_TOP) });
  const series = lessonSeries(r, i);
  return {
    position: i,
    input: show(r.tokens[i] ?? ""),
    target: r.hasTarget[i] ? show(r.targetTokens[i]) : "",
    top: guessesAt(r, i, r.k, HEADER_TOP),
    column,
    series,
    walk: {
      labels: column.map((c) => c.label),
      top1: column.map((c) => (c.top[0] ? { text: c.top[0].text, p: c.top[0].p } : null)),
      series: series.map((s) => ({ name: s.name, probs: s.probs })),
    },
  };
}
