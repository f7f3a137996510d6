/**
 * The answers panel, under the main view: the ledger of a span of positions (picked in the
 * strip by shift-click, drag or Shift+←/→; by default the whole answer's positions) — its
 * log-probability entry per segment, the cumulative joint probability F_L in percent and the
 * split over the span's tokens — and, when the result has a `versus` answer, the answer
 * against it: both answers' joint-probability curves and the differential bars, in log or
 * probability space, with the gap at the output and the segment that moves it most.
 * Texts from the payload (tokens, the answers' texts) are inserted as text only.
 * @module views/answers
 */
import { h, clear, listen } from "../../lib/dom.js";
import { formatToken, quoteToken } from "../../lib/tokens.js";
import { segmentText } from "../../model/result.js";
import { divergingScale } from "../../lib/colorscale.js";
import { fmtLog, fmtPercent, fmtSigned, pyExp } from "../../lib/format.js";
import { answerSpan, spanLedger, largestEntries, tableTokens } from "../../lib/span.js";
import { probUnderflow } from "../../model/answers.js";
import { segmentBars, boundaryCurves } from "./charts.js";
import { chipText } from "../strip/index.js";

/** The most tokens the split table (and the panel's head) lists. */
const MAX_TABLE_TOKENS = 24;

/** Why a probability ledger names no onset when Python sent onset −1 and F = 0 at every depth. */
const ZERO_F = "0 at float precision (F below the smallest double at every depth)";

/** Okabe–Ito blue and vermillion: the answer and the versus answer. */
export const ANSWER_COLORS = { answer: "#0072B2", versus: "#D55E00" };

/** A token (or an answer's text) as a chip, its raw text in the title. @param {string} text @param {number} [maxLen] */
const chip = (text, maxLen = 24) => h("span", { class: "iglens-chip", title: quoteToken(text), text: formatToken(text, { maxLen }) });

/**
 * The block a differential or answer onset names, in words: the segment holding it when the
 * segments are wider than a block ("blocks 11–15"), else "block L".
 * @param {import("../../model/result.js").Result} r @param {number} blk
 */
export function onsetText(r, blk) {
  if (blk < 0) return "none";
  if (!r.singleBlocks && !r.halves) {
    for (let j = 0; j < r.k; j++) if (r.boundaries[j] < blk && blk <= r.boundaries[j + 1]) return segmentText(r, j);
  }
  return `block ${blk}`;
}

/**
 * @param {import("../context.js").Context} ctx
 */
export function createAnswers(ctx) {
  const el = h("section", { class: "iglens-answers", "data-view": "answers", "aria-label": "Answers: span ledger and answer vs answer" });
  /** @type {"log"|"prob"} the differential bars' space (local, kept across re-renders): it
   * opens on probabilities, which a student reads; the log ledger is one click away */
  let space = "prob";
  let width = 0;

  function render() {
    clear(el);
    const r = ctx.result;
    el.hidden = !r;
    if (!r) return;
    const W = chartWidth(r);
    width = el.clientWidth;
    if (r.answersError)
      el.appendChild(h("p", { class: "iglens-answers-error iglens-error", role: "alert", text: `Could not read the whole answers: ${r.answersError}` }));
    el.appendChild(spanPanel(ctx, r, W));
    if (r.answerComparison && r.answer && r.versus) el.appendChild(versusPanel(ctx, r, W, space));
  }

  /** Each panel's chart width: half the section beside the other panel on a wide page. @param {import("../../model/result.js").Result} r */
  function chartWidth(r) {
    const w = el.clientWidth || 960;
    const two = !!r.answerComparison && ctx.root.classList.contains("iglens-wide");
    return Math.max(260, Math.floor(two ? (w - 14) / 2 : w) - 26);
  }

  const off = listen(el, "click", (e) => {
    const b = e.target instanceof Element ? e.target.closest("[data-space]") : null;
    if (!b || !el.contains(b) || b.tagName !== "BUTTON") return;
    const next = b.getAttribute("data-space") === "prob" ? "prob" : "log";
    if (next === space) return;
    space = next;
    render();
    /** @type {HTMLElement|null} */ (el.querySelector(`button[data-space=${next}]`))?.focus();
  });

  return {
    el,
    render,
    resize() {
      if (el.clientWidth && Math.abs(el.clientWidth - width) > 1) render();
    },
    destroy() {
      off();
    },
  };
}

