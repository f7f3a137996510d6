import { describe, it, expect } from "vitest";
import { heatmapGeometry, hitTest, visibleRows, cellRect, scrollToRow, thinLabels, linearScale, boxRows, rowWindow, wholeRows } from "./layout.js";
import { rng } from "../testing/fixture.js";

describe("heatmap geometry", () => {
  const g = heatmapGeometry({ T: 512, k: 30, width: 700 });

  it("fits the columns into the width and scrolls long prompts", () => {
    expect(g.labelW + g.gridW).toBeLessThanOrEqual(700);
    expect(g.gridW).toBe(g.colW * 30);
    expect(g.gridH).toBe(g.rowH * 512);
    expect(g.viewH).toBeLessThan(g.contentH);
    expect(g.viewH).toBeLessThanOrEqual(440);
  });

  it("shows a short prompt whole", () => {
    const s = heatmapGeometry({ T: 8, k: 12, width: 600 });
    expect(s.viewH).toBe(s.contentH);
    expect(s.colW).toBeLessThanOrEqual(40);
  });

  it("keeps a minimum column width (then the canvas is wider than the view)", () => {
    const wide = heatmapGeometry({ T: 10, k: 200, width: 300 });
    expect(wide.colW).toBe(3);
    expect(wide.width).toBeGreaterThanOrEqual(wide.labelW + wide.gridW);
  });

  it("hit-tests cells, row labels and column labels", () => {
    const c = cellRect(g, 5, 7);
    expect(hitTest(g, c.x + 1, c.y + 1)).toEqual({ region: "cell", pos: 5, seg: 7 });
    expect(hitTest(g, c.x + c.w - 0.01, c.y + c.h - 0.01)).toEqual({ region: "cell", pos: 5, seg: 7 });
    expect(hitTest(g, 10, c.y + 1)).toEqual({ region: "rowLabel", pos: 5, seg: -1 });
    expect(hitTest(g, c.x + 1, 3)).toEqual({ region: "colLabel", pos: -1, seg: 7 });
    expect(hitTest(g, 10, 3)).toBeNull();
    expect(hitTest(g, -1, 50)).toBeNull();
    expect(hitTest(g, g.labelW + g.gridW + 1, c.y + 1)).toBeNull();
  });

  it("hit-tests with scrolling", () => {
    const top = 100 * g.rowH;
    const c = cellRect(g, 103, 0, top);
    expect(hitTest(g, c.x + 1, c.y + 1, top)).toEqual({ region: "cell", pos: 103, seg: 0 });
    expect(hitTest(g, c.x + 1, g.headerH + g.gridH + 50, 0)).toBeNull();
  });

  it("lists the visible rows", () => {
    const [first, last] = /** @type {[number, number]} */ (visibleRows(g, 0));
    expect(first).toBe(0);
    expect(last).toBeGreaterThan(10);
    expect(last).toBeLessThan(40);
    const [f2] = /** @type {[number, number]} */ (visibleRows(g, 50 * g.rowH + 3));
    expect(f2).toBe(50);
  });

  it("scrolls a row into view only when needed", () => {
    expect(scrollToRow(g, 2, 0)).toBe(0);
    const down = scrollToRow(g, 300, 0);
    expect(down).toBeGreaterThan(0);
    const [first, last] = /** @type {[number, number]} */ (visibleRows(g, down));
    expect(300).toBeGreaterThanOrEqual(first);
    expect(300).toBeLessThanOrEqual(last);
    expect(scrollToRow(g, 0, down)).toBe(0);
  });
});

describe("label thinning", () => {
  it("keeps every label when there is room", () => {
    expect(thinLabels(5, 30, 20)).toEqual([0, 1, 2, 3, 4]);
  });

  it("thins to round numbers and keeps the last", () => {
    expect(thinLabels(30, 8, 18)).toEqual([0, 4, 9, 14, 19, 24, 29]); // blocks 1, 5, 10, … 30
    expect(thinLabels(30, 4, 18)).toEqual([4, 9, 14, 19, 24, 29]); // "1" would touch "5"
    expect(thinLabels(30, 12, 18)).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29]); // even blocks
  });

  it("never lets labels overlap", () => {
    for (const [n, cell, label] of [
      [40, 5, 16],
      [33, 7, 20],
      [100, 3, 14],
      [12, 20, 50],
    ]) {
      const picks = thinLabels(n, cell, label);
      for (let q = 1; q < picks.length; q++) expect((picks[q] - picks[q - 1]) * cell).toBeGreaterThanOrEqual(label);
      expect(picks[picks.length - 1]).toBe(n - 1);
    }
    expect(thinLabels(0, 5, 5)).toEqual([]);
  });
});

