// @vitest-environment jsdom
// The logit-lens grid, the compare view, the view switcher and the figure export.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { mountWidget, fire } from "../../testing/dom.js";
import { makeResult, makeState } from "../../testing/fixture.js";
import { decodeResult, topAt } from "../../model/result.js";
import { decodeArray } from "../../model/codec.js";
import { formatToken } from "../../lib/tokens.js";
import { gridGeometry, visibleColumns, visibleGridRows, gridHit, scrollToColumn, scrollToRow, presentGridHeight } from "./geometry.js";
import { cellValue, boundaryLabel } from "../../model/figure-data.js";
import { readComparison, readPins, togglePin, sharedLimit, cumulativeContribution, MAX_PINS } from "../../model/comparison.js";
import { compareFigure } from "../../figures/compare.js";
import { figureFileName } from "../../figures/download.js";
import { gridFigure } from "../../figures/grid.js";
import { heatmapFigure, heatmapRows } from "../../figures/heatmap.js";
import { svgPainter, xmlSafe } from "../../figures/painters.js";
import { titleLines } from "../../figures/titles.js";

const EVIL = "<img src=x onerror=alert(1)>";

/** A fake 2D context per canvas that records every fillText (jsdom has no canvas). */
function installRecordingCanvas() {
  const make = () => {
    /** @type {string[]} */
    const texts = [];
    return new Proxy(
      { texts },
      {
        get(target, prop) {
          if (prop in target) return /** @type {any} */ (target)[prop];
          if (prop === "measureText") return (/** @type {string} */ t) => ({ width: 6 * Array.from(String(t)).length });
          if (prop === "createImageData")
            return (/** @type {number} */ w, /** @type {number} */ hh) => ({ width: w, height: hh, data: new Uint8ClampedArray(w * hh * 4) });
          if (prop === "fillText")
            return (/** @type {string} */ t) => {
              texts.push(String(t));
            };
          return () => {};
        },
        set(target, prop, value) {
          /** @type {any} */ (target)[prop] = value;
          return true;
        },
      },
    );
  };
  // @ts-ignore
  HTMLCanvasElement.prototype.getContext = function getContext() {
    // @ts-ignore
    if (!this.__ctx) this.__ctx = make();
    // @ts-ignore
    return this.__ctx;
  };
}