/**
 * The span's ledger (or why there is none).
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r @param {number} W
 */
function spanPanel(ctx, r, W) {
  const span = ctx.span ?? answerSpan(r);
  const panel = h("div", { class: "iglens-span-panel" });
  if (!span) {
    panel.append(
      h("h2", { class: "iglens-section-title", text: "Span ledger" }),
      h("p", {
        class: "iglens-muted iglens-span-hint",
        text: "Shift-click, drag across tokens or press Shift+\u2190/\u2192 in the strip to see the ledger of a span of positions.",
      }),
    );
    return panel;
  }
  const L = spanLedger(r, span);
  panel.setAttribute("data-lo", String(L.lo));
  panel.setAttribute("data-hi", String(L.hi));
  if ("error" in L) {
    panel.append(
      h("h2", { class: "iglens-section-title", text: `Span ledger \u00b7 positions ${L.lo}\u2013${L.hi}` }),
      h("p", { class: "iglens-span-error", role: "status", text: L.error }),
    );
    return panel;
  }
  panel.setAttribute("data-source", L.source);
  panel.setAttribute("data-positions", L.positions.join(" "));
  const whole = L.source === "answer";
  panel.append(
    h(
      "div",
      { class: "iglens-section-head" },
      h("h2", { class: "iglens-section-title", text: whole ? "Answer ledger" : `Span ledger \u00b7 positions ${L.lo}\u2013${L.hi}` }),
      whole && r.answer ? chip(r.answer.text, 40) : null,
      h("span", { class: "iglens-muted", text: `${L.n} token${L.n === 1 ? "" : "s"}:` }),
      ...L.tokens.slice(0, MAX_TABLE_TOKENS).map((t) => chip(t, 16)),
      L.n > MAX_TABLE_TOKENS ? h("span", { class: "iglens-muted", text: `\u2026 and ${L.n - MAX_TABLE_TOKENS} more` }) : null,
    ),
    sumLine(r, L),
  );
  if (L.skipped.length)
    panel.appendChild(h("p", { class: "iglens-muted iglens-span-skipped", text: `Left out (no target): positions ${L.skipped.join(", ")}.` }));
  const dark = ctx.theme === "dark";
  const bars = segmentBars({
    r,
    values: L.contributions,
    W,
    label: "log-probability contribution of each segment",
    yTitle: "\u0394 log p",
    cls: "iglens-span-bars-chart",
    barClass: "iglens-span-bar",
    dark,
    title: (j, v) => `${segmentText(r, j)}: ${fmtLog(v)} to log p(span)`,
  });
  const curve = boundaryCurves({
    r,
    series: [{ values: L.lensProbs, cls: "iglens-span-curve", color: ANSWER_COLORS.answer, name: "F" }],
    W,
    label: "joint lens probability of the span after each boundary",
    yTitle: "F (%)",
    cls: "iglens-span-curve-chart",
    scale: 100,
    fmt: fmtPercent,
  });
  panel.append(
    figure(`(a) the span's joint probability F = \u03a0 p(token) as the lens reads it after each block, in percent`, curve),
    logNote(L),
    figure("(b) each segment's contribution to log p(span): \u0394 log F across the segment", bars),
    splitTable(r, L, ctx.theme),
  );
  return panel;
}

/**
 * What to know before reading the log ledger: its first entry is large because the embeddings
 * read every token of the span at a tiny probability (log F₀, e.g. e^−100), so the first block
 * lifts the log a lot while the probability barely moves.
 * @param {import("../../lib/span.js").SpanLedger} L
 */