describe("linearScale", () => {
  it("maps and inverts", () => {
    const x = linearScale([0, 30], [50, 350]);
    expect(x(15)).toBe(200);
    expect(x.invert(200)).toBe(15);
    expect(linearScale([1, 1], [0, 10])(1)).toBe(0);
  });
});

describe("whole lines of a scrolling box (the strip, the walk's steps)", () => {
  /** Lines of the given heights, `gap` apart, under a padding of `pad`. @param {number[]} heights @param {number} gap @param {number} pad */
  const lines = (heights, gap, pad) => {
    const rows = [];
    let y = pad;
    for (const hgt of heights) {
      rows.push({ top: y, bottom: y + hgt });
      y += hgt + gap;
    }
    return { rows, end: y - gap + pad };
  };

  it("chips sharing a line are one line, a taller chip included; hidden chips are none", () => {
    const boxes = [
      { top: 8, bottom: 31 },
      { top: 8, bottom: 32 }, // an answer chip, a pixel taller
      { top: 0, bottom: 0 }, // folded
      { top: 36, bottom: 59 },
      { top: 36, bottom: 60 },
      { top: 64, bottom: 88 },
    ];
    expect(boxRows(boxes)).toEqual([
      { top: 8, bottom: 32 },
      { top: 36, bottom: 60 },
      { top: 64, bottom: 88 },
    ]);
  });

  it("the strip in the student view: 24 px lines 4 px apart in 78 px (80 px, less its borders) show two lines", () => {
    const { rows, end } = lines([24, 24, 24, 24, 24], 4, 8);
    const box = { end, padTop: 8, padBottom: 8, room: 78 };
    // opened on line 2 from the top: lines 1 and 2, from the bottom of line 0 to the top of line 3
    expect(wholeRows(rows, 2, 0, box)).toEqual({ first: 1, last: 2, top: rows[0].bottom, bottom: rows[3].top });
    // the last line: the padding under it, and the line before
    expect(wholeRows(rows, 4, 0, box)).toEqual({ first: 3, last: 4, top: rows[2].bottom, bottom: end });
    expect(wholeRows(rows, 0, 3, box)).toEqual({ first: 0, last: 1, top: 0, bottom: rows[2].top });
  });

  it("every shown line is whole, no neighbour shows, the wanted line among them, as many as fit", () => {
    const rand = rng(11);
    for (let trial = 0; trial < 60; trial++) {
      const n = 1 + Math.floor(rand() * 12);
      const heights = Array.from({ length: n }, () => 14 + Math.floor(rand() * 30));
      const gap = Math.floor(rand() * 6);
      const pad = Math.floor(rand() * 9);
      const { rows, end } = lines(heights, gap, pad);
      const box = { end, padTop: pad, padBottom: pad, room: 30 + rand() * 150 };
      for (let want = 0; want < n; want++) {
        const first = Math.floor(rand() * n);
        const w = /** @type {NonNullable<ReturnType<typeof wholeRows>>} */ (wholeRows(rows, want, first, box));
        expect(w.first <= want && want <= w.last).toBe(true);
        expect(w).toMatchObject(rowWindow(rows, w.first, w.last, box));
        expect(w.top <= rows[w.first].top && rows[w.last].bottom <= w.bottom).toBe(true); // whole
        if (w.first > 0) expect(rows[w.first - 1].bottom).toBeLessThanOrEqual(w.top); // nothing of the line above
        if (w.last < n - 1) expect(rows[w.last + 1].top).toBeGreaterThanOrEqual(w.bottom); // nor below
        if (w.last > w.first) expect(w.bottom - w.top).toBeLessThanOrEqual(box.room);
        if (w.last < n - 1) {
          const more = rowWindow(rows, w.first, w.last + 1, box);
          expect(more.bottom - more.top).toBeGreaterThan(box.room); // the next line would not fit
        }
      }
    }
    expect(wholeRows([], 0, 0, { end: 0, padTop: 0, padBottom: 0, room: 10 })).toBeNull();
  });
});
