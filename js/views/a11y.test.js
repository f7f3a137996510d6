// @vitest-environment jsdom
// @ts-nocheck
/**
 * Accessibility of the widget's structure (what axe-core checks in tests/ui, here without a
 * browser): the strip's listbox holds options only, no button plays a list item, the charts'
 * values are reachable by keyboard and said in the readout, chip text keeps 4.5:1.
 */
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { chipText } from "./strip/index.js";
import { luminance } from "../lib/colorscale.js";
import { decodeResult, contributionRow, segmentText } from "../model/result.js";
import { makeState } from "../testing/fixture.js";
import { fmtSigned } from "../lib/format.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const contrast = (a, b) => {
  const [lo, hi] = [luminance(a), luminance(b)].sort((x, y) => x - y);
  return (hi + 0.05) / (lo + 0.05);
};

describe("accessibility", () => {
  it("the strip's listbox holds only options; the non-monotone jump list is a group of buttons", () => {
    const { el } = mountWidget({ T: 8, nBlocks: 6, selected: 2, promptLength: 5 });
    const list = el.querySelector("[role=listbox]");
    for (const child of list.children) {
      if (child.getAttribute("aria-hidden") === "true") continue;
      expect(child.getAttribute("role")).toBe("option");
    }
    expect(el.querySelector("[role=separator]")).toBeNull();
    expect(el.querySelector("button[role]:not([role=tab])")).toBeNull();
    expect(el.querySelector(".iglens-nonmono-items").getAttribute("role")).toBe("group");
    expect(document.getElementById(list.getAttribute("aria-describedby"))).not.toBeNull();
  });

  it("chip text is black or white with at least 4.5:1 on any background", () => {
    for (let v = 0; v <= 255; v += 5) {
      for (const bg of [
        [v, v, v],
        [v, 255 - v, 128],
        [255, v, 0],
      ]) {
        const fg = chipText(bg) === "#000000" ? [0, 0, 0] : [255, 255, 255];
        expect(contrast(fg, bg)).toBeGreaterThanOrEqual(4.5);
      }
    }
  });

  it("the detail's charts are tab stops: arrow keys move the crosshair and say the value", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 2 });
    const { el } = mountWidget({ state });
    const r = /** @type {any} */ (decodeResult(state.result));
    const c = contributionRow(r, 2);
    const bars = el.querySelector("svg[aria-label='segment contributions']");
    expect(bars.getAttribute("tabindex")).toBe("0");
    const readout = el.querySelector(".iglens-readout");
    expect(bars.getAttribute("aria-describedby")).toBe(readout.id);
    bars.dispatchEvent(new FocusEvent("focus"));
    expect(readout.getAttribute("aria-live")).toBe("polite");
    fire(bars, "keydown", { key: "Home" });
    expect(readout.textContent).toContain(segmentText(r, 0));
    expect(readout.textContent).toContain(`contribution ${fmtSigned(c[0])}`);
    fire(bars, "keydown", { key: "ArrowRight" });
    expect(readout.textContent).toContain(`contribution ${fmtSigned(c[1])}`);
    expect(bars.querySelector(".iglens-guide")?.getAttribute("visibility") ?? el.querySelector(".iglens-guide").getAttribute("visibility")).toBe("visible");
    fire(bars, "keydown", { key: "Enter" }); // picks segment 1 for the heads section
    expect(el.querySelector(".iglens-bar[data-segment='1']").classList.contains("iglens-bar-focus")).toBe(true);
    const curve = [...el.querySelectorAll("svg.iglens-chart")][1];
    expect(curve.getAttribute("tabindex")).toBe("0");
    curve.dispatchEvent(new FocusEvent("focus"));
    fire(curve, "keydown", { key: "End" });
    expect(readout.textContent).toContain(`after block ${r.nBlocks}`);
    curve.dispatchEvent(new FocusEvent("blur"));
    expect(readout.textContent).toContain("for the values at each block");
  });
});