beforeAll(() => {
  installRecordingCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
/** @param {any} state */
const decode = (state) => /** @type {import("../../model/result.js").Result} */ (decodeResult(state.result));
/** unique token strings w0, w1, … (so a header text names its column) @param {number} T */
const words = (T) => Array.from({ length: T }, (_, i) => ` w${i}`);

describe("grid geometry (pure)", () => {
  const g = gridGeometry({ T: 512, rows: 31, width: 700 });
  it("only the columns in the viewport are visible", () => {
    expect(visibleColumns(g, 0)).toEqual([0, Math.ceil((700 - g.labelW) / g.colW) - 1]);
    const sl = 100 * g.colW + 5;
    const [a, b] = /** @type {[number, number]} */ (visibleColumns(g, sl));
    expect(a).toBe(100);
    expect(b).toBe(Math.ceil((sl + 700 - g.labelW) / g.colW) - 1);
    expect(b - a + 1).toBeLessThanOrEqual(Math.ceil((700 - g.labelW) / g.colW) + 1);
  });
  it("hit tests cells, the header/footer bands and the gutter", () => {
    expect(gridHit(g, g.labelW + 2 * g.colW + 3, g.headerH + 4 * g.rowH + 2, 0, 0)).toEqual({ pos: 2, row: 4 });
    expect(gridHit(g, g.labelW + 2 * g.colW + 3, g.headerH + 4 * g.rowH + 2, 10 * g.colW, 0)).toEqual({ pos: 12, row: 4 });
    expect(gridHit(g, g.labelW + 1, 3, 0, 0)).toEqual({ pos: 0, row: -1 });
    expect(gridHit(g, 10, 100, 0, 0)).toBeNull();
  });
  it("scrolls a column into view and leaves a visible one alone", () => {
    expect(scrollToColumn(g, 3, 0)).toBe(0);
    const sl = scrollToColumn(g, 300, 0);
    const [a, b] = /** @type {[number, number]} */ (visibleColumns(g, sl));
    expect(300).toBeGreaterThanOrEqual(a);
    expect(300).toBeLessThanOrEqual(b);
  });
  it("scrolls a row into view (the last one whole at the bottom) and leaves a visible one alone", () => {
    const short = gridGeometry({ T: 45, rows: 31, width: 700, maxHeight: /** @type {number} */ (presentGridHeight(768)) });
    expect(short.viewH).toBe(323); // 0.42 of a 768 px window
    expect(presentGridHeight(2000)).toBe(560);
    expect(presentGridHeight(0)).toBeUndefined();
    const max = short.contentH - short.viewH;
    expect(scrollToRow(short, 30, 0)).toBe(max);
    expect(visibleGridRows(short, max)?.[1]).toBe(30);
    expect(scrollToRow(short, 2, 0)).toBe(0);
    expect(scrollToRow(short, 2, max)).toBe(2 * short.rowH);
    expect(scrollToRow(short, 20, max)).toBe(max);
  });
  it("labels boundaries like the x axis of the detail", () => {
    expect([0, 1, 12, 11.5].map(boundaryLabel)).toEqual(["emb", "1", "12", "12.a"]);
  });
});

describe("grid view", () => {
  it("has data-view=grid, is shown by the view trait, and writes the top-1 token of the visible cells only", () => {
    const state = { ...makeState({ T: 60, nBlocks: 6, tokens: words(60) }), view: "grid" };
    const { el } = mountWidget({ state });
    const r = decode(state);
    const grid = q(el, "[data-view=grid]");
    expect(grid).not.toBeNull();
    expect(grid.hidden).toBe(false);
    expect(q(el, ".iglens-heatmap").hidden).toBe(true);
    expect(q(el, "[data-view-tab=grid]").getAttribute("aria-selected")).toBe("true");
    const texts = /** @type {any} */ (q(grid, "canvas.iglens-grid-canvas")).__ctx.texts;
    const first = Number(grid.dataset.firstColumn);
    const last = Number(grid.dataset.lastColumn);
    expect(first).toBe(0);
    expect(last).toBeGreaterThan(3);
    expect(last).toBeLessThan(r.T - 1); // not every column is drawn
    for (let i = first; i <= last; i++) {
      expect(texts).toContain(formatToken(r.tokens[i], { maxLen: 8 }));
      for (let j = 0; j <= r.k; j++) expect(texts).toContain(formatToken(topAt(r, i, j, 1)[0].text, { maxLen: 8 }));
    }
    // (the targets, and so the top-1 tokens, of column i are token i + 1)
    for (let i = last + 2; i < r.T; i++) expect(texts).not.toContain(formatToken(r.tokens[i], { maxLen: 8 }));
  });

  it("a click on a cell selects its position and lists that cell's top-k", () => {
    const state = { ...makeState({ T: 20, nBlocks: 6 }), view: "grid" };
    const { el, model } = mountWidget({ state });
    const r = decode(state);
    const canvas = q(el, "canvas.iglens-grid-canvas");
    const g = gridGeometry({ T: r.T, rows: r.k + 1, width: 640 });
    fire(canvas, "click", { clientX: g.labelW + 3 * g.colW + 10, clientY: g.headerH + 2 * g.rowH + 5 });
    expect(model.get("selected")).toBe(3);
    const topk = q(el, ".iglens-grid-topk");
    expect(topk.dataset.position).toBe("3");
    expect(topk.dataset.boundary).toBe("2");
    const items = [...topk.querySelectorAll(".iglens-grid-topk-item")];
    const want = topAt(r, 3, 2, r.K);
    expect(items.map((li) => Number(li.getAttribute("data-token-id")))).toEqual(want.map((t) => t.id));
    expect(items.map((li) => li.querySelector(".iglens-chip")?.textContent)).toEqual(want.map((t) => formatToken(t.text, { maxLen: 18 })));
    // the keyboard moves the picked cell: down a row, right a position
    fire(canvas, "keydown", { key: "ArrowDown" });
    fire(canvas, "keydown", { key: "ArrowRight" });
    expect(model.get("selected")).toBe(4);
    expect(topk.dataset.boundary).toBe("3");
  });

  it("follows a selection made elsewhere: scrolls to its column", () => {
    const state = { ...makeState({ T: 200, nBlocks: 4, tokens: words(200) }), view: "grid" };
    const { el, model } = mountWidget({ state });
    model.set("selected", 150);
    const grid = q(el, "[data-view=grid]");
    const first = Number(grid.dataset.firstColumn);
    const last = Number(grid.dataset.lastColumn);
    expect(first).toBeLessThanOrEqual(150);
    expect(last).toBeGreaterThanOrEqual(150);
    expect(q(el, ".iglens-grid-topk").dataset.position).toBe("150");
  });

  it("colours by probability or by contribution (a toggle), with the matching legend", () => {
    const state = { ...makeState({ T: 8, nBlocks: 5 }), view: "grid" };
    const { el } = mountWidget({ state });
    const r = decode(state);
    const grid = q(el, "[data-view=grid]");
    expect(grid.dataset.gridColor).toBe("probability");
    expect(q(grid, ".iglens-legend-title").textContent).toBe("top-1 probability");
    fire(q(grid, "[data-grid-color=contribution]"), "click");
    expect(grid.dataset.gridColor).toBe("contribution");
    expect(q(grid, ".iglens-legend-title").textContent).toBe(`contribution to ${r.targetName}`);
    expect(q(grid, "[data-grid-color=contribution]").getAttribute("aria-pressed")).toBe("true");
    // the value behind a cell: the segment that ends at the row, none at the embeddings
    const c = /** @type {Float32Array} */ (decodeArray(state.result.contributions).data);
    expect(cellValue(r, 2, 3, "contribution")).toBe(c[2 * r.k + 2]);
    expect(cellValue(r, 2, 0, "contribution")).toBeNaN();
    const tp = /** @type {Float32Array} */ (decodeArray(state.result.top_probs).data);
    expect(cellValue(r, 2, 3, "probability")).toBe(tp[(2 * (r.k + 1) + 3) * r.K]);
  });

  it("hostile token text stays text in the grid's top-k and tooltip", () => {
    const tokens = [" a", EVIL, " c", " d"];
    const result = makeResult({ T: 4, nBlocks: 3, tokens });
    for (const id of Object.keys(result.token_text)) result.token_text[id] = EVIL;
    const { el } = mountWidget({ state: { ...makeState(), result, view: "grid" } });
    const canvas = q(el, "canvas.iglens-grid-canvas");
    const g = gridGeometry({ T: 4, rows: 4, width: 640 });
    fire(canvas, "mousemove", { clientX: g.labelW + g.colW + 5, clientY: g.headerH + g.rowH + 5 });
    fire(canvas, "click", { clientX: g.labelW + g.colW + 5, clientY: g.headerH + g.rowH + 5 });
    expect(q(el, ".iglens-grid-topk").textContent).toContain("<img src=x");
    expect(q(el, ".iglens-grid-tooltip").textContent).toContain("<img src=x");
    expect(document.querySelectorAll("img, script, [onerror]").length).toBe(0);
  });
});

describe("view switcher", () => {
  it("tabs write the view trait; export buttons carry data-export", () => {
    const { el, model } = mountWidget({ T: 6, nBlocks: 4 });
    expect(q(el, "[data-view-tab=heatmap]").getAttribute("aria-selected")).toBe("true");
    fire(q(el, "[data-view-tab=compare]"), "click");
    expect(model.get("view")).toBe("compare");
    expect(q(el, "[data-view=compare]").hidden).toBe(false);
    expect(q(el, "[data-view=grid]").hidden).toBe(true);
    fire(q(el, "[data-view-tab=compare]"), "keydown", { key: "ArrowLeft" });
    expect(model.get("view")).toBe("grid");
    expect([...el.querySelectorAll("[data-export]")].map((b) => b.getAttribute("data-export"))).toEqual(["png", "svg"]);
  });
});

describe("comparison (pure)", () => {
  const a = /** @type {import("../../model/result.js").Result} */ (decodeResult(makeResult({ T: 6, nBlocks: 5, seed: 1 })));
  const bRaw = makeResult({ T: 4, nBlocks: 5, seed: 2 });
  const b = /** @type {import("../../model/result.js").Result} */ (decodeResult(bRaw));
  it("reads pins: bare ints, pairs, drops leftovers and duplicates", () => {
    expect(readPins([2, [0, 3], [1, 1], [0, 3], [0, 99], [5, 0], "x"], [a, b])).toEqual([
      [0, 2],
      [0, 3],
      [1, 1],
    ]);
    expect(readPins([[1, 1]], [a])).toEqual([]);
  });
  it("toggles pins, keeping at most MAX_PINS", () => {
    expect(togglePin([[0, 1]], 0, 1)).toEqual([]);
    let pins = /** @type {Array<[number, number]>} */ ([]);
    for (let i = 0; i < MAX_PINS + 2; i++) pins = togglePin(pins, 0, i);
    expect(pins.length).toBe(MAX_PINS);
    expect(pins[0]).toEqual([0, 2]);
  });
  it("the cumulative contribution ends at the sum of the contributions", () => {
    const c = /** @type {Float32Array} */ (decodeArray(makeResult({ T: 6, nBlocks: 5, seed: 1 }).contributions).data);
    const cum = cumulativeContribution(a, 4);
    expect(cum.length).toBe(a.k + 1);
    let acc = 0;
    for (let j = 0; j < a.k; j++) {
      acc += c[4 * a.k + j];
      expect(cum[j + 1]).toBeCloseTo(acc, 12);
    }
  });
  it("decodes a comparison, and reports a malformed one", () => {
    const cmp = readComparison({ labels: ["A", "B"], results: [bRaw], limit: 0.5, result_id: a.id }, a);
    expect(cmp.multi).toBe(true);
    expect(cmp.results.length).toBe(2);
    expect(cmp.limit).toBe(0.5);
    // the comparison of another result (by its result_id) is not shown, and is no error
    expect(readComparison({ labels: ["A", "B"], results: [bRaw], limit: 0.5, result_id: "r0" }, a)).toMatchObject({ multi: false, error: null });
    expect(readComparison({ labels: ["A", "B"], results: [bRaw], limit: 0.5, result_id: 7 }, a).error).toMatch(/result_id must be a string/);
    const bad = readComparison({ labels: ["A"], results: [bRaw], limit: 0.5, result_id: a.id }, a);
    expect(bad.multi).toBe(false);
    expect(bad.error).toMatch(/labels/);
    expect(readComparison({}, a).results).toEqual([a]);
  });
});

describe("compare view", () => {
  it("overlays the pinned positions' cumulative curves (values from the payload)", () => {
    const state = {
      ...makeState({ T: 10, nBlocks: 6, seed: 3 }),
      view: "compare",
      pinned: [
        [0, 2],
        [0, 7],
      ],
      selected: 7,
    };
    const { el } = mountWidget({ state });
    const view = q(el, "[data-view=compare]");
    expect(view.hidden).toBe(false);
    const c = /** @type {Float32Array} */ (decodeArray(state.result.contributions).data);
    const k = 6;
    for (const i of [2, 7]) {
      const line = q(view, `polyline.iglens-compare-curve[data-position="${i}"]`);
      expect(line).not.toBeNull();
      const vals = /** @type {string} */ (line.getAttribute("data-values")).split(",").map(Number);
      expect(vals.length).toBe(k + 1);
      let acc = 0;
      expect(vals[0]).toBe(0);
      for (let j = 0; j < k; j++) {
        acc += c[i * k + j];
        expect(vals[j + 1]).toBeCloseTo(acc, 6);
      }
    }
    // the selected token is pinned: no dashed preview
    expect(view.querySelectorAll(".iglens-compare-preview").length).toBe(0);
    expect([...view.querySelectorAll(".iglens-compare-pin")].map((p) => p.getAttribute("data-position"))).toEqual(["2", "7"]);
  });

  it("pins and unpins the selected token; shows it dashed until pinned", () => {
    const state = { ...makeState({ T: 10, nBlocks: 6 }), view: "compare", selected: 4 };
    const { el, model } = mountWidget({ state });
    const view = q(el, "[data-view=compare]");
    expect(q(view, ".iglens-compare-preview").getAttribute("data-position")).toBe("4");
    fire(q(view, "[data-action=pin]"), "click");
    expect(model.get("pinned")).toEqual([[0, 4]]);
    expect(q(view, ".iglens-compare-curve:not(.iglens-compare-preview)").getAttribute("data-position")).toBe("4");
    model.set("selected", 6);
    fire(q(view, "[data-action=pin]"), "click");
    expect(model.get("pinned")).toEqual([
      [0, 4],
      [0, 6],
    ]);
    fire(q(view, ".iglens-compare-pin[data-position='4'] [data-action=unpin]"), "click");
    expect(model.get("pinned")).toEqual([[0, 6]]);
    fire(q(view, "[data-action=unpin-all]"), "click");
    expect(model.get("pinned")).toEqual([]);
  });

  it("shows several results side by side on one shared scale; a row click pins it", () => {
    const aRaw = makeResult({ T: 8, nBlocks: 5, seed: 4 });
    const bRaw = makeResult({ T: 5, nBlocks: 5, seed: 5 });
    const bc = /** @type {Float32Array} */ (decodeArray(bRaw.contributions).data);
    for (let n = 0; n < bc.length; n++) bc[n] *= 2.5; // B's contributions dominate the scale
    const maxAbs = (/** @type {any} */ raw) =>
      Math.max(
        ...Array.from(/** @type {Float32Array} */ (decodeArray(raw.contributions).data))
          .filter(Number.isFinite)
          .map(Math.abs),
      );
    const limit = Math.max(maxAbs(aRaw), maxAbs(bRaw));
    const a = /** @type {import("../../model/result.js").Result} */ (decodeResult(aRaw));
    const b = /** @type {import("../../model/result.js").Result} */ (decodeResult(bRaw));
    expect(sharedLimit([a, b])).toBeCloseTo(limit, 12);
    const state = {
      ...makeState(),
      result: aRaw,
      view: "compare",
      comparison: { labels: ["first prompt", EVIL], results: [bRaw], limit, result_id: aRaw.id },
      pinned: [
        [0, 1],
        [1, 2],
      ],
    };
    const { el, model } = mountWidget({ state });
    const panels = [...el.querySelectorAll(".iglens-compare-panel")];
    expect(panels.length).toBe(2);
    for (const p of panels) expect(Number(p.getAttribute("data-limit"))).toBe(limit);
    expect(Number(panels[0].getAttribute("data-own-limit"))).toBeCloseTo(maxAbs(aRaw), 6);
    expect(panels[1].textContent).toContain(EVIL); // the label, as text
    expect(document.querySelectorAll("img").length).toBe(0);
    expect(q(el, ".iglens-compare-curve[data-result='1'][data-position='2']")).not.toBeNull();
    // a click on row 3 of B pins [1, 3] (rows fill 360 px / T each)
    const canvasB = q(panels[1], "canvas");
    fire(canvasB, "click", { clientX: 50, clientY: 3.5 * Math.min(16, 360 / 5) });
    expect(model.get("pinned")).toEqual([
      [0, 1],
      [1, 2],
      [1, 3],
    ]);
  });
});

describe("figure export (SVG)", () => {
  const raw = makeResult({ T: 12, nBlocks: 6, tokens: [" The", EVIL, "\u0001ctl", ...words(9)] });
  const r = /** @type {import("../../model/result.js").Result} */ (decodeResult(raw));
  /** @param {(make: any) => any} draw */
  const svgText = (draw) => {
    /** @type {any} */ let p = null;
    draw((/** @type {number} */ w, /** @type {number} */ hh) => (p = svgPainter(w, hh, "t")));
    return /** @type {string} */ (p.toString());
  };
  /** @param {string} text */
  const parse = (text) => new DOMParser().parseFromString(text, "image/svg+xml");

  for (const [name, draw] of /** @type {Array<[string, (make: any) => any]>} */ ([
    ["heatmap", (make) => heatmapFigure(make, r, { theme: "light", rows: [0, r.T - 1], selected: 2 })],
    ["grid", (make) => gridFigure(make, r, { theme: "dark", columns: [0, 5], mode: "contribution", selected: 1 })],
    [
      "compare",
      (make) =>
        compareFigure(make, readComparison({}, r), {
          theme: "light",
          pins: [
            [0, 3],
            [0, 5],
          ],
          y: "delta",
        }),
    ],
  ])) {
    it(`${name}: well-formed XML with the title block (model, prompt, target, estimator)`, () => {
      const doc = parse(svgText(draw));
      expect(doc.getElementsByTagName("parsererror").length).toBe(0);
      const texts = [...doc.getElementsByTagName("text")].map((t) => t.textContent ?? "");
      const all = texts.join("\n");
      expect(all).toContain(r.modelName);
      expect(all).toContain(`prompt: \u201c${formatToken(raw.request.prompt, { maxLen: 120 })}\u201d`);
      expect(all).toContain(`target: ${r.controls.target}`);
      expect(all).toContain(`estimator: ${r.estimator}, m=${r.steps}`);
      expect(doc.getElementsByTagName("img").length).toBe(0);
      expect(doc.getElementsByTagName("script").length).toBe(0);
    });
  }

  it("the grid figure writes the top-1 token of each exported cell", () => {
    const doc = parse(svgText((make) => gridFigure(make, r, { theme: "light", columns: [2, 4], mode: "probability" })));
    const texts = [...doc.getElementsByTagName("text")].map((t) => t.textContent);
    for (let i = 2; i <= 4; i++) for (let j = 0; j <= r.k; j++) expect(texts).toContain(xmlSafe(formatToken(topAt(r, i, j, 1)[0].text, { maxLen: 8 })));
  });

  it("writes characters XML cannot hold as escapes", () => {
    expect(xmlSafe("a\u0001b\ud800c\uffff")).toBe("a\\x01b\\ud800c\\uffff");
    expect(xmlSafe("ok \u00e9 \ud83d\ude00")).toBe("ok \u00e9 \ud83d\ude00");
  });

  it("title lines, file names and the exported heatmap rows", () => {
    expect(titleLines(r, "layer heatmap")[0]).toBe(`IG-Lens layer heatmap \u00b7 ${r.modelName}`);
    expect(figureFileName("grid", "Smol LM/2", "png")).toBe("iglens-grid-smol-lm-2.png");
    expect(heatmapRows(30, 5)).toEqual([0, 29]);
    expect(heatmapRows(512, 300)).toEqual([280, 339]);
    expect(heatmapRows(512, 2)).toEqual([0, 59]);
  });
});
