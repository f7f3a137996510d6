// The pure painters and the one palette: the contribution bitmap written into a plain RGBA
// buffer, the heatmap's and the grid's painters on a recording 2D context (no DOM, no
// canvas), the NaN grey from one place, and the detail charts' margins local to a render.
import { describe, it, expect } from "vitest";
import { makeResult } from "../testing/fixture.js";
import { decodeResult, contribution } from "../model/result.js";
import { divergingScale, sequentialScale, hexToRgb } from "../lib/colorscale.js";
import { heatmapGeometry } from "../lib/layout.js";
import { NAN_COLOR, nanColor, nanRgb, defaultPalette } from "../lib/palette.js";
import { paintContributions, rowLimits } from "./bitmap.js";
import { drawRows, drawHeader, columnLabels } from "../views/heatmap/paint.js";
import { paintGrid } from "../views/grid/paint.js";
import { gridGeometry, visibleColumns, visibleGridRows } from "../views/grid/geometry.js";
import { figureTheme } from "../figures/theme.js";
import { chartSpace } from "../views/detail/space.js";

/** @param {object} [o] */
const result = (o = {}) => /** @type {import("../model/result.js").Result} */ (decodeResult(makeResult({ T: 6, nBlocks: 5, ...o })));

/** A 2D context that records what it is asked to do: calls, and every fill with its style. */
function recorder() {
  /** @type {Array<{op: string, args: any[], fillStyle: any, font: any, textAlign: any}>} */
  const calls = [];
  /** @type {Record<string, any>} */
  const state = { fillStyle: "#000", strokeStyle: "#000", font: "10px sans-serif", textAlign: "start" };
  const c = new Proxy(state, {
    get(target, prop) {
      if (prop === "calls") return calls;
      if (prop === "measureText") return (/** @type {string} */ t) => ({ width: 6 * Array.from(t).length });
      if (typeof prop === "string" && prop in target) return target[prop];
      return (/** @type {any[]} */ ...args) => {
        calls.push({ op: String(prop), args, fillStyle: target.fillStyle, font: target.font, textAlign: target.textAlign });
      };
    },
    set(target, prop, value) {
      target[/** @type {string} */ (prop)] = value;
      return true;
    },
  });
  return /** @type {any} */ (c);
}

describe("the contribution bitmap", () => {
  it("writes one opaque pixel per cell, the scale's colour, NaN in the palette's grey", () => {
    const r = result();
    const contributions = Float32Array.from(r.contributions);
    contributions[3] = NaN;
    const cells = { T: r.T, k: r.k, contributions };
    const scale = divergingScale(r.contribLimit, "light");
    const px = new Uint8ClampedArray(r.T * r.k * 4);
    paintContributions(px, cells, scale, nanRgb("light"));
    for (let i = 0; i < r.T; i++) {
      for (let j = 0; j < r.k; j++) {
        const o = (i * r.k + j) * 4;
        const want = scale.rgb(contributions[i * r.k + j]) ?? hexToRgb(NAN_COLOR.light);
        expect([px[o], px[o + 1], px[o + 2], px[o + 3]]).toEqual([...want, 255]);
      }
    }
    expect([px[12], px[13], px[14]]).toEqual([220, 220, 220]);
  });

  it("per-row scale: each row divided by its own largest |contribution|", () => {
    const r = result({ seed: 3 });
    const limits = rowLimits(r);
    const scale = divergingScale(1, "dark");
    const px = /** @type {number[]} */ (new Array(r.T * r.k * 4).fill(0));
    paintContributions(px, r, scale, nanRgb("dark"), limits);
    for (let i = 0; i < r.T; i++) {
      let m = 0;
      for (let j = 0; j < r.k; j++) m = Math.max(m, Math.abs(contribution(r, i, j)));
      expect(limits[i]).toBeCloseTo(m || 1, 12);
      const j = 1;
      const o = (i * r.k + j) * 4;
      expect(px.slice(o, o + 3)).toEqual(scale.rgb(contribution(r, i, j) / limits[i]));
    }
  });
});

describe("one palette", () => {
  it("the NaN grey is defined once: views, canvas palettes and exported figures agree", () => {
    for (const theme of /** @type {const} */ (["light", "dark"])) {
      expect(nanColor(theme)).toBe(NAN_COLOR[theme]);
      expect(defaultPalette(theme).nan).toBe(NAN_COLOR[theme]);
      expect(figureTheme(theme).nan).toBe(NAN_COLOR[theme]);
      expect(nanRgb(theme)).toEqual(hexToRgb(NAN_COLOR[theme]));
    }
    expect(NAN_COLOR.light).toBe("#dcdcdc");
  });
});

