// @vitest-environment jsdom
import { describe, it, expect, beforeAll, vi } from "vitest";
import { installFakeCanvas, mountWidget } from "../testing/dom.js";
import { drawLegend } from "./legend.js";

// Wrap the one legend function so the test sees every call, whichever view makes it.
vi.mock("./legend.js", async (importOriginal) => {
  const mod = /** @type {typeof import("./legend.js")} */ (await importOriginal());
  return { ...mod, drawLegend: vi.fn(mod.drawLegend) };
});

beforeAll(() => {
  installFakeCanvas();
});

describe("one legend", () => {
  it("the heatmap and the strip legends are drawn by the same function, titled from target_name", () => {
    const spy = /** @type {import("vitest").Mock} */ (/** @type {unknown} */ (drawLegend));
    spy.mockClear();
    const { el, model } = mountWidget({ T: 5, nBlocks: 6, contrast: true });
    const heat = /** @type {HTMLElement} */ (el.querySelector(".iglens-heatmap-legend"));
    const strip = /** @type {HTMLElement} */ (el.querySelector(".iglens-strip-legend"));
    const targets = spy.mock.calls.map((call) => call[0]);
    expect(targets).toContain(heat);
    expect(targets).toContain(strip);
    const titleOf = (/** @type {HTMLElement} */ legend) => spy.mock.calls.filter((call) => call[0] === legend).at(-1)?.[2];
    expect(titleOf(heat)).toBe("contribution to p(target) \u2212 p(contrast)");
    expect(titleOf(strip)).toBe("p(target) \u2212 p(contrast)");
    // same structure, because it is the same code
    const shape = (/** @type {Element} */ e) => [...e.querySelectorAll("*")].map((n) => n.className).join(" ");
    expect(shape(heat).replace(/iglens-legend-tick ?/g, "")).toBe(shape(strip).replace(/iglens-legend-tick ?/g, ""));
    model.set("color_by", "onset");
    expect(spy.mock.calls.at(-1)?.[0]).toBe(strip);
    expect(spy.mock.calls.at(-1)?.[3]).toEqual(["1", "2", "3", "4", "5", "6"]);
  });
});
