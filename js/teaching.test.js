// @vitest-environment jsdom
// Issue 11 in jsdom: the lazy interior path (path_request → path), the recompute's progress
// and Cancel, the presentation toggle, non-monotone markers and the header's token text.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget } from "./testing/dom.js";
import { makeState } from "./testing/fixture.js";
import { decodeResult } from "./result.js";
import { againstSegments } from "./nonmonotone.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));

describe("lazy interior path", () => {
  it("a click asks Python for the selected token's path; the answer is drawn as sent", () => {
    const state = makeState({ T: 6, nBlocks: 4, selected: 2 });
    const { el, model } = mountWidget({ state });
    const button = q(el, "[data-action=path]");
    expect(button).not.toBeNull();
    /** @type {HTMLInputElement} */ (q(el, "input[name=path_steps]")).value = "3";
    button.click();
    expect(model.get("path_request")).toMatchObject({ position: 2, steps: 3, _n: 1 });
    expect(q(el, ".iglens-path-status").textContent).toBe("computing\u2026");
    const r = /** @type {import("./result.js").Result} */ (decodeResult(model.get("result")));
    const rows = Array.from({ length: r.k }, (_, j) => [r.lensProbs[2 * (r.k + 1) + j], 0.25 + j / 100, 0.3, r.lensProbs[2 * (r.k + 1) + j + 1]]);
    model.set("path", {
      position: 2,
      steps: 3,
      path: rows,
      terms: null,
      labels: r.segmentLabels,
      target_id: r.targetIds[2],
      estimator: "prediction_aware",
      seconds: 0.012,
    });
    const lines = [...el.querySelectorAll("[data-selected-index='2'] [data-series=lazy-path] .iglens-path")];
    expect(lines.map((l) => l.getAttribute("data-values")?.split(" ").map(Number))).toEqual(rows);
    expect(q(el, ".iglens-path-status").textContent).toBe("computed for this token in 12 ms");
    // once asked for, selecting another token asks for its own path
    model.set("selected", 4);
    expect(model.get("path_request")).toMatchObject({ position: 4, steps: 3, _n: 2 });
    // a leftover for another result (other labels) is ignored
    model.set("path", {
      position: 4,
      steps: 3,
      path: rows,
      terms: null,
      labels: ["x", "y", "z", "w"],
      target_id: r.targetIds[4],
      estimator: "prediction_aware",
      seconds: 0,
    });
    expect(el.querySelector("[data-series=lazy-path]")).toBeNull();
  });

  it("without a kernel there is no button, only the hint", () => {
    const { el } = mountWidget({ state: { ...makeState({ T: 5, nBlocks: 4, selected: 1 }), interactive: false } });
    expect(el.querySelector("[data-action=path]")).toBeNull();
    expect(q(el, ".iglens-path-hint").textContent).toContain("steps > 1");
  });
});

describe("recompute progress and Cancel", () => {
  it("shows the progress while busy, and Cancel writes cancel_request", () => {
    const { el, model } = mountWidget({ state: makeState({ T: 5, nBlocks: 4, selected: 1 }) });
    const cancel = q(el, "[data-action=cancel]");
    expect(cancel.hidden).toBe(true);
    model.set("busy", true);
    model.set("progress", 0.25);
    expect(cancel.hidden).toBe(false);
    expect(/** @type {HTMLProgressElement} */ (q(el, "progress.iglens-progress")).value).toBe(0.25);
    expect(q(el, ".iglens-status").textContent).toContain("25%");
    cancel.click();
    expect(model.get("cancel_request")).toEqual({ _n: 1 });
    model.set("busy", false);
    expect(cancel.hidden).toBe(true);
  });
});

describe("presentation mode, header, non-monotone markers", () => {
  it("the toggle marks the root and is pressed", () => {
    const { el } = mountWidget({ state: makeState({ T: 5, nBlocks: 4, selected: 1 }) });
    const b = q(el, "[data-action=present]");
    b.click();
    expect(q(el, ".iglens-root").classList.contains("iglens-present")).toBe(true);
    expect(b.getAttribute("aria-pressed")).toBe("true");
    b.click();
    expect(q(el, ".iglens-root").classList.contains("iglens-present")).toBe(false);
  });

  it("strip tokens carry data-nonmonotone exactly where the rule flags them", () => {
    const { el, model } = mountWidget({ state: makeState({ T: 24, nBlocks: 8, selected: 1 }) });
    const r = /** @type {import("./result.js").Result} */ (decodeResult(model.get("result")));
    const want = [];
    for (let i = 0; i < r.T; i++) {
      const row = Array.from(r.contributions.subarray(i * r.k, (i + 1) * r.k));
      if (againstSegments(row, r.deltaP[i], r.nonmonotoneThreshold).some(Boolean)) want.push(i);
    }
    const got = [...el.querySelectorAll("[data-token-index][data-nonmonotone]")].map((t) => Number(/** @type {HTMLElement} */ (t).dataset.tokenIndex));
    expect(got).toEqual(want);
    expect(q(el, ".iglens-nonmono-summary").textContent).toContain(`${want.length} of ${r.T}`);
  });
});