function logNote(L) {
  return h("p", {
    class: "iglens-muted iglens-span-log-note",
    text:
      `Before reading the log ledger below: at the embeddings the lens reads the span at log F\u2080 = ${fmtLog(L.logprob0)} ` +
      `(about e^${Math.round(L.logprob0)}), so the first blocks lift the log by many nats while the probability above barely moves. ` +
      "A large early entry says the raw embeddings cannot read the answer, not that those blocks decide it.",
  });
}

/** @param {string} caption @param {Node} chart */
const figure = (caption, chart) => h("figure", { class: "iglens-figure" }, h("figcaption", { class: "iglens-caption", text: caption }), chart);

/**
 * "Σ = log p(span) − log F_0", with both numbers, checked.
 * @param {import("../../model/result.js").Result} r @param {import("../../lib/span.js").SpanLedger} L
 */
function sumLine(r, L) {
  const want = L.logprob - L.logprob0;
  const err = Math.abs(L.sum - want);
  const ok = err <= 1e-4 * Math.max(1, Math.abs(want));
  const riemann = r.estimator === "riemann";
  const a = L.source === "answer" ? r.answer : null;
  return h(
    "div",
    {
      class: "iglens-span-sum" + (ok ? " iglens-ok" : " iglens-warn"),
      "data-sum": String(L.sum),
      "data-logprob": String(L.logprob),
      "data-logprob0": String(L.logprob0),
    },
    h("span", { class: "iglens-check", "aria-hidden": "true", text: ok ? "\u2713" : "\u2248" }),
    h("span", {
      class: "iglens-span-sum-text",
      text: `\u03a3 = log p(span) \u2212 log F\u2080: ${fmtLog(L.sum)} = ${fmtLog(L.logprob)} \u2212 (${fmtLog(L.logprob0)}), |error| = ${pyExp(err, 1)}`,
    }),
    h("span", { class: "iglens-muted", text: ` \u00b7 p(span) = ${fmtPercent(Math.exp(L.logprob))}` }),
    a
      ? h("span", {
          class: "iglens-muted iglens-span-onset",
          text: probUnderflow(a)
            ? ` \u00b7 the probability ledger is ${ZERO_F} and names no onset; onset ${onsetText(r, a.logprobOnset)} (log)`
            : ` \u00b7 onset ${onsetText(r, a.onset)} (probability), ${onsetText(r, a.logprobOnset)} (log)`,
        })
      : null,
    riemann
      ? h("span", {
          class: "iglens-muted",
          text:
            L.source === "answer"
              ? " \u00b7 Riemann: the entries are midpoint-rule integrals (the error shrinks with m)"
              : " \u00b7 the entries are first differences of the lens log-probabilities (exact), not Riemann integrals",
        })
      : null,
  );
}

/**
 * The split over the span's tokens: one row per segment, one column per token, and Σ.
 * @param {import("../../model/result.js").Result} r @param {import("../../lib/span.js").SpanLedger} L @param {"light"|"dark"} theme
 */
