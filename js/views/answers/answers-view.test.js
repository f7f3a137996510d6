// @vitest-environment jsdom
// The span selection in the strip and the answers panel (span ledger, answer vs answer), on
// the Python payload (js/testing/payload.json: a tiny Llama, answer=" w9 w11", versus=" w7");
// the expected numbers were computed by js/testing/make_payload.py with numpy.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, fire } from "../../testing/dom.js";
import { render } from "../app.js";
import { createModel } from "../../standalone.js";
import { formatToken } from "../../lib/tokens.js";
import { fmtLog } from "../../lib/format.js";
import { encodeArray } from "../../model/codec.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "testing", "payload.json"), "utf-8"));
const want = golden.expected.answers;

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

/** @param {(result: any) => void} [edit] */
function mount(edit) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const state = structuredClone(golden.state);
  if (edit) edit(state.result);
  const model = createModel(state);
  const cleanup = render({ model, el });
  return { el, model, cleanup };
}

/** @param {ParentNode} el @param {string} sel */
const q = (el, sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
/** @param {ParentNode} el @param {string} sel @param {string} attr */
const values = (el, sel, attr) => [...el.querySelectorAll(sel)].map((e) => Number(e.getAttribute(attr)));
/** @param {ParentNode} el @param {number} i */
const chipAt = (el, i) => q(el, `.iglens-strip [data-token-index='${i}']`);
/** @param {ParentNode} el */
const inSpan = (el) => [...el.querySelectorAll(".iglens-strip [data-in-span]")].map((c) => Number(c.getAttribute("data-token-index")));

/** @param {ParentNode} el */
function expectSpanLedger(el) {
  const panel = q(el, ".iglens-span-panel");
  expect(panel.getAttribute("data-source")).toBe("positions");
  expect([panel.getAttribute("data-lo"), panel.getAttribute("data-hi")]).toEqual(["1", "3"]);
  const bars = values(panel, "rect.iglens-span-bar", "data-value");
  expect(bars.length).toBe(want.span_contributions.length);
  bars.forEach((v, j) => expect(v).toBeCloseTo(want.span_contributions[j], 12));
  const cells = values(panel, ".iglens-span-split td[data-token]", "data-value");
  cells.forEach((v, n) => expect(v).toBeCloseTo(want.span_split[n], 12));
  const sum = q(panel, ".iglens-span-sum");
  expect(Number(sum.getAttribute("data-logprob"))).toBeCloseTo(want.span_logprob, 12);
  expect(Number(sum.getAttribute("data-logprob0"))).toBeCloseTo(want.span_logprob0, 12);
  expect(sum.classList.contains("iglens-ok")).toBe(true);
  const curve = /** @type {string} */ (q(panel, "polyline.iglens-span-curve").getAttribute("data-values")).split(" ").map(Number);
  curve.forEach((v, L) => expect(v / want.span_lens_probs[L]).toBeCloseTo(1, 12));
}

describe("the answers panel by default: the whole answer's ledger", () => {
  it("opens on the probability curve, and explains the log ledger's first entry before showing it", () => {
    const { el } = mount();
    const panel = q(el, ".iglens-span-panel");
    const captions = [...panel.querySelectorAll("figcaption")].map((c) => c.textContent ?? "");
    expect(captions[0]).toMatch(/^\(a\) the span's joint probability/);
    expect(captions[1]).toMatch(/^\(b\) each segment's contribution to log p/);
    const note = q(panel, ".iglens-span-log-note");
    expect(note.textContent).toContain(`log F\u2080 = ${fmtLog(want.answer_lens_logprob0)}`);
    expect(note.textContent).toContain(`e^${Math.round(want.answer_lens_logprob0)}`);
    const bars = /** @type {Element} */ (q(panel, "rect.iglens-span-bar").closest("figure"));
    expect(note.compareDocumentPosition(bars) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
  });

  it("shows the payload's answer ledger: its bars, F_L, the split and Σ = log p − log F_0 with both numbers", () => {
    const { el } = mount();
    const panel = q(el, ".iglens-span-panel");
    expect(panel.getAttribute("data-source")).toBe("answer");
    expect(panel.getAttribute("data-positions")).toBe(want.answer_positions.join(" "));
    expect(values(panel, "rect.iglens-span-bar", "data-value")).toEqual(want.answer_logprob_contributions);
    expect(values(panel, ".iglens-span-split td[data-token]", "data-value")).toEqual(want.answer_logprob_split);
    const curve = /** @type {string} */ (q(panel, "polyline.iglens-span-curve").getAttribute("data-values")).split(" ").map(Number);
    expect(curve).toEqual(want.answer_lens_probs);
    const sum = q(panel, ".iglens-span-sum");
    expect(Number(sum.getAttribute("data-logprob"))).toBe(want.answer_logprob);
    expect(Number(sum.getAttribute("data-logprob0"))).toBe(want.answer_lens_logprob0);
    expect(sum.textContent).toContain(`\u03a3 = log p(span) \u2212 log F\u2080`);
    expect(sum.textContent).toContain(`${fmtLog(want.answer_logprob)} \u2212 (${fmtLog(want.answer_lens_logprob0)})`);
    expect(sum.classList.contains("iglens-ok")).toBe(true);
    // the segments are named with the payload's labels
    const ticks = [...panel.querySelectorAll(".iglens-span-bars-chart .iglens-xtick-label")].map((t) => t.textContent);
    expect(ticks).toEqual(golden.expected.segment_labels);
    expect(panel.textContent).toContain(formatToken(want.answer_text, { maxLen: 40 }));
    expect(inSpan(el)).toEqual([]); // the default is not a picked span
  });
});

describe("span selection in the strip", () => {
  it("shift-click spans from the selected token to the clicked one; Escape clears the span, then the selection", () => {
    const { el, model } = mount();
    fire(chipAt(el, 1), "click");
    expect(model.get("selected")).toBe(1);
    fire(chipAt(el, 3), "click", { shiftKey: true });
    expect(model.get("selected")).toBe(1); // the anchor stays selected
    expect(inSpan(el)).toEqual([1, 2, 3]);
    expect(chipAt(el, 1).classList.contains("iglens-span-start")).toBe(true);
    expect(chipAt(el, 3).classList.contains("iglens-span-end")).toBe(true);
    expectSpanLedger(el);
    expect(q(el, ".iglens-span-status").textContent).toContain("Span 1\u20133");
    fire(chipAt(el, 3), "keydown", { key: "Escape" });
    expect(inSpan(el)).toEqual([]);
    expect(q(el, ".iglens-span-panel").getAttribute("data-source")).toBe("answer");
    expect(model.get("selected")).toBe(1);
    fire(chipAt(el, 3), "keydown", { key: "Escape" });
    expect(model.get("selected")).toBe(-1);
  });

  it("a plain click selects one token and drops the span", () => {
    const { el, model } = mount();
    fire(chipAt(el, 3), "click");
    fire(chipAt(el, 1), "click", { shiftKey: true });
    expect(inSpan(el)).toEqual([1, 2, 3]);
    fire(chipAt(el, 2), "click");
    expect(model.get("selected")).toBe(2);
    expect(inSpan(el)).toEqual([]);
  });

  it("a drag across tokens spans from where it started", () => {
    const { el, model } = mount();
    fire(chipAt(el, 1), "mousedown", { button: 0, buttons: 1 });
    fire(chipAt(el, 2), "mouseover", { buttons: 1 });
    fire(chipAt(el, 3), "mouseover", { buttons: 1 });
    fire(chipAt(el, 3), "mouseup", { button: 0 });
    fire(chipAt(el, 3), "click"); // the click that ends the drag keeps the span
    expect(model.get("selected")).toBe(1);
    expect(inSpan(el)).toEqual([1, 2, 3]);
    expectSpanLedger(el);
    // hovering without the button held makes no span
    fire(chipAt(el, 5), "click");
    fire(chipAt(el, 2), "mouseover", { buttons: 0 });
    expect(inSpan(el)).toEqual([]);
  });

  it("Shift+arrow keys extend the span from the focused token; a plain arrow drops it", () => {
    const { el, model } = mount();
    fire(chipAt(el, 1), "click");
    fire(chipAt(el, 1), "keydown", { key: "ArrowRight", shiftKey: true });
    expect(inSpan(el)).toEqual([1, 2]);
    expect(document.activeElement).toBe(chipAt(el, 2));
    fire(chipAt(el, 2), "keydown", { key: "ArrowRight", shiftKey: true });
    expect(inSpan(el)).toEqual([1, 2, 3]);
    expect(model.get("selected")).toBe(1);
    expectSpanLedger(el);
    fire(chipAt(el, 3), "keydown", { key: "ArrowLeft", shiftKey: true });
    expect(inSpan(el)).toEqual([1, 2]);
    fire(chipAt(el, 2), "keydown", { key: "ArrowRight" });
    expect(inSpan(el)).toEqual([]);
    expect(model.get("selected")).toBe(2);
  });

  it("selecting the answer's positions as a span shows the payload's answer ledger", () => {
    const { el } = mount();
    const [a, b] = [want.answer_positions[0], want.answer_positions.at(-1)];
    fire(chipAt(el, a), "click");
    fire(chipAt(el, b), "click", { shiftKey: true });
    const panel = q(el, ".iglens-span-panel");
    expect(panel.getAttribute("data-source")).toBe("answer");
    expect(values(panel, "rect.iglens-span-bar", "data-value")).toEqual(want.answer_logprob_contributions);
  });

  it("with a contrast (lens_logprobs null) a span's panel says it needs a result without one", () => {
    const { el } = mount((result) => (result.lens_logprobs = null));
    fire(chipAt(el, 1), "click");
    fire(chipAt(el, 3), "click", { shiftKey: true });
    const panel = q(el, ".iglens-span-panel");
    expect(q(panel, ".iglens-span-error").textContent).toContain("needs a result without a contrast");
    expect(panel.querySelector("rect.iglens-span-bar")).toBeNull();
  });

  it("a result without answers shows a hint, and no versus view", () => {
    const { el } = mount((result) => (result.answer = result.versus = result.comparison = null));
    expect(q(el, ".iglens-span-hint").textContent).toContain("Shift-click");
    expect(el.querySelector(".iglens-versus")).toBeNull();
    fire(chipAt(el, 1), "click");
    fire(chipAt(el, 3), "click", { shiftKey: true });
    expectSpanLedger(el);
  });
});

describe("answer vs answer", () => {
  it("draws both answers' curves, the differential bars in log space, the gap at the output and the onset", () => {
    const { el } = mount();
    expect(q(el, ".iglens-versus").getAttribute("data-space")).toBe("prob"); // opens on probabilities
    fire(q(el, ".iglens-versus button[data-space=log]"), "click");
    const v = q(el, ".iglens-versus");
    expect(v.getAttribute("data-space")).toBe("log");
    const curves = [...v.querySelectorAll("polyline.iglens-versus-curve")];
    expect(curves.map((c) => c.getAttribute("data-answer"))).toEqual(["answer", "versus"]);
    expect(/** @type {string} */ (curves[0].getAttribute("data-values")).split(" ").map(Number)).toEqual(want.answer_lens_probs);
    expect(/** @type {string} */ (curves[1].getAttribute("data-values")).split(" ").map(Number)).toEqual(want.versus_lens_probs);
    const legend = [...v.querySelectorAll(".iglens-key[data-answer]")].map((k) => k.textContent);
    expect(legend).toEqual([formatToken(want.answer_text, { maxLen: 40 }), formatToken(want.versus_text, { maxLen: 40 })]);
    expect(values(v, "rect.iglens-versus-bar", "data-value")).toEqual(want.comparison_logprob_contributions);
    const gap = q(v, ".iglens-versus-gap");
    expect(Number(gap.getAttribute("data-logprob-gap"))).toBe(want.comparison_logprob_gap);
    expect(Number(gap.getAttribute("data-prob-gap"))).toBe(want.comparison_prob_gap);
    expect(gap.textContent).toContain(`log p(a) \u2212 log p(b) = ${fmtLog(want.comparison_logprob_gap)}`);
    const onset = q(v, ".iglens-versus-onset");
    expect(onset.getAttribute("data-onset")).toBe(String(want.comparison_onset));
    // the output prefers b here (the gap is negative): the onset is the block moving the gap towards b
    expect(want.comparison_logprob_gap).toBeLessThan(0);
    expect(onset.getAttribute("data-winner")).toBe("versus");
    // block 4 ends the last segment of boundaries [0, 1, 4]: named by its label, "blocks 2–4"
    expect(want.comparison_onset).toBe(4);
    expect(onset.textContent).toBe(`The output prefers b; the block moving the log gap most towards it: blocks ${golden.expected.segment_labels[1]}.`);
  });

  it("switches the differential bars to probability space and back", () => {
    const { el } = mount();
    fire(q(el, ".iglens-versus button[data-space=prob]"), "click");
    const v = q(el, ".iglens-versus");
    expect(v.getAttribute("data-space")).toBe("prob");
    expect(q(v, "button[data-space=prob]").getAttribute("aria-pressed")).toBe("true");
    expect(values(v, "rect.iglens-versus-bar", "data-value")).toEqual(want.comparison_prob_contributions);
    expect(q(v, ".iglens-versus-onset").getAttribute("data-onset")).toBe(String(want.comparison_prob_onset));
    // the span chosen meanwhile does not reset the switch
    fire(chipAt(el, 1), "click");
    fire(chipAt(el, 3), "click", { shiftKey: true });
    expect(q(el, ".iglens-versus").getAttribute("data-space")).toBe("prob");
    fire(q(el, ".iglens-versus button[data-space=log]"), "click");
    expect(values(el, ".iglens-versus rect.iglens-versus-bar", "data-value")).toEqual(want.comparison_logprob_contributions);
  });

  it("checks Σ of the differential bars against the gaps, and says when they differ", () => {
    const { el } = mount();
    fire(q(el, ".iglens-versus button[data-space=log]"), "click"); // the log ledger's check
    const line = q(el, ".iglens-versus-sum");
    expect(line.classList.contains("iglens-ok")).toBe(true);
    expect(line.textContent).toContain(` = ${fmtLog(want.comparison_logprob_gap)} \u2212 (`);
    // a gap the entries do not add up to (as under the Riemann estimator): "≈", and by how much
    const off = mount((result) => {
      result.comparison.logprob_gap += 0.5;
      result.estimator = "riemann";
    }).el;
    fire(q(off, ".iglens-versus button[data-space=log]"), "click");
    const bad = q(off, ".iglens-versus-sum");
    expect(bad.classList.contains("iglens-warn")).toBe(true);
    expect(bad.textContent).toContain(`\u2248 ${fmtLog(want.comparison_logprob_gap + 0.5)}`);
    expect(bad.textContent).toContain("off by 0.5000");
    expect(bad.textContent).toContain("Riemann");
  });

  it("inserts the answers' texts and tokens as text, never as markup", () => {
    const EVIL = "<img src=x onerror=alert(1)>";
    const { el } = mount((result) => {
      result.answer.text = EVIL;
      result.answer.tokens = result.answer.tokens.map(() => EVIL);
      result.versus.text = `<script>alert(2)</script>`;
      result.target_tokens = result.target_tokens.map(() => EVIL);
    });
    fire(chipAt(el, 1), "click");
    fire(chipAt(el, 3), "click", { shiftKey: true });
    expect(document.querySelectorAll("img, script, [onerror]").length).toBe(0);
    expect(q(el, ".iglens-versus").textContent).toContain("<script>alert(2)</script>");
    expect(q(el, ".iglens-span-split thead").textContent).toContain("<img src=x");
    fire(chipAt(el, 1), "keydown", { key: "Escape" }); // back to the whole answer: its text and tokens
    expect(q(el, ".iglens-span-panel").textContent).toContain("<img src=x");
    expect(document.querySelectorAll("img, script, [onerror]").length).toBe(0);
  });
});

describe("a probability ledger at zero (a long answer's joint probability underflows)", () => {
  /** What Python sends then (tests/core/test_answers.py): onset −1, F = 0 and Δ = 0 at every depth. @param {any} ledger */
  const underflow = (ledger) => {
    const k1 = ledger.lens_probs.shape[0];
    ledger.onset = -1;
    ledger.lens_probs = encodeArray(new Float32Array(k1), [k1], { base64: true });
    ledger.prob_contributions = encodeArray(new Float32Array(k1 - 1), [k1 - 1], { base64: true });
  };

  it("says so, names no probability onset and points to the log ledger, whose onset it still names", () => {
    const { el } = mount((result) => {
      underflow(result.answer);
      underflow(result.versus);
      result.comparison.prob_onset = -1;
    });
    const onset = q(el, ".iglens-span-onset").textContent;
    expect(onset).toContain("the probability ledger is 0 at float precision");
    expect(onset).toContain(`names no onset; onset block ${golden.state.result.answer.logprob_onset} (log)`);
    expect(onset).not.toContain("(probability)");
    fire(q(el, ".iglens-versus button[data-space=prob]"), "click");
    const line = q(el, ".iglens-versus-onset");
    expect(line.getAttribute("data-onset")).toBe("-1");
    expect(line.textContent).toBe(
      "Both answers' probability ledgers are 0 at float precision (F below the smallest double at every depth) and name no block: read the log-probability view.",
    );
  });

  it("keeps the onset of a probability ledger that is a number", () => {
    const { el } = mount();
    expect(q(el, ".iglens-span-onset").textContent).toContain(`onset block ${golden.state.result.answer.onset} (probability)`);
    expect(q(el, ".iglens-span-onset").textContent).not.toContain("float precision");
  });
});
