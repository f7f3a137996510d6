// @vitest-environment jsdom
// Slides (figures/lesson.js lessonFigure, figures/curve.js curveFigure): the student view's picture and the
// detail panel's cumulative curve, as SVG (parsed back) and as what the PNG's canvas draws.
// The curves' points are read back through the figure's own axis labels (the "0%" and top
// ticks) and compared with values computed apart from the widget: the whole answer's and the
// versus answer's probabilities that Python computed with numpy (payload.json "expected"), and
// the lens probabilities decoded here straight from the payload's base64 buffer. The title's
// prompt, answer and lens are hostile strings that must come out escaped, as text.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, fire } from "../testing/dom.js";
import { render } from "../views/app.js";
import { createModel } from "../standalone.js";
import { decodeResult } from "../model/result.js";
import { formatToken } from "../lib/tokens.js";
import { fmtPercentPlain } from "../lib/format.js";
import { lessonData, lessonPosition } from "../model/lesson.js";
import { notableBlocks } from "../model/walk.js";
import { curveFigure } from "./curve.js";
import { lessonFigure } from "./lesson.js";
import { svgPainter } from "./painters.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));
const want = golden.expected.answers;

const PROMPT = "What is <script>alert(1)</script> the capital\u202e of\nVietnam?";
const ANSWER = " <b>Ho</b>\u202e Chi";
const LENS = "tuned<img src=x>";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

/** The payload's result, optionally with hostile texts. @param {boolean} hostile */
function payloadResult(hostile) {
  const raw = structuredClone(golden.state.result);
  if (hostile) {
    raw.request = { ...raw.request, prompt: PROMPT };
    raw.answer = { ...raw.answer, text: ANSWER };
    raw.lens = LENS;
    raw.controls = { ...raw.controls, lens: LENS };
  }
  return { raw, r: /** @type {import("../model/result.js").Result} */ (decodeResult(raw)) };
}

/** A float32 buffer of the payload, decoded here. @param {{buffer: string, shape: number[]}} b */
function float32(b) {
  const bytes = Buffer.from(b.buffer, "base64");
  return { values: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4), shape: b.shape };
}

/** Draw on an SVG painter and parse the file back. @param {(make: any) => any} draw */
function svgOf(draw, title = "t") {
  /** @type {any} */ let p = null;
  draw((/** @type {number} */ w, /** @type {number} */ hh) => (p = svgPainter(w, hh, title)));
  const text = /** @type {string} */ (p.toString());
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  expect(doc.getElementsByTagName("parsererror").length).toBe(0);
  return { text, doc };
}

/** Every text node of the SVG, in order. @param {Document} doc */
const texts = (doc) => [...doc.querySelectorAll("text")].map((t) => /** @type {string} */ (t.textContent));

/**
 * The polylines' values in percent, read back through the y labels: the "0%" tick and the
 * top tick (its value from its own text).
 * @param {Document} doc
 */
function curvesInPercent(doc) {
  const ticks = [...doc.querySelectorAll("text")].filter((t) => /^[0-9.]+%$/.test(t.textContent ?? ""));
  const zero = /** @type {Element} */ (ticks.find((t) => t.textContent === "0%"));
  const topTick = ticks.reduce((a, b) => (parseFloat(b.textContent ?? "") > parseFloat(a.textContent ?? "") ? b : a));
  const y0 = Number(zero.getAttribute("y"));
  const yTop = Number(topTick.getAttribute("y"));
  const vTop = parseFloat(topTick.textContent ?? "");
  return [...doc.querySelectorAll("polyline")].map((pl) =>
    (pl.getAttribute("points") ?? "").split(" ").map((pt) => {
      const [x, y] = pt.split(",").map(Number);
      return { x, v: ((y0 - y) / (y0 - yTop)) * vTop };
    }),
  );
}