function splitTable(r, L, theme) {
  let lim = 0;
  for (let q = 0; q < L.split.length; q++) if (Number.isFinite(L.split[q])) lim = Math.max(lim, Math.abs(L.split[q]));
  const scale = divergingScale(lim || 1, theme);
  const cols = tableTokens(L, MAX_TABLE_TOKENS);
  const head = h(
    "tr",
    {},
    h("th", { scope: "col", text: "segment" }),
    ...cols.map((q) => h("th", { scope: "col", title: quoteToken(L.tokens[q]), text: formatToken(L.tokens[q], { maxLen: 12 }) })),
    h("th", { scope: "col", text: "\u03a3" }),
  );
  const body = h("tbody");
  for (let j = 0; j < L.k; j++) {
    const row = h("tr", {}, h("th", { scope: "row", text: r.segmentLabels[j] }));
    for (const q of cols) {
      const v = L.split[j * L.n + q];
      const rgb = scale.rgb(v);
      const td = h("td", {
        "data-segment": j,
        "data-token": q,
        "data-value": String(v),
        title: `${segmentText(r, j)}, ${quoteToken(L.tokens[q])}: ${fmtLog(v)}`,
        text: fmtSigned(v),
      });
      if (rgb) {
        td.style.backgroundColor = `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`;
        td.style.color = chipText(rgb);
      }
      row.appendChild(td);
    }
    row.appendChild(
      h("td", { class: "iglens-span-split-sum", "data-segment": j, "data-value": String(L.contributions[j]), text: fmtSigned(L.contributions[j]) }),
    );
    body.appendChild(row);
  }
  const top = largestEntries(L, 3)
    .map((e) => `${segmentText(r, e.j)} \u00b7 ${formatToken(L.tokens[e.q], { maxLen: 12 })} ${fmtLog(e.value)}`)
    .join(", ");
  return h(
    "div",
    { class: "iglens-span-split-wrap" },
    h("div", {
      class: "iglens-caption",
      text:
        "(c) the split over the span's tokens: each token's \u0394 log p in each segment (rows add up to the bars" +
        (cols.length < L.n ? `; the ${cols.length} of ${L.n} tokens with the largest entries shown, \u03a3 over all)` : ")"),
    }),
    h(
      "div",
      { class: "iglens-span-split-scroll", tabindex: 0, role: "region", "aria-label": "split over the span's tokens" },
      h("table", { class: "iglens-span-split" }, h("thead", {}, head), body),
    ),
    h("p", { class: "iglens-muted iglens-span-top", text: top ? `largest: ${top}` : "" }),
  );
}

/**
 * The answer against the versus answer.
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r @param {number} W @param {"log"|"prob"} space
 */
