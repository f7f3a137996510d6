// @vitest-environment jsdom
// Issue 11 in jsdom: the lazy interior path (the path command → path), the recompute's progress
// and Cancel, the presentation toggle, non-monotone markers and the header's token text.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget } from "../testing/dom.js";
import { makeState } from "../testing/fixture.js";
import { decodeResult } from "../model/result.js";
import { againstSegments } from "../lib/nonmonotone.js";
import { NO_KERNEL_NOTE } from "./kernel.js";

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
    const sent = /** @type {Record<string, any>} */ (model.last("path"));
    expect(sent).toEqual({ kind: "path", id: expect.any(String), result_id: "r1", position: 2, steps: 3 });
    expect(q(el, ".iglens-path-status").textContent).toBe("computing\u2026");
    const r = /** @type {import("../model/result.js").Result} */ (decodeResult(model.get("result")));
    const rows = Array.from({ length: r.k }, (_, j) => [r.lensProbs[2 * (r.k + 1) + j], 0.25 + j / 100, 0.3, r.lensProbs[2 * (r.k + 1) + j + 1]]);
    const trait = (/** @type {number} */ i, /** @type {Record<string, any>} */ extra = {}) => ({
      position: i,
      steps: 3,
      path: rows,
      terms: null,
      labels: r.segmentLabels,
      target_id: r.targetIds[i],
      estimator: "prediction_aware",
      seconds: 0.012,
      result_id: "r1",
      request_id: sent.id,
      ...extra,
    });
    model.set("path", trait(2));
    model.answer(sent);
    const lines = [...el.querySelectorAll("[data-selected-index='2'] [data-series=lazy-path] .iglens-path")];
    expect(lines.map((l) => l.getAttribute("data-values")?.split(" ").map(Number))).toEqual(rows);
    expect(q(el, ".iglens-path-status").textContent).toBe("computed for this token in 12 ms");
    // once asked for, selecting another token asks for its own path
    model.set("selected", 4);
    expect(model.last("path")).toMatchObject({ result_id: "r1", position: 4, steps: 3 });
    expect(model.commands("path").length).toBe(2);
    // a path of another result (by its result_id) is not drawn
    model.set("path", trait(4, { result_id: "r0" }));
    expect(el.querySelector("[data-series=lazy-path]")).toBeNull();
    expect(q(el, ".iglens-path-error")).toBeNull();
    // Python's error comes in the answer, shown for the token it was asked for
    model.answer(/** @type {any} */ (model.last("path")), { error: { type: "InvalidRequestError", message: "steps must be at most 1000" } });
    expect(q(el, ".iglens-path-error").textContent).toBe("steps must be at most 1000");
    expect(q(el, ".iglens-path-status").textContent).toBe("");
  });

  it("a superseded answer is dropped: an old path request's error does not show", () => {
    const { el, model } = mountWidget({ state: makeState({ T: 6, nBlocks: 4, selected: 2 }) });
    q(el, "[data-action=path]").click();
    const first = /** @type {any} */ (model.last("path"));
    q(el, "[data-action=path]").click(); // again: supersedes the first
    model.answer(first, { error: { type: "InvalidRequestError", message: "stale" } });
    expect(q(el, ".iglens-path-error")).toBeNull();
    expect(q(el, ".iglens-path-status").textContent).toBe("computing\u2026");
  });

  it("without a kernel there is no button, only the hint", () => {
    const { el } = mountWidget({ state: { ...makeState({ T: 5, nBlocks: 4, selected: 1 }), interactive: false } });
    expect(el.querySelector("[data-action=path]")).toBeNull();
    expect(q(el, ".iglens-path-hint").textContent).toContain("steps > 1");
  });

  it("interactive without a live kernel: the button is disabled and says why; nothing is asked", () => {
    const { el, model } = mountWidget({ state: makeState({ T: 5, nBlocks: 4, selected: 1 }), kernel: "standalone" });
    const button = /** @type {HTMLButtonElement} */ (q(el, "[data-action=path]"));
    expect(button.disabled).toBe(true);
    expect(/** @type {HTMLInputElement} */ (q(el, "input[name=path_steps]")).disabled).toBe(true);
    expect(q(el, ".iglens-path-status").textContent).toBe(NO_KERNEL_NOTE);
    expect(q(el, ".iglens-path-status").classList.contains("iglens-kernel-note")).toBe(true);
    button.click();
    expect(model.sent).toEqual([]);
  });
});

describe("recompute progress and Cancel", () => {
  it("shows the progress while running, and Cancel names the running request", () => {
    const { el, model } = mountWidget({ state: makeState({ T: 5, nBlocks: 4, selected: 1 }) });
    const cancel = q(el, "[data-action=cancel]");
    expect(cancel.hidden).toBe(true);
    model.set("running", { id: "other-view-7", command: "recompute" });
    model.set("progress", 0.25);
    expect(cancel.hidden).toBe(false);
    expect(/** @type {HTMLProgressElement} */ (q(el, "progress.iglens-progress")).value).toBe(0.25);
    expect(q(el, ".iglens-status").textContent).toContain("25%");
    cancel.click();
    expect(model.last("cancel")).toEqual({ kind: "cancel", id: expect.any(String), request_id: "other-view-7" });
    model.set("running", {});
    expect(cancel.hidden).toBe(true);
  });

  it("Cancel of this view's own recompute names it; the cancelled recompute's error shows in the error line", () => {
    const { el, model } = mountWidget({ state: makeState({ T: 5, nBlocks: 4, selected: 1 }) });
    /** @type {HTMLFormElement} */ (q(el, ".iglens-controls-form")).requestSubmit();
    const recompute = /** @type {any} */ (model.last("recompute"));
    const cancel = q(el, "[data-action=cancel]");
    expect(cancel.hidden).toBe(false); // busy before Python's running arrives
    cancel.click();
    expect(model.last("cancel")?.request_id).toBe(recompute.id);
    model.answer(/** @type {any} */ (model.last("cancel")));
    model.answer(recompute, { error: { type: "RecomputeCancelled", message: "cancelled: the old result stays" } });
    expect(cancel.hidden).toBe(true);
    expect(q(el, ".iglens-controls .iglens-error").textContent).toBe("cancelled: the old result stays");
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
    const r = /** @type {import("../model/result.js").Result} */ (decodeResult(model.get("result")));
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