describe("the student view as a slide", () => {
  it("its curves are the answer's and the versus answer's probabilities Python computed, in percent", () => {
    const { raw, r } = payloadResult(false);
    const lesson = lessonData(r, lessonPosition(r, golden.state.selected));
    const { doc } = svgOf((make) => lessonFigure(make, r, lesson, { theme: "light", legend: (c) => formatToken(c.label, { maxLen: 40 }) }));
    const curves = curvesInPercent(doc);
    const keys = lesson.series.map((c) => c.key);
    expect(keys[0]).toBe("answer");
    expect(keys).toContain("versus");
    expect(curves.length).toBe(keys.length);
    const k1 = raw.boundaries.length;
    // the whole answer: F after each boundary, as numpy computed it (float32 on the wire)
    const answer = curves[keys.indexOf("answer")];
    expect(answer.length).toBe(k1);
    answer.forEach((pt, L) => expect(pt.v).toBeCloseTo(100 * want.answer_lens_probs[L], 1));
    const versus = curves[keys.indexOf("versus")];
    versus.forEach((pt, L) => expect(pt.v).toBeCloseTo(100 * want.versus_lens_probs[L], 1));
    // the position's next token, when drawn: its row of lens_probs, decoded here
    if (keys.includes("token")) {
      const lp = float32(raw.lens_probs);
      const i = lesson.position;
      curves[keys.indexOf("token")].forEach((pt, L) => expect(pt.v).toBeCloseTo(100 * lp.values[i * k1 + L], 1));
    }
    // left to right over the blocks
    for (let L = 1; L < k1; L++) expect(answer[L].x).toBeGreaterThan(answer[L - 1].x);
    // the top guesses, in percent, and the key's words
    const all = texts(doc);
    const top = all.find((t) => t.startsWith(`The model's top guesses after \u201c${lesson.input}\u201d:`));
    expect(top).toContain(`${lesson.top[0].text} ${fmtPercentPlain(lesson.top[0].p)}`);
    for (const c of lesson.series) expect(all).toContain(formatToken(c.label, { maxLen: 40 }));
  });

  it("ends with the story the view tells: the walk's sentences of the notable blocks, in order", () => {
    const { r } = payloadResult(false);
    const lesson = lessonData(r, lessonPosition(r, golden.state.selected));
    const { doc } = svgOf((make) => lessonFigure(make, r, lesson, { theme: "light", legend: (c) => formatToken(c.label, { maxLen: 40 }) }));
    const events = notableBlocks(lesson.walk);
    expect(events.length).toBeGreaterThan(0);
    const t = texts(doc);
    const at = t.indexOf("Block by block:");
    expect(at).toBeGreaterThan(0);
    expect(t.slice(at + 1)).toEqual(events.map((e) => `\u2022 ${e.sentence}`));
    // the same sentences the student view shows as its story
    const el = document.createElement("div");
    document.body.appendChild(el);
    render({ model: createModel({ ...structuredClone(golden.state), view: "lesson" }), el });
    const shown = [...el.querySelectorAll("[data-view=lesson] .iglens-lesson-event")].map((b) => b.textContent);
    expect(shown).toEqual(events.map((e) => e.sentence));
  });

  it("the title names the prompt, the answer and the lens, escaped; nothing is markup (SVG and PNG)", () => {
    const { r } = payloadResult(true);
    const lesson = lessonData(r, lessonPosition(r, golden.state.selected));
    const { text, doc } = svgOf((make) => lessonFigure(make, r, lesson, { theme: "dark", legend: (c) => formatToken(c.label, { maxLen: 40 }) }), "the <title>");
    const t = texts(doc);
    expect(t[0]).toBe(`IG-Lens lesson \u00b7 ${r.modelName}`);
    expect(t[1]).toBe(`prompt: \u201c${formatToken(PROMPT, { maxLen: 120 })}\u201d`);
    expect(t[2]).toContain(`answer: \u201c${formatToken(ANSWER, { maxLen: 80 })}\u201d`);
    expect(t[2]).toContain(`read through the ${formatToken(LENS, { maxLen: 40 })} lens`);
    expect(t[2]).toContain(" vs \u201c"); // the answer to compare with
    // escaped: the right-to-left override and the newline are visible escapes, and the
    // file holds no element but the painter's own
    expect(t.join("")).not.toMatch(/[\u202e\n]/);
    expect(text).not.toMatch(/<script|<b>|<img/);
    const tags = new Set([...doc.querySelectorAll("*")].map((e) => e.tagName));
    expect([...tags].every((n) => ["svg", "title", "rect", "text", "line", "polyline", "circle"].includes(n))).toBe(true);
    expect(doc.querySelector("title")?.textContent).toBe("the <title>");
    // the PNG: the same drawing on a canvas, so the same texts
    /** @type {string[]} */
    const filled = [];
    const none = () => {};
    lessonFigure(
      (w, hh) => ({
        width: w,
        height: hh,
        rect: none,
        text: (_x, _y, s) => void filled.push(s),
        line: none,
        polyline: none,
        circle: none,
        image: none,
        measure: (s) => 6 * s.length,
      }),
      r,
      lesson,
      { theme: "light", legend: (c) => formatToken(c.label, { maxLen: 40 }) },
    );
    expect(filled.slice(0, 3)).toEqual(t.slice(0, 3));
  });
});