function versusPanel(ctx, r, W, space) {
  const a = /** @type {import("../../model/answers.js").Ledger} */ (r.answer);
  const b = /** @type {import("../../model/answers.js").Ledger} */ (r.versus);
  const c = /** @type {import("../../model/answers.js").AnswerComparison} */ (r.answerComparison);
  const log = space === "log";
  const values = log ? c.logprobContributions : c.probContributions;
  const gap0 = log ? c.startLogprobGap : a.lensProbs[0] - b.lensProbs[0];
  const onset = log ? c.onset : c.probOnset;
  const gapN = log ? c.logprobGap : c.probGap;
  let sum = 0;
  for (let j = 0; j < r.k; j++) sum += values[j];
  const fmt = log ? fmtLog : fmtPercent;
  const switcher = h(
    "div",
    { class: "iglens-seg iglens-versus-space", role: "group", "aria-label": "differential ledger in" },
    ...[
      ["log", "log-probability"],
      ["prob", "probability"],
    ].map(([key, text]) =>
      h("button", { type: "button", class: "iglens-seg-button", "data-space": key, "aria-pressed": key === space ? "true" : "false", text }),
    ),
  );
  const name = (/** @type {string} */ t) => formatToken(t, { maxLen: 40 });
  const curves = boundaryCurves({
    r,
    series: [
      { values: a.lensProbs, cls: "iglens-versus-curve", color: ANSWER_COLORS.answer, name: name(a.text), attrs: { "data-answer": "answer" } },
      { values: b.lensProbs, cls: "iglens-versus-curve", color: ANSWER_COLORS.versus, name: name(b.text), attrs: { "data-answer": "versus" } },
    ],
    W,
    label: "both answers' joint lens probability after each boundary",
    yTitle: "F (%)",
    cls: "iglens-versus-curve-chart",
    scale: 100,
    fmt: fmtPercent,
  });
  const legend = h(
    "div",
    { class: "iglens-chart-legend" },
    ...[
      ["answer", a.text],
      ["versus", b.text],
    ].map(([key, text]) =>
      h(
        "span",
        { class: "iglens-key", "data-answer": key },
        h("span", {
          class: "iglens-key-swatch iglens-versus-swatch",
          style: `background: ${ANSWER_COLORS[/** @type {"answer"|"versus"} */ (key)]}`,
          "aria-hidden": "true",
        }),
        h("span", { text: name(text) }),
      ),
    ),
  );
  const bars = segmentBars({
    r,
    values,
    W,
    label: log ? "each segment's contribution to log p(a) − log p(b)" : "each segment's contribution to p(a) − p(b)",
    yTitle: log ? "\u0394 log-gap" : "\u0394 p-gap",
    cls: "iglens-versus-bars-chart",
    barClass: "iglens-versus-bar",
    dark: ctx.theme === "dark",
    title: (j, v) => `${segmentText(r, j)}: ${fmt(v)} to ${log ? "log p(a) \u2212 log p(b)" : "p(a) \u2212 p(b)"}`,
  });
  const what = log ? "log p(a) \u2212 log p(b)" : "p(a) \u2212 p(b)";
  return h(
    "div",
    { class: "iglens-versus", "data-space": space },
    h(
      "div",
      { class: "iglens-section-head" },
      h("h2", { class: "iglens-section-title", text: "Answer vs answer" }),
      chip(a.text, 32),
      h("span", { class: "iglens-muted", text: "vs" }),
      chip(b.text, 32),
      h("span", { class: "iglens-spacer" }),
      switcher,
    ),
    h("p", {
      class: "iglens-versus-gap",
      "data-logprob-gap": String(c.logprobGap),
      "data-prob-gap": String(c.probGap),
      text: `At the output: log p(a) \u2212 log p(b) = ${fmtLog(c.logprobGap)}, p(a) \u2212 p(b) = ${fmtPercent(c.probGap)} (a = ${name(a.text)}, b = ${name(b.text)}).`,
    }),
    h("p", {
      class: "iglens-versus-onset",
      "data-onset": String(onset),
      // Python's onsets: the block moving the gap (log or p) most towards the output's preference
      "data-winner": c.logprobGap >= 0 ? "answer" : "versus",
      text:
        onset >= 0
          ? `The output prefers ${c.logprobGap >= 0 ? "a" : "b"}; the block moving the ${log ? "log gap" : "probability gap"} most towards it: ${onsetText(r, onset)}.`
          : !log && probUnderflow(a) && probUnderflow(b)
            ? `Both answers' probability ledgers are ${ZERO_F} and name no block: read the log-probability view.`
            : "No segment moves the gap towards the output's preference.",
    }),
    figure("(a) both answers' joint probability F as the lens reads it after each block, in percent", curves),
    legend,
    figure(`(b) each segment's contribution to ${what}`, bars),
    versusSum(r, what, fmt, sum, gapN, gap0),
  );
}

/**
 * The differential ledger's sum against the gaps it telescopes to, checked (under the Riemann
 * estimator the entries are integrals: the line says ≈ and how far).
 * @param {import("../../model/result.js").Result} r @param {string} what @param {(v: number) => string} fmt
 * @param {number} sum @param {number} gapN the gap at the output @param {number} gap0 the gap at the embeddings
 */
function versusSum(r, what, fmt, sum, gapN, gap0) {
  const err = Math.abs(sum - (gapN - gap0));
  const ok = err <= 1e-4 * Math.max(1, Math.abs(gapN - gap0));
  return h(
    "p",
    { class: "iglens-muted iglens-versus-sum" + (ok ? " iglens-ok" : " iglens-warn"), "data-sum": String(sum) },
    `\u03a3 = ${what} at the output \u2212 the same at the embeddings: ${fmt(sum)} ${ok ? "=" : "\u2248"} ${fmt(gapN)} \u2212 (${fmt(gap0)})` +
      (ok ? "" : `, off by ${fmt(err).replace(/^[+\u2212]/, "")}`) +
      (r.estimator === "riemann" ? " \u00b7 Riemann: the entries are midpoint-rule integrals (the error shrinks with m)" : ""),
  );
}