describe("heatmap painters", () => {
  it("a row without a target is grey and says so; others get their label", () => {
    const r = result({ lastHasNoTarget: true });
    const g = heatmapGeometry({ T: r.T, k: r.k, width: 600 });
    const pal = defaultPalette("light");
    const c = recorder();
    const labels = Array.from({ length: r.T }, (_, i) => `row ${i}`);
    drawRows(c, g, r, pal, { first: 0, last: r.T - 1, top: 0, labels, limitOf: () => r.contribLimit });
    const texts = c.calls.filter((/** @type {any} */ x) => x.op === "fillText").map((/** @type {any} */ x) => x.args[0]);
    expect(texts).toContain("no target");
    expect(texts).toContain("row 0");
    const y = g.headerH + (r.T - 1) * g.rowH;
    const grey = c.calls.find((/** @type {any} */ x) => x.op === "fillRect" && x.args[1] === y && x.args[2] === g.gridW);
    expect(grey.fillStyle).toBe(NAN_COLOR.light);
  });

  it("sub-layer column labels never reach the axis title left of the cells", () => {
    const r = result({ sublayer: true, nBlocks: 12 });
    const g = heatmapGeometry({ T: r.T, k: r.k, width: 520 });
    const measure = (/** @type {string} */ t) => 6 * t.length;
    const shown = columnLabels(g, r.segmentLabels, measure);
    expect(shown.length).toBeGreaterThan(0);
    for (const [j, x, align] of shown) {
      const left = align === "left" ? x : x - measure(r.segmentLabels[j]) / 2;
      expect(left).toBeGreaterThanOrEqual(g.labelW - 4);
    }
    const c = recorder();
    drawHeader(c, g, r, defaultPalette("light"));
    const title = c.calls.find((/** @type {any} */ x) => x.op === "fillText" && String(x.args[0]).startsWith("blocks"));
    expect(title.args[1]).toBe(g.labelW - 8);
  });
});

describe("grid painter", () => {
  it("colours each visible cell by its value, NaN (the embeddings' contribution) in the one grey", () => {
    const r = result();
    const g = gridGeometry({ T: r.T, rows: r.k + 1, width: 800 });
    const pal = defaultPalette("light");
    const c = recorder();
    const cols = /** @type {[number, number]} */ (visibleColumns(g, 0));
    const rows = /** @type {[number, number]} */ (visibleGridRows(g, 0));
    paintGrid(c, g, r, pal, { sl: 0, st: 0, cols, rows, mode: "contribution", scale: divergingScale(r.contribLimit, "light"), label: () => "" });
    const cell = (/** @type {number} */ i, /** @type {number} */ j) =>
      c.calls.find((/** @type {any} */ x) => x.op === "fillRect" && x.args[0] === g.labelW + i * g.colW && x.args[1] === g.headerH + j * g.rowH);
    expect(cell(0, 0).fillStyle).toBe("rgb(220,220,220)");
    const rgb = divergingScale(r.contribLimit, "light").rgb(contribution(r, 0, 0));
    expect(cell(0, 1).fillStyle).toBe(`rgb(${rgb?.join(",")})`);
    const c2 = recorder();
    paintGrid(c2, g, r, pal, { sl: 0, st: 0, cols, rows, mode: "probability", scale: sequentialScale("light", 0, 1), label: () => "x" });
    expect(c2.calls.filter((/** @type {any} */ x) => x.op === "fillText" && x.args[0] === "x").length).toBe((cols[1] - cols[0] + 1) * (rows[1] - rows[0] + 1));
  });
});

describe("detail charts", () => {
  it("margins are local to a render: a presentation panel and a plain one do not share them", () => {
    const r = result();
    /** @param {boolean} present */
    const ctx = (present) =>
      /** @type {any} */ ({
        root: { classList: { contains: (/** @type {string} */ c) => present && c === "iglens-present" } },
        theme: "light",
        model: { get: () => null },
      });
    const big = chartSpace(ctx(true), r, 0, 600);
    const plain = chartSpace(ctx(false), r, 0, 600);
    expect(big.M.left).toBe(70);
    expect(plain.M.left).toBe(58);
    expect(big.M.left).toBe(70); // unchanged by the later render
    expect(big.x(r.boundaries[0] - 0.6)).toBe(70);
    expect(plain.x(r.boundaries[0] - 0.6)).toBe(58);
  });
});