describe("the detail panel's cumulative curve as a slide", () => {
  it("its points are the selected position's lens probabilities, decoded apart, in percent", () => {
    const { raw, r } = payloadResult(true);
    const i = golden.state.selected;
    const { doc } = svgOf((make) => curveFigure(make, r, i, { theme: "light" }));
    const [curve] = curvesInPercent(doc);
    const lp = float32(raw.lens_probs);
    const k1 = raw.boundaries.length;
    expect(curve.length).toBe(k1);
    // read back through the axis labels: good to the drawing's 0.01 px rounding
    curve.forEach((pt, L) => expect(pt.v).toBeCloseTo(100 * lp.values[i * k1 + L], 1));
    const t = texts(doc);
    expect(t[1]).toBe(`prompt: \u201c${formatToken(PROMPT, { maxLen: 120 })}\u201d`);
    expect(t[2]).toContain(`at [${i}] ${formatToken(r.tokens[i], { maxLen: 40 })}`);
    expect(t[2]).toContain(`read through the ${formatToken(LENS, { maxLen: 40 })} lens`);
  });
});

describe("the buttons", () => {
  it("the student view has PNG and SVG buttons; the detail panel has its curve's", async () => {
    const el = document.createElement("div");
    document.body.appendChild(el);
    const state = structuredClone(golden.state);
    state.view = "lesson";
    const model = createModel(state);
    render({ model, el });
    const lesson = /** @type {HTMLElement} */ (el.querySelector("[data-view=lesson]"));
    const kinds = [...lesson.querySelectorAll("[data-lesson-export]")].map((b) => b.getAttribute("data-lesson-export"));
    expect(kinds).toEqual(["png", "svg"]);
    /** @type {Blob[]} */
    const blobs = [];
    const orig = URL.createObjectURL;
    URL.createObjectURL = (/** @type {Blob} */ b) => (blobs.push(b), "blob:x");
    URL.revokeObjectURL = () => {};
    try {
      fire(/** @type {HTMLElement} */ (lesson.querySelector("[data-lesson-export=svg]")), "click");
      await new Promise((ok) => setTimeout(ok, 0));
      expect(blobs.length).toBe(1);
      const svg = await new Promise((ok) => {
        const fr = new FileReader();
        fr.onload = () => ok(String(fr.result));
        fr.readAsText(blobs[0]);
      });
      expect(svg).toMatch(/^<\?xml/);
      expect(lesson.querySelector(".iglens-slide-export-status")?.textContent).toBe("saved iglens-lesson-tiny-llama-b.svg");
      model.set("view", "heatmap");
      const curveButtons = [...el.querySelectorAll(".iglens-detail [data-curve-export]")].map((b) => b.getAttribute("data-curve-export"));
      expect(curveButtons).toEqual(["png", "svg"]);
    } finally {
      URL.createObjectURL = orig;
    }
  });
});
