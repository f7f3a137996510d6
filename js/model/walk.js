/**
 * The walk through the layers of the student view: which blocks are worth a sentence, the
 * sentences, and the cursor's steps. Pure: no DOM (js/views/lesson/index.js draws it).
 *
 * A block is notable when the lens's top guess changes to a word (a token with a letter or
 * digit: the early layers' top guesses are mostly punctuation and spaces), when a followed
 * probability crosses 10% or 50%, or when it has a probability's largest single-block rise.
 * Each notable block gets one sentence ("block 25: ␣ph becomes the top guess, 12%").
 * @module walk
 */
import { fmtPercentPlain } from "../lib/format.js";

/** The probabilities whose crossing makes a block notable (10%, 50%). */
export const THRESHOLDS = [0.1, 0.5];

/** A rise below this (one percentage point) is not "the biggest rise" worth a sentence. */
export const MIN_RISE = 0.01;

/** The most sentences a walk tells (the blocks with a crossing or a rise are always kept). */
export const MAX_SENTENCES = 8;

/**
 * @typedef {object} WalkSeries a probability the walk follows, one value per boundary
 * @property {string} name how the sentences name it ("␣Ho", "the whole answer"); display text
 * @property {ArrayLike<number>} probs k+1 probabilities (embeddings … output)
 *
 * @typedef {object} WalkInput
 * @property {string[]} labels k+1 depth names ("embeddings", "block 1", … "block 30")
 * @property {Array<{text: string, p: number}|null>} top1 the lens's top guess at each boundary
 *   (its display text: formatted, untrusted)
 * @property {WalkSeries[]} series the probabilities to follow (the answer first)
 *
 * @typedef {object} WalkEvent one notable block
 * @property {number} L the boundary (0 = embeddings … k = output)
 * @property {Array<"top"|"cross"|"rise">} kinds why it is notable
 * @property {string} sentence "block 25: ␣ph becomes the top guess, 12%"
 */

/** A guess that is a word: it has a letter or a digit. @param {string} text */
export const isWord = (text) => /[\p{L}\p{N}]/u.test(text);

/**
 * The crossing of a threshold between boundaries L−1 and L: the highest one passed on the way
 * up, the lowest one left on the way down (null when none).
 * @param {number} before @param {number} after
 * @returns {{up: boolean, t: number}|null}
 */
export function crossing(before, after) {
  if (!Number.isFinite(before) || !Number.isFinite(after)) return null;
  const up = THRESHOLDS.filter((t) => before < t && after >= t);
  if (up.length) return { up: true, t: up[up.length - 1] };
  const down = THRESHOLDS.filter((t) => before >= t && after < t);
  return down.length ? { up: false, t: down[0] } : null;
}

/**
 * The boundary with a series' largest rise from the boundary before (-1 when no rise reaches
 * MIN_RISE).
 * @param {ArrayLike<number>} probs
 */
export function largestRise(probs) {
  let best = -1;
  let gain = MIN_RISE;
  for (let L = 1; L < probs.length; L++) {
    const d = probs[L] - probs[L - 1];
    if (Number.isFinite(d) && d >= gain) {
      gain = d;
      best = L;
    }
  }
  return best;
}

/** Percentage points, signed: "+44 percentage points". @param {number} d a difference of probabilities */
const points = (d) => {
  const v = Math.round(100 * Math.abs(d));
  return `${d < 0 ? "\u2212" : "+"}${v} percentage point${v === 1 ? "" : "s"}`;
};

/**
 * The parts of the sentence of boundary L, each with its kind: the new top guess, the
 * thresholds crossed, then the biggest rises (one part: "the biggest rise of ␣Ho (+44
 * percentage points) and of the whole answer (+6 percentage points)").
 * @param {WalkInput} w @param {number} L @param {number[]} rises each series' largest-rise boundary
 * @returns {Array<{kind: "top"|"cross"|"rise", text: string}>}
 */
function partsAt(w, L, rises) {
  /** @type {Array<{kind: "top"|"cross"|"rise", text: string}>} */
  const parts = [];
  if (L < 1) return parts;
  const top = w.top1[L];
  const prev = w.top1[L - 1];
  if (top && isWord(top.text) && (!prev || prev.text !== top.text)) {
    parts.push({ kind: "top", text: `${top.text} becomes the top guess, ${fmtPercentPlain(top.p)}` });
  }
  for (const s of w.series) {
    const c = crossing(s.probs[L - 1], s.probs[L]);
    if (c) parts.push({ kind: "cross", text: `${s.name} ${c.up ? "passes" : "falls below"} ${fmtPercentPlain(c.t)}` });
  }
  const risen = w.series.filter((_, q) => rises[q] === L).map((s) => `${s.name} (${points(s.probs[L] - s.probs[L - 1])})`);
  if (risen.length) parts.push({ kind: "rise", text: `the biggest rise of ${risen.join(" and of ")}` });
  return parts;
}

/**
 * The walk's notable blocks, in depth order, one sentence each: every block with a crossing
 * or a biggest rise, and the latest top-guess changes up to MAX_SENTENCES in all.
 * @param {WalkInput} w
 * @returns {WalkEvent[]}
 */
export function notableBlocks(w) {
  const rises = w.series.map((s) => largestRise(s.probs));
  /** @type {WalkEvent[]} */
  const all = [];
  for (let L = 1; L < w.labels.length; L++) {
    const parts = partsAt(w, L, rises);
    if (!parts.length) continue;
    const kinds = [...new Set(parts.map((p) => p.kind))];
    all.push({ L, kinds, sentence: `${w.labels[L]}: ${parts.map((p) => p.text).join("; ")}` });
  }
  const keep = new Set(all.filter((e) => e.kinds.some((k) => k !== "top")).map((e) => e.L));
  for (let q = all.length - 1; q >= 0 && keep.size < MAX_SENTENCES; q--) keep.add(all[q].L);
  return all.filter((e) => keep.has(e.L));
}

/**
 * What the walk shows at boundary L: its name, the lens's top guess and each followed
 * probability, in percent — each number once: a followed token that is the top guess there
 * ("␣Ho 45%" beside "the model's guess: ␣Ho 45%") is not said twice.
 * @param {WalkInput} w @param {number} L
 */
export function readout(w, L) {
  const top = w.top1[L];
  const guess = top ? `${top.text} ${fmtPercentPlain(top.p)}` : "\u2013";
  return {
    label: w.labels[L],
    guess,
    values: w.series.map((s) => ({ name: s.name, text: fmtPercentPlain(s.probs[L]) })).filter((v) => `${v.name} ${v.text}` !== guess),
  };
}

/**
 * The cursor moved by `delta` boundaries, kept within 0 … k.
 * @param {number} L @param {number} delta @param {number} k
 */
export function stepCursor(L, delta, k) {
  return Math.max(0, Math.min(k, Math.trunc(L) + delta));
}

/**
 * Where play goes from L: the next boundary, or null at the output (play stops); from the
 * output, play starts again at the embeddings.
 * @param {number} L @param {number} k @param {boolean} starting the first step of a play
 * @returns {number|null}
 */
export function playNext(L, k, starting) {
  if (starting && L >= k) return 0;
  return L < k ? L + 1 : null;
}
