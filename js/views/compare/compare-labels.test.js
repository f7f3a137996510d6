// @vitest-environment jsdom
// The compare panels label their rows with the tokens, as text (live panels and export).
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../../testing/dom.js";
import { makeResult, makeState } from "../../testing/fixture.js";
import { decodeResult } from "../../model/result.js";
import { formatToken } from "../../lib/tokens.js";
import { labelledRows } from "../../model/figure-data.js";
import { readComparison } from "../../model/comparison.js";
import { compareFigure } from "../../figures/compare.js";
import { svgPainter } from "../../figures/painters.js";

const EVIL = "<img src=x onerror=alert(1)>";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

/** @param {Element} panel */
const labels = (panel) => /** @type {HTMLElement[]} */ ([...panel.querySelectorAll(".iglens-compare-row-label")]);

/** A compare state of result A (T tokens, one of them hostile) and B. @param {number} T */
function compareState(T) {
  const aRaw = makeResult({ T, nBlocks: 5, seed: 4 });
  aRaw.tokens[2] = EVIL;
  aRaw.tokens[1] = " a\u202eb\n";
  const bRaw = makeResult({ T: 5, nBlocks: 5, seed: 5 });
  bRaw.tokens[0] = `${EVIL}</script>`;
  return {
    aRaw,
    bRaw,
    state: {
      ...makeState(),
      result: aRaw,
      view: "compare",
      comparison: { labels: ["first", "second"], results: [bRaw], limit: 1, result_id: aRaw.id },
      pinned: [],
    },
  };
}

describe("compare panels: row labels", () => {
  it("every row of a short result carries its token, inserted as text", () => {
    const { aRaw, bRaw, state } = compareState(8);
    const { el } = mountWidget({ state });
    const panels = [...el.querySelectorAll(".iglens-compare-panel")];
    expect(panels.length).toBe(2);
    [aRaw, bRaw].forEach((raw, rr) => {
      const got = labels(panels[rr]);
      expect(got.map((l) => l.dataset.row)).toEqual(raw.tokens.map((/** @type {string} */ _t, /** @type {number} */ i) => String(i)));
      expect(got.map((l) => l.textContent)).toEqual(raw.tokens.map((/** @type {string} */ t) => formatToken(t, { maxLen: 12 })));
      got.forEach((l, i) => expect(l.title).toBe(`[${i}] ${formatToken(raw.tokens[i], { maxLen: 40 })}`));
    });
    expect(labels(panels[0])[2].textContent).toBe(formatToken(EVIL, { maxLen: 12 }));
    expect(el.querySelectorAll("img, script").length).toBe(0);
    expect(el.querySelectorAll("[onerror]").length).toBe(0);
    // the label column sits beside the canvas, the rows at the canvas's row height
    const body = /** @type {HTMLElement} */ (panels[0].querySelector(".iglens-compare-panel-body"));
    expect(body.firstElementChild?.classList.contains("iglens-compare-rows")).toBe(true);
    expect(body.lastElementChild?.tagName.toLowerCase()).toBe("canvas");
    const col = /** @type {HTMLElement} */ (body.firstElementChild);
    expect(col.style.height).toBe(/** @type {HTMLElement} */ (body.lastElementChild).style.height);
  });

  it("a long result labels every n-th row (never more than one per line)", () => {
    const T = 120;
    const { aRaw, state } = compareState(T);
    const { el } = mountWidget({ state });
    const panel = /** @type {Element} */ (el.querySelector(".iglens-compare-panel[data-result='0']"));
    const rowH = 360 / T;
    const want = labelledRows(T, rowH);
    expect(want.length).toBeLessThan(T);
    expect(want[1] * rowH).toBeGreaterThanOrEqual(12);
    expect(labels(panel).map((l) => Number(l.dataset.row))).toEqual(want);
    expect(labels(panel).map((l) => l.textContent)).toEqual(want.map((i) => formatToken(aRaw.tokens[i], { maxLen: 12 })));
  });

  it("a click on a label pins its row", () => {
    const { state } = compareState(8);
    const { el, model } = mountWidget({ state });
    const panelB = /** @type {Element} */ (el.querySelector(".iglens-compare-panel[data-result='1']"));
    fire(labels(panelB)[3], "click");
    expect(model.get("pinned")).toEqual([[1, 3]]);
  });

  it("the exported compare figure labels the rows too, as SVG text", () => {
    const { aRaw, bRaw } = compareState(8);
    const a = /** @type {import("../../model/result.js").Result} */ (decodeResult(aRaw));
    const cmp = readComparison({ labels: ["first", "second"], results: [bRaw], limit: 1, result_id: a.id }, a);
    expect(cmp.multi).toBe(true);
    /** @type {any} */ let p = null;
    compareFigure((/** @type {number} */ w, /** @type {number} */ hh) => (p = svgPainter(w, hh, "t")), cmp, { theme: "light", pins: [], y: "delta" });
    const text = /** @type {string} */ (p.toString());
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    expect(doc.getElementsByTagName("parsererror").length).toBe(0);
    const texts = [...doc.getElementsByTagName("text")].map((t) => t.textContent);
    for (const raw of [aRaw, bRaw]) for (const t of raw.tokens) expect(texts).toContain(formatToken(t, { maxLen: 12 }));
    expect(doc.getElementsByTagName("img").length).toBe(0);
    expect(text).not.toContain("<img");
  });
});
