// @vitest-environment jsdom
// The exported PNG/SVG carries the detail panel's charts of the selected token below the view.
import { describe, it, expect, beforeAll, afterEach, vi } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeState } from "../testing/fixture.js";
import { decodeResult } from "../model/result.js";
import { formatToken } from "../lib/tokens.js";
import { withDetail, detailHeading, detailFigure, DETAIL_HEIGHT } from "./detail.js";
import { heatmapFigure, heatmapRows } from "./heatmap.js";
import { svgPainter, recordingPainter } from "./painters.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
  vi.restoreAllMocks();
});

const evil = "<img src=x onerror=alert(1)>";
const state = makeState({ T: 6, nBlocks: 6, every: 2, selected: 3 });
state.result.tokens[3] = evil;
const r = /** @type {import("../model/result.js").Result} */ (decodeResult(state.result));

/** @param {(make: any) => any} draw */
const svgOf = (draw) => {
  /** @type {any} */ let p = null;
  draw((/** @type {number} */ w, /** @type {number} */ hh) => (p = svgPainter(w, hh, "t")));
  return { text: /** @type {string} */ (p.toString()), painter: p };
};
/** @param {string} text */
const parse = (text) => new DOMParser().parseFromString(text, "image/svg+xml");
const heatmap = (/** @type {any} */ make) => heatmapFigure(make, r, { theme: "light", rows: heatmapRows(r.T, 3), selected: 3 });

/** The points a polyline of the detail (drawn alone, W wide) has, shifted down by dy. @param {number} W @param {number} dy */
function detailPolyline(W, dy) {
  const rec = svgPainter(W, DETAIL_HEIGHT, "d");
  detailFigure(rec, r, 3, { theme: "light", width: W });
  const line = /** @type {Element} */ (rec.svg.querySelector("polyline"));
  return (line.getAttribute("points") ?? "")
    .split(" ")
    .map((pt) => pt.split(",").map(Number))
    .map(([x, y]) => `${Number(x.toFixed(2))},${Number((y + dy).toFixed(2))}`)
    .join(" ");
}

describe("export with the detail panel's charts", () => {
  it("the SVG holds the view, then the titled detail: bars and the curve of the selected token", () => {
    const main = svgOf(heatmap);
    const both = svgOf(withDetail(heatmap, r, { theme: "light", selected: 3 }));
    expect(both.painter.height).toBe(main.painter.height + DETAIL_HEIGHT);
    expect(both.painter.width).toBe(main.painter.width);
    const doc = parse(both.text);
    expect(doc.getElementsByTagName("parsererror").length).toBe(0);
    const texts = [...doc.getElementsByTagName("text")].map((t) => t.textContent ?? "");
    expect(texts).toContain(detailHeading(r, 3));
    expect(detailHeading(r, 3)).toContain(formatToken(evil, { maxLen: 24 }));
    expect(texts.some((t) => t.startsWith("(a) contribution of each segment"))).toBe(true);
    expect(texts).toContain(`(b) ${r.targetName} after block L`);
    // the main figure comes first, unchanged
    expect(texts.slice(0, 3)).toEqual([...parse(main.text).getElementsByTagName("text")].slice(0, 3).map((t) => t.textContent));
    // the curve: one point per boundary, as the detail drawn alone, shifted below the view
    const lines = [...doc.getElementsByTagName("polyline")];
    const want = detailPolyline(main.painter.width, main.painter.height);
    expect(lines.map((l) => l.getAttribute("points"))).toContain(want);
    expect(want.split(" ").length).toBe(r.k + 1);
    // its rises are the contributions: y decreases with the lens value
    expect(doc.getElementsByTagName("img").length).toBe(0);
    expect(doc.getElementsByTagName("script").length).toBe(0);
    expect(both.text).not.toContain("<img");
  });

  it("the detail bars: one per finite contribution", () => {
    const rec = recordingPainter(600, DETAIL_HEIGHT);
    const p = svgPainter(600, DETAIL_HEIGHT, "d");
    detailFigure(rec, r, 3, { theme: "light", width: 600 });
    rec.replay(p, 0, 0);
    const strokes = [...p.svg.querySelectorAll("rect[stroke]")];
    expect(strokes.length).toBe(r.k);
  });

  it("nothing is added without a selected token with a target", () => {
    expect(withDetail(heatmap, r, { theme: "light", selected: -1 })).toBe(heatmap);
    const last = r.T - 1; // the last position has no next token
    if (!r.hasTarget[last]) expect(withDetail(heatmap, r, { theme: "light", selected: last })).toBe(heatmap);
  });

  it("the widget's ⤓ SVG button downloads the figure with the detail of the selection", async () => {
    /** @type {Blob[]} */
    const blobs = [];
    const g = /** @type {any} */ (globalThis.URL);
    g.createObjectURL = (/** @type {Blob} */ b) => (blobs.push(b), "blob:x");
    g.revokeObjectURL = () => {};
    vi.spyOn(HTMLAnchorElement.prototype, "click").mockImplementation(() => {});
    const { el } = mountWidget({ state: makeState({ T: 6, nBlocks: 6, every: 2, selected: 2 }) });
    const rr = /** @type {import("../model/result.js").Result} */ (decodeResult(makeState({ T: 6, nBlocks: 6, every: 2, selected: 2 }).result));
    fire(/** @type {HTMLElement} */ (el.querySelector("[data-export='svg']")), "click");
    await vi.waitFor(() => expect(blobs.length).toBe(1));
    const text = await new Promise((resolve) => {
      const fr = new FileReader();
      fr.onload = () => resolve(String(fr.result));
      fr.readAsText(blobs[0]);
    });
    const texts = [...parse(text).getElementsByTagName("text")].map((t) => t.textContent);
    expect(texts).toContain(detailHeading(rr, 2));
    expect(texts).toContain(`(b) ${rr.targetName} after block L`);
    delete g.createObjectURL;
    delete g.revokeObjectURL;
  });
});
