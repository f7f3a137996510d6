// @vitest-environment jsdom
// The title block of the exported figures (PNG and SVG) with hostile token strings: the
// typed target and contrast and the prompt go through formatToken, as in the header.
import { describe, it, expect, beforeAll } from "vitest";
import { makeResult } from "../testing/fixture.js";
import { installFakeCanvas } from "../testing/dom.js";
import { decodeResult } from "../model/result.js";
import { formatToken } from "../lib/tokens.js";
import { readComparison } from "../model/comparison.js";
import { compareFigure } from "./compare.js";
import { gridFigure } from "./grid.js";
import { heatmapFigure } from "./heatmap.js";
import { svgPainter } from "./painters.js";
import { titleLines, targetText } from "./titles.js";

const SCRIPT = "<script>alert(1)</script>";
// a leading space, a newline, a right-to-left override, markup
const TARGET = " Paris\n\u202eevil";
const CONTRAST = ` ${SCRIPT}`;
const PROMPT_TOKENS = [" The", "\u202e", " capital", "\n", SCRIPT, " is"];

/** A result whose typed target, contrast and prompt are hostile. @param {string} [id] */
function hostile(id = "r1") {
  const raw = makeResult({ T: PROMPT_TOKENS.length, nBlocks: 6, tokens: PROMPT_TOKENS, contrast: true, id });
  raw.controls = { ...raw.controls, target: TARGET, contrast: CONTRAST };
  raw.request = { ...raw.request, target: TARGET, contrast: CONTRAST };
  return { raw, r: /** @type {import("../model/result.js").Result} */ (decodeResult(raw)) };
}

/** What the header writes for the target. */
const TARGET_TEXT = `target: ${formatToken(TARGET, { maxLen: 40 })} vs ${formatToken(CONTRAST, { maxLen: 40 })}`;

/**
 * A painter that keeps every text it is asked to draw (what the PNG's canvas fills), in order.
 * @param {string[]} texts
 * @returns {(w: number, h: number) => import("./painters.js").Painter}
 */
function capturing(texts) {
  const none = () => {};
  return (w, hh) => ({
    width: w,
    height: hh,
    rect: none,
    text: (/** @type {number} */ _x, /** @type {number} */ _y, /** @type {string} */ t) => void texts.push(t),
    line: none,
    polyline: none,
    circle: none,
    image: none,
    measure: (/** @type {string} */ t) => 6 * Array.from(t).length,
  });
}

/** @param {(make: any) => any} draw @param {string} title */
function svgDoc(draw, title) {
  /** @type {any} */ let p = null;
  draw((/** @type {number} */ w, /** @type {number} */ hh) => (p = svgPainter(w, hh, title)));
  return new DOMParser().parseFromString(/** @type {string} */ (p.toString()), "image/svg+xml");
}

beforeAll(() => {
  installFakeCanvas(); // the compare figure's panels draw their bitmap on a canvas
  HTMLCanvasElement.prototype.toDataURL = () => "data:image/png;base64,"; // and embed it
});

describe("exported figure titles", () => {
  const { raw, r } = hostile();

  it("the target line is the header's: leading spaces as \u2423, control and bidi characters as escapes", () => {
    expect(r.controls.target).toBe(TARGET); // decoded as typed
    expect(targetText(r)).toBe(TARGET_TEXT);
    expect(TARGET_TEXT).toContain("\u2423Paris\u21b5\\u202eevil");
    expect(TARGET_TEXT).toContain(`vs \u2423${SCRIPT}`);
    const lines = titleLines(r, "logit-lens grid");
    expect(lines).toEqual([
      `IG-Lens logit-lens grid \u00b7 ${r.modelName}`,
      `prompt: \u201c${formatToken(raw.request.prompt, { maxLen: 120 })}\u201d`,
      `${TARGET_TEXT} \u00b7 estimator: ${r.estimator}, m=${r.steps} \u00b7 boundaries: ${r.controls.boundaries} \u00b7 ${r.nBlocks} blocks, ${r.T} positions`,
    ]);
    for (const line of lines) {
      expect(line).not.toMatch(/[\n\r\u202e]/);
      expect(line).not.toMatch(/: \s|vs \s/); // no raw leading space after "target:" / "vs"
    }
  });

  const comparison = () => {
    const b = hostile("r2");
    return readComparison({ labels: ["A", "B"], results: [b.raw], limit: 0.5, result_id: r.id }, r);
  };
  /** @type {Array<[string, string, (make: any) => any]>} */
  const figures = [
    ["heatmap", "layer heatmap", (make) => heatmapFigure(make, r, { theme: "light", rows: [0, r.T - 1], selected: 2 })],
    ["grid", "logit-lens grid", (make) => gridFigure(make, r, { theme: "dark", columns: [0, r.T - 1], mode: "probability", selected: 1 })],
    ["compare", "pinned tokens", (make) => compareFigure(make, readComparison({}, r), { theme: "light", pins: [[0, 3]], y: "delta" })],
  ];

  for (const [name, view, draw] of figures) {
    it(`${name}: the drawn title lines (PNG and SVG) are the formatted text`, () => {
      const lines = titleLines(r, view);
      /** @type {string[]} */
      const drawn = [];
      draw(capturing(drawn)); // the PNG's painter draws the same calls on a canvas
      expect(drawn.slice(0, lines.length)).toEqual(lines);

      const title = lines.join(" \u00b7 ");
      const doc = svgDoc(draw, title);
      expect(doc.getElementsByTagName("parsererror").length).toBe(0);
      const texts = [...doc.getElementsByTagName("text")].map((t) => t.textContent);
      expect(texts.slice(0, lines.length)).toEqual(lines);
      expect(doc.getElementsByTagName("title")[0].textContent).toBe(title);
      expect(doc.getElementsByTagName("script").length).toBe(0);
      // only the painter's own elements: nothing from a token became markup
      const tags = new Set([...doc.getElementsByTagName("*")].map((e) => e.tagName));
      for (const tag of tags) expect(["svg", "title", "rect", "text", "line", "polyline", "circle", "image", "g"]).toContain(tag);
      const all = texts.join("\n");
      expect(all).not.toContain(TARGET);
      expect(all).not.toContain("\u202e");
    });
  }

  it("compare of several results: each result's line has its formatted target", () => {
    const cmp = comparison();
    expect(cmp.multi).toBe(true);
    /** @type {string[]} */
    const drawn = [];
    compareFigure(capturing(drawn), cmp, { theme: "light", pins: [], y: "delta" });
    const perResult = drawn.filter((t) => /^[AB]: /.test(t) && t.includes(" \u00b7 prompt \u201c"));
    expect(perResult.length).toBe(2);
    for (const line of perResult) {
      expect(line).toContain(` \u00b7 ${TARGET_TEXT} \u00b7 `);
      expect(line).not.toMatch(/[\n\r\u202e]/);
    }
    const doc = svgDoc((make) => compareFigure(make, cmp, { theme: "light", pins: [], y: "delta" }), titleLines(r, "comparison").join(" \u00b7 "));
    expect(doc.getElementsByTagName("parsererror").length).toBe(0);
    expect(doc.getElementsByTagName("script").length).toBe(0);
  });
});
