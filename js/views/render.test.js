// @vitest-environment jsdom
import { describe, it, expect, vi, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeResult, makeState } from "../testing/fixture.js";
import { decodeResult } from "../model/result.js";
import { againstSegments } from "../lib/nonmonotone.js";
import { formatToken } from "../lib/tokens.js";
import widget, * as bundle from "../widget.js";
import { render } from "./app.js";
import { createModel, mount } from "../standalone.js";
import { toBase64, encodeArray } from "../model/codec.js";
import { HELLO_TIMEOUT_MS } from "../model/commands.js";
import { NO_KERNEL_NOTE, CONNECTING_NOTE } from "./kernel.js";

/** @type {string[]} */
let canvasCalls = [];
beforeAll(() => {
  canvasCalls = installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
const tokens = (/** @type {Element} */ el) => /** @type {HTMLElement[]} */ ([...el.querySelectorAll("[data-token-index]")]);

describe("anywidget contract", () => {
  it("default export is { render } and the bundle exports createModel and mount", () => {
    expect(typeof widget.render).toBe("function");
    expect(widget.render).toBe(render);
    expect(bundle.createModel).toBe(createModel);
    expect(bundle.mount).toBe(mount);
    expect("render" in bundle).toBe(false); // anywidget flags a named render export
  });
});

describe("token strip ↔ selection ↔ detail", () => {
  it("renders T tokens with data-token-index", () => {
    const { el } = mountWidget({ T: 9 });
    const items = tokens(el);
    expect(items.length).toBe(9);
    expect(items.map((t) => t.dataset.tokenIndex)).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8"]);
    expect(items[0].textContent).toBe(formatToken(" The", { maxLen: 32 }));
  });

  it("click selects, arrow keys move, Escape clears", () => {
    const { el, model } = mountWidget({ T: 9 });
    const r = /** @type {import("../model/result.js").Result} */ (decodeResult(model.get("result")));
    const detail = q(el, ".iglens-detail");
    expect(detail.hasAttribute("data-selected-index")).toBe(false);

    fire(tokens(el)[2], "click");
    expect(model.get("selected")).toBe(2);
    expect(detail.getAttribute("data-selected-index")).toBe("2");
    expect(detail.textContent).toContain(r.targetTokens[2]);
    expect(tokens(el)[2].classList.contains("iglens-selected")).toBe(true);
    expect(tokens(el)[2].getAttribute("aria-selected")).toBe("true");

    fire(tokens(el)[2], "keydown", { key: "ArrowRight" });
    expect(model.get("selected")).toBe(3);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("3");
    expect(q(el, ".iglens-detail").textContent).toContain(r.targetTokens[3]);
    expect(tokens(el)[2].classList.contains("iglens-selected")).toBe(false);
    expect(tokens(el)[3].tabIndex).toBe(0);
    expect(tokens(el)[2].tabIndex).toBe(-1);

    fire(tokens(el)[3], "keydown", { key: "ArrowLeft" });
    fire(tokens(el)[2], "keydown", { key: "ArrowLeft" });
    expect(model.get("selected")).toBe(1);
    fire(tokens(el)[1], "keydown", { key: "End" });
    expect(model.get("selected")).toBe(8);
    fire(tokens(el)[8], "keydown", { key: "ArrowRight" });
    expect(model.get("selected")).toBe(8); // clamped

    fire(tokens(el)[8], "keydown", { key: "Escape" });
    expect(model.get("selected")).toBe(-1);
    expect(q(el, ".iglens-detail").hasAttribute("data-selected-index")).toBe(false);
    expect(el.querySelectorAll(".iglens-selected").length).toBe(0);
  });

  it("hover previews without changing the selection; leaving restores it", () => {
    const { el, model } = mountWidget({ T: 9 });
    fire(tokens(el)[1], "click");
    fire(tokens(el)[5], "mouseover");
    expect(model.get("hovered")).toBe(5);
    expect(model.get("selected")).toBe(1);
    const detail = q(el, ".iglens-detail");
    expect(detail.getAttribute("data-selected-index")).toBe("5");
    expect(detail.classList.contains("iglens-detail-preview")).toBe(true);
    expect(detail.textContent).toContain("preview");
    fire(q(el, ".iglens-strip"), "mouseleave");
    expect(model.get("hovered")).toBe(-1);
    expect(detail.getAttribute("data-selected-index")).toBe("1");
    expect(detail.classList.contains("iglens-detail-preview")).toBe(false);
  });

  it("a new selection clears the hover preview (LIT's selection/focus split)", () => {
    const { el, model } = mountWidget({ T: 9 });
    fire(tokens(el)[4], "mouseover");
    fire(tokens(el)[4], "click");
    expect(model.get("hovered")).toBe(-1);
    fire(tokens(el)[4], "keydown", { key: "ArrowRight" });
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("5");
  });

  it("follows selection set from Python", () => {
    const { el, model } = mountWidget({ T: 9 });
    model.set("selected", 6);
    expect(tokens(el)[6].classList.contains("iglens-selected")).toBe(true);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("6");
    model.set("selected", 99); // out of range: treated as none
    expect(q(el, ".iglens-detail").hasAttribute("data-selected-index")).toBe(false);
  });

  it("renders an initial selection", () => {
    const { el } = mountWidget({ T: 9, selected: 3 });
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("3");
    expect(tokens(el)[3].classList.contains("iglens-selected")).toBe(true);
  });

  it("colour-by select drives the color_by trait and recolours", () => {
    const { el, model } = mountWidget({ T: 9 });
    const select = /** @type {HTMLSelectElement} */ (q(el, "select[name=color_by]"));
    const before = tokens(el).map((t) => t.style.backgroundColor);
    select.value = "delta_p";
    fire(select, "change");
    expect(model.get("color_by")).toBe("delta_p");
    const after = tokens(el).map((t) => t.style.backgroundColor);
    expect(after).not.toEqual(before);
    model.set("color_by", "onset");
    expect(select.value).toBe("onset");
    expect(q(el, ".iglens-strip-legend").textContent).toContain("onset");
  });

  it("marks the generated answer from answer_start (= prompt_length − 1), in the strip and the detail", () => {
    const state = makeState({ T: 10, promptLength: 7 });
    expect(state.result.answer_start).toBe(6);
    const { el, model } = mountWidget({ state });
    // position 6 = prompt_length − 1 predicts the answer's first token: it is "answer"
    expect(
      tokens(el)
        .filter((t) => t.classList.contains("iglens-token-answer"))
        .map((t) => t.dataset.tokenIndex),
    ).toEqual(["6", "7", "8", "9"]);
    const divider = q(el, ".iglens-answer-divider");
    expect(divider.textContent).toBe("answer");
    expect(divider.nextElementSibling?.getAttribute("data-token-index")).toBe("6");
    model.set("selected", 6);
    expect(q(el, ".iglens-detail .iglens-badge-answer")?.textContent).toBe("answer");
    model.set("selected", 5); // answer_start − 1: a prompt position
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("5");
    expect(el.querySelector(".iglens-detail .iglens-badge-answer")).toBeNull();
    expect(q(el, ".iglens-heatmap .iglens-foot").textContent).toContain("Rows under the purple line predict the generated answer");
  });

  it("answer_start alone decides (not prompt_length)", () => {
    const result = makeResult({ T: 8, promptLength: 5 });
    result.answer_start = 2;
    const { el } = mountWidget({ state: { ...makeState(), result, selected: 2 } });
    expect(tokens(el).filter((t) => t.classList.contains("iglens-token-answer")).length).toBe(6);
    expect(q(el, ".iglens-answer-divider").nextElementSibling?.getAttribute("data-token-index")).toBe("2");
    expect(el.querySelector(".iglens-detail .iglens-badge-answer")).not.toBeNull();
  });

  it("no answer (answer_start = T): nothing is marked", () => {
    const { el } = mountWidget({ T: 6, selected: 5 });
    expect(el.querySelectorAll(".iglens-token-answer, .iglens-answer-divider, .iglens-badge-answer").length).toBe(0);
  });
});

describe("detail panel", () => {
  it("shows the completeness line in numbers", () => {
    const { el, model } = mountWidget({ T: 6, selected: 2 });
    const line = q(el, ".iglens-completeness").textContent ?? "";
    expect(line).toMatch(/Σ contributions = [+-]\d\.\d{4}, Δp = [+-]\d\.\d{4}, \|error\| = \d\.\de[+-]\d\d/);
    const r = /** @type {import("../model/result.js").Result} */ (decodeResult(model.get("result")));
    const onset = q(el, ".iglens-detail").querySelector(".iglens-stat:last-child")?.textContent ?? "";
    expect(onset.startsWith("onset")).toBe(true);
    expect(onset.split(/\s+/).pop()).toBe(String(r.onsetBlock[2])); // the block number, as in Python
    expect(line).toContain(`Δp = ${r.deltaP[2] >= 0 ? "+" : "-"}${Math.abs(r.deltaP[2]).toFixed(4)}`);
  });

  it("draws bars, the cumulative curve and the logit-lens overlay", () => {
    const { el } = mountWidget({ T: 6, nBlocks: 12, selected: 1 });
    expect(el.querySelectorAll(".iglens-bar").length).toBe(12);
    expect(el.querySelector(".iglens-curve")).not.toBeNull();
    expect(el.querySelector(".iglens-top1")).not.toBeNull();
    expect(el.querySelectorAll(".iglens-top1-label").length).toBeGreaterThan(0);
    expect(el.querySelector(".iglens-path")).toBeNull(); // steps = 1
  });

  it("draws the interior path when path_probs is given", () => {
    const { el } = mountWidget({ T: 4, nBlocks: 8, steps: 4, selected: 0 });
    expect(el.querySelector(".iglens-path")).not.toBeNull();
  });

  it("marks non-monotone segments with hatching, ▲▼ and a text list", () => {
    const result = makeResult({ T: 30, nBlocks: 16, seed: 3 });
    const r = /** @type {import("../model/result.js").Result} */ (decodeResult(result));
    let i = -1;
    for (let p = 0; p < r.T && i < 0; p++) {
      if (againstSegments(r.contributions.subarray(p * r.k, (p + 1) * r.k), r.deltaP[p], r.nonmonotoneThreshold).some(Boolean)) i = p;
    }
    expect(i).toBeGreaterThanOrEqual(0);
    const flags = againstSegments(r.contributions.subarray(i * r.k, (i + 1) * r.k), r.deltaP[i], r.nonmonotoneThreshold);
    const { el } = mountWidget({ state: { ...makeState(), result, selected: i } });
    expect(el.querySelectorAll(".iglens-bar-flag").length).toBe(flags.filter(Boolean).length);
    expect(el.querySelectorAll(".iglens-flag-mark").length).toBe(flags.filter(Boolean).length);
    expect(el.querySelectorAll(".iglens-nonmono-shade").length).toBeGreaterThan(0);
    expect(q(el, ".iglens-flags").textContent).toContain("Against Δp");
  });

  it("says so for a position without a target", () => {
    const { el, model } = mountWidget({ T: 5, lastHasNoTarget: true });
    model.set("selected", 4);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("4");
    expect(q(el, ".iglens-detail").textContent).toContain("no target");
    expect(tokens(el)[4].classList.contains("iglens-token-none")).toBe(true);
  });

  it("labels a contrast", () => {
    const { el } = mountWidget({ T: 5, contrast: true, selected: 1 });
    expect(q(el, ".iglens-detail").textContent).toContain("vs");
    expect(q(el, ".iglens-detail").textContent).toContain("p(target) − p(contrast)");
  });
});

describe("sub-layer boundaries (half depths)", () => {
  it("the detail names the onset by its label and plots the halves at their depths", () => {
    const state = makeState({ T: 4, nBlocks: 6, sublayer: true, selected: 1 });
    const r = /** @type {import("../model/result.js").Result} */ (decodeResult(state.result));
    const { el } = mountWidget({ state });
    expect(el.querySelectorAll(".iglens-bar").length).toBe(12);
    const j = r.onset[1];
    const onsetStat = /** @type {HTMLElement} */ ([...el.querySelectorAll(".iglens-detail .iglens-stat")].find((x) => x.textContent?.startsWith("onset")));
    expect(onsetStat.textContent).toBe(`onsetblock ${r.segmentLabels[j]}`);
    expect(r.segmentLabels[j]).toMatch(/^\d+\.(attn|mlp)$/);
    expect(onsetStat.title).toContain(`block ${r.onsetBlock[1]}`);
    // bars sit at the depths: half-block bars, the attention half left of the MLP half
    const bars = [...el.querySelectorAll(".iglens-bar")];
    const bx = bars.map((b) => Number(b.getAttribute("x")));
    for (let q = 1; q < bx.length; q++) expect(bx[q]).toBeGreaterThan(bx[q - 1]);
    const widths = bars.map((b) => Number(b.getAttribute("width")));
    expect(Math.max(...widths) - Math.min(...widths)).toBeLessThan(1e-6);
    const dots = [...el.querySelectorAll(".iglens-curve-dot")].map((c) => Number(c.getAttribute("cx")));
    expect(dots.length).toBe(13);
    expect(dots[1] - dots[0]).toBeCloseTo(dots[2] - dots[1], 6); // depth 0, 0.5, 1: evenly spaced
    expect(q(el, ".iglens-axis-title").textContent).toContain("L \u2212 0.5");
  });

  it("the heatmap tooltip says which half: the cell's label and the depth after it", () => {
    const { el } = mountWidget({ T: 4, nBlocks: 6, sublayer: true });
    const canvas = q(el, "canvas.iglens-heatmap-canvas");
    const labelW = Math.round(Math.min(200, Math.max(96, 0.3 * 640)));
    const colW = Math.floor((640 - labelW - 8) / 12);
    fire(canvas, "mousemove", { clientX: labelW + 2 * colW + 3, clientY: 24 + 1 * 20 + 5 }); // segment 2 = 2.attn
    const tip = q(el, ".iglens-tooltip").textContent ?? "";
    expect(tip).toContain("block2.attn");
    expect(tip).toContain("p(target) after block 2.attn");
    fire(canvas, "mousemove", { clientX: labelW + 3 * colW + 3, clientY: 24 + 1 * 20 + 5 }); // 2.mlp: after block 2
    expect(q(el, ".iglens-tooltip").textContent).toContain("p(target) after block 2");
    expect(q(el, ".iglens-heatmap .iglens-foot").textContent).toContain("attention and MLP halves of blocks 1\u20136");
  });
});

describe("heatmap", () => {
  it("has the canvas, draws the cells from one bitmap, and clicking a cell selects", () => {
    canvasCalls.length = 0;
    const { el, model } = mountWidget({ T: 8, nBlocks: 10 });
    const canvas = q(el, "canvas.iglens-heatmap-canvas");
    expect(canvas).not.toBeNull();
    expect(canvasCalls).toContain("putImageData");
    expect(canvasCalls).toContain("drawImage");
    // jsdom has no layout: the canvas sits at (0, 0); rows start under the 24px header
    const g = { labelW: 0, headerH: 24, rowH: 20 };
    const w = Number(canvas.style.width.replace("px", ""));
    expect(w).toBeGreaterThan(0);
    g.labelW = Math.round(Math.min(200, Math.max(96, 0.3 * 640)));
    fire(canvas, "click", { clientX: g.labelW + 3, clientY: g.headerH + 2 * g.rowH + 5 });
    expect(model.get("selected")).toBe(2);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("2");
    fire(canvas, "keydown", { key: "ArrowDown" });
    expect(model.get("selected")).toBe(3);
    fire(canvas, "keydown", { key: "Escape" });
    expect(model.get("selected")).toBe(-1);
  });

  it("hover shows a tooltip with the top lens tokens and previews the row", () => {
    const { el, model } = mountWidget({ T: 8, nBlocks: 10 });
    const canvas = q(el, "canvas.iglens-heatmap-canvas");
    const labelW = Math.round(Math.min(200, Math.max(96, 0.3 * 640)));
    fire(canvas, "mousemove", { clientX: labelW + 3, clientY: 24 + 3 * 20 + 5 });
    expect(model.get("hovered")).toBe(3);
    const tip = q(el, ".iglens-tooltip");
    expect(tip.hidden).toBe(false);
    expect(tip.textContent).toContain("contribution");
    expect(tip.textContent).toContain("lens top-5");
    expect(tip.querySelectorAll("li").length).toBe(5);
    fire(canvas, "mouseleave");
    expect(tip.hidden).toBe(true);
    expect(model.get("hovered")).toBe(-1);
  });
});

describe("controls", () => {
  it("are hidden unless interactive", () => {
    const { el, model } = mountWidget({ T: 4, interactive: false });
    expect(q(el, ".iglens-controls").hidden).toBe(true);
    model.set("interactive", true);
    expect(q(el, ".iglens-controls").hidden).toBe(false);
  });

  it("apply sends the recompute command; running and the answer's error show", () => {
    const { el, model } = mountWidget({ T: 4, interactive: true });
    const c = q(el, ".iglens-controls");
    for (const name of ["target", "contrast", "boundaries", "estimator", "steps"]) {
      expect(c.querySelector(`[name=${name}]`)).not.toBeNull();
    }
    expect(q(c, ".iglens-kernel-note").hidden).toBe(true); // the kernel answered hello
    /** @type {HTMLInputElement} */ (c.querySelector("[name=target]")).value = " Paris";
    /** @type {HTMLInputElement} */ (c.querySelector("[name=contrast]")).value = " London";
    const b = /** @type {HTMLSelectElement} */ (c.querySelector("[name=boundaries]"));
    b.value = "custom";
    fire(b, "change");
    /** @type {HTMLInputElement} */ (c.querySelector("[name=boundaries_custom]")).value = "0,10,20,30";
    /** @type {HTMLSelectElement} */ (c.querySelector("[name=estimator]")).value = "riemann";
    /** @type {HTMLInputElement} */ (c.querySelector("[name=steps]")).value = "8";
    fire(q(c, ".iglens-apply"), "click");
    const first = /** @type {Record<string, any>} */ (model.last("recompute"));
    expect(first).toEqual({
      kind: "recompute",
      id: expect.any(String),
      result_id: "r1",
      controls: { target: " Paris", contrast: " London", boundaries: "0,10,20,30", estimator: "riemann", steps: 8, lens: "logit" },
    });
    // busy until the answer: a second Apply sends nothing
    expect(/** @type {HTMLButtonElement} */ (q(c, ".iglens-apply")).disabled).toBe(true);
    fire(q(c, ".iglens-apply"), "click");
    expect(model.commands("recompute").length).toBe(1);
    model.answer(first);
    fire(q(c, ".iglens-apply"), "click"); // the same settings again still reach Python
    expect(model.commands("recompute").length).toBe(2);
    model.answer(/** @type {any} */ (model.last("recompute")));

    model.set("running", { id: "x-1", command: "recompute" });
    expect(/** @type {HTMLButtonElement} */ (q(c, ".iglens-apply")).disabled).toBe(true);
    expect(c.classList.contains("iglens-busy")).toBe(true);
    model.set("running", { id: "x-2", command: "ablation" }); // another command: Apply waits, not busy
    expect(/** @type {HTMLButtonElement} */ (q(c, ".iglens-apply")).disabled).toBe(true);
    expect(c.classList.contains("iglens-busy")).toBe(false);
    model.set("running", {});
    fire(q(c, ".iglens-apply"), "click");
    model.answer(/** @type {any} */ (model.last("recompute")), {
      error: { type: "InvalidRequestError", message: "' Pariss' is not one token: [' Par', 'iss']" },
    });
    expect(q(c, ".iglens-error").hidden).toBe(false);
    expect(q(c, ".iglens-error").textContent).toContain("not one token");
    fire(q(c, ".iglens-apply"), "click"); // a new recompute clears it
    expect(q(c, ".iglens-error").hidden).toBe(true);
  });

  it("interactive without a live kernel: every field is off and the note says why", () => {
    vi.useFakeTimers();
    try {
      const { el, model } = mountWidget({ T: 4, interactive: true, kernel: "silent" });
      const c = q(el, ".iglens-controls");
      const apply = /** @type {HTMLButtonElement} */ (q(c, ".iglens-apply"));
      expect(model.commands("hello").length).toBe(1);
      expect(c.hidden).toBe(false);
      expect(apply.disabled).toBe(true);
      expect(q(c, ".iglens-kernel-note").hidden).toBe(false);
      expect(q(c, ".iglens-kernel-note").textContent).toBe(CONNECTING_NOTE);
      expect(/** @type {HTMLInputElement} */ (c.querySelector("[name=target]")).disabled).toBe(true);
      fire(apply, "click");
      expect(model.commands("recompute")).toEqual([]);
      vi.advanceTimersByTime(HELLO_TIMEOUT_MS);
      expect(q(c, ".iglens-kernel-note").textContent).toBe(NO_KERNEL_NOTE);
      expect(q(c, ".iglens-kernel-note").getAttribute("data-kernel")).toBe("none");
      expect(c.classList.contains("iglens-no-kernel")).toBe(true);
      // a late answer still brings the controls to life
      model.answer(/** @type {any} */ (model.last("hello")));
      expect(apply.disabled).toBe(false);
      expect(q(c, ".iglens-kernel-note").hidden).toBe(true);
      expect(/** @type {HTMLInputElement} */ (c.querySelector("[name=target]")).disabled).toBe(false);
    } finally {
      vi.useRealTimers();
    }
    // the exported page's model: no kernel, at once
    const page = mountWidget({ T: 4, interactive: true, kernel: "standalone" });
    expect(q(page.el, ".iglens-controls .iglens-kernel-note").textContent).toBe(NO_KERNEL_NOTE);
    expect(/** @type {HTMLButtonElement} */ (q(page.el, ".iglens-apply")).disabled).toBe(true);
  });

  it("prefill from the result's controls", () => {
    const state = makeState({ T: 4, every: 5 });
    const { el, model } = mountWidget({ state });
    expect(/** @type {HTMLSelectElement} */ (q(el, "[name=boundaries]")).value).toBe("every:5");
    expect(/** @type {HTMLInputElement} */ (q(el, "[name=target]")).value).toBe("predicted");
    const result = makeResult({ T: 4, every: 5 });
    result.controls = { target: " Paris", contrast: " London", boundaries: "0,10,20,30", estimator: "riemann", steps: 8 };
    model.set("result", result);
    const val = (/** @type {string} */ name) => /** @type {HTMLInputElement} */ (q(el, `[name=${name}]`)).value;
    expect([val("target"), val("contrast"), val("boundaries"), val("boundaries_custom"), val("estimator"), val("steps")]).toEqual([
      " Paris",
      " London",
      "custom",
      "0,10,20,30",
      "riemann",
      "8",
    ]);
    expect(q(el, ".iglens-meta").textContent).toContain("target: \u2423Paris");
  });

  it('offer the sub-layer boundaries ("sublayer"), prefill them and send them', () => {
    const { el, model } = mountWidget({ state: makeState({ T: 4, nBlocks: 4, sublayer: true, interactive: true }) });
    const b = /** @type {HTMLSelectElement} */ (q(el, "[name=boundaries]"));
    expect([...b.options].map((o) => o.value)).toEqual(["all", "every:2", "every:5", "sublayer", "custom"]);
    expect(b.value).toBe("sublayer");
    expect(b.selectedOptions[0].textContent).toBe("attn / MLP halves");
    expect(q(el, "[name=boundaries_custom]").hidden).toBe(true);
    fire(q(el, ".iglens-apply"), "click");
    expect(model.last("recompute")?.controls.boundaries).toBe("sublayer");
  });

  it("the steps box stops at the payload's max_steps (the request's limit)", () => {
    const result = makeResult({ T: 4 });
    result.max_steps = 37;
    const { el } = mountWidget({ state: { ...makeState({ T: 4 }), result, interactive: true } });
    expect(/** @type {HTMLInputElement} */ (q(el, "[name=steps]")).max).toBe("37");
  });
});

describe("result updates and cleanup", () => {
  it("rebuilds when Python sends a new result", () => {
    const { el, model } = mountWidget({ T: 5 });
    expect(tokens(el).length).toBe(5);
    model.set("result", makeResult({ T: 11, nBlocks: 6 }));
    expect(tokens(el).length).toBe(11);
    model.set("selected", 10);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("10");
    expect(el.querySelectorAll(".iglens-bar").length).toBe(6);
  });

  it("shows a notice for an empty or broken result", () => {
    const { el, model } = mountWidget({ state: { ...makeState(), result: {} } });
    expect(q(el, ".iglens-notice").hidden).toBe(false);
    expect(tokens(el).length).toBe(0);
    model.set("result", { contributions: { dtype: "float32", shape: [2, 2], buffer: new DataView(new ArrayBuffer(4)) }, lens_probs: null });
    expect(q(el, ".iglens-notice").textContent).toContain("Could not read the result");
  });

  it("the cleanup function removes the view and its listeners", () => {
    const { el, model, cleanup } = mountWidget({ T: 5 });
    cleanup();
    expect(el.querySelector(".iglens-root")).toBeNull();
    expect(() => model.set("selected", 2)).not.toThrow();
    expect(() => model.set("result", makeResult({ T: 3 }))).not.toThrow();
  });

  it("two views of one model stay linked", () => {
    const a = document.createElement("div");
    const b = document.createElement("div");
    document.body.append(a, b);
    const model = createModel(makeState({ T: 6 }));
    render({ model, el: a });
    render({ model, el: b });
    fire(tokens(a)[4], "click");
    expect(q(b, ".iglens-detail").getAttribute("data-selected-index")).toBe("4");
  });
});

describe("standalone mount (static export)", () => {
  it("decodes base64 buffers, injects CSS once and renders", () => {
    const state = makeState({ T: 7, base64: true });
    expect(typeof state.result.contributions.buffer).toBe("string");
    const el = document.createElement("div");
    document.body.appendChild(el);
    const { model, destroy } = mount(el, state, { css: ".iglens-root{color:red}" });
    mount(document.body.appendChild(document.createElement("div")), state, ".iglens-root{color:red}");
    expect(document.head.querySelectorAll("style[data-iglens-css]").length).toBe(1);
    expect(tokens(el).length).toBe(7);
    fire(tokens(el)[2], "click");
    expect(model.get("selected")).toBe(2);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("2");
    destroy();
    expect(el.querySelector(".iglens-root")).toBeNull();
  });

  it("createModel notifies change listeners and supports off", () => {
    const model = createModel({ selected: -1 });
    /** @type {any[]} */
    const seen = [];
    const cb = (/** @type {any} */ _m, /** @type {any} */ v) => seen.push(v);
    model.on("change:selected", cb);
    model.set("selected", 3);
    model.set("selected", 3); // unchanged: no event
    model.off("change:selected", cb);
    model.set("selected", 4);
    expect(seen).toEqual([3]);
    expect(model.get("color_by")).toBe("p_final");
    expect(() => model.save_changes()).not.toThrow();
  });

  it("base64 is what Python's base64.b64encode writes", () => {
    expect(toBase64(new Uint8Array([0, 1, 2, 253, 254, 255]))).toBe("AAEC/f7/");
  });
});

describe("the payload's one definitions", () => {
  const LABEL_W = Math.round(Math.min(200, Math.max(96, 0.3 * 640)));
  /** a bare "p(target)" naming the lens value: not followed by " − p(contrast)" */
  const BARE = /p\(target\)(?! \u2212 p\(contrast\))/;

  /** Every text that names the lens value, with the heatmap tooltip (row label + cell) and the chart readouts shown. */
  function lensTexts(/** @type {HTMLElement} */ el, /** @type {number} */ row) {
    const canvas = q(el, "canvas.iglens-heatmap-canvas");
    const tip = q(el, ".iglens-tooltip");
    fire(canvas, "mousemove", { clientX: 40, clientY: 24 + row * 20 + 5 }); // row label
    const rowTip = tip.textContent ?? "";
    fire(canvas, "mousemove", { clientX: LABEL_W + 3, clientY: 24 + row * 20 + 5 }); // cell of segment 0
    const cellTip = tip.textContent ?? "";
    fire(canvas, "mouseleave");
    const charts = [...el.querySelectorAll(".iglens-detail svg.iglens-chart")];
    fire(charts[0], "mousemove", { clientX: 120 });
    const barsReadout = q(el, ".iglens-readout").textContent ?? "";
    fire(charts[1], "mousemove", { clientX: 120 });
    const curveReadout = q(el, ".iglens-readout").textContent ?? "";
    const select = /** @type {HTMLSelectElement} */ (q(el, "select[name=color_by]"));
    return {
      rowTip,
      cellTip,
      barsReadout,
      curveReadout,
      detail: q(el, ".iglens-detail").textContent ?? "",
      heatmapLegend: q(el, ".iglens-heatmap-legend").textContent ?? "",
      stripLegend: q(el, ".iglens-strip-legend").textContent ?? "",
      colorBy: select.options[0].textContent ?? "",
      stripTitle: tokens(el)[row].title,
    };
  }

  it("with a contrast, the lens value is p(target) − p(contrast) everywhere, never a bare p(target)", () => {
    const { el } = mountWidget({ T: 6, nBlocks: 8, contrast: true, selected: 1 });
    const texts = lensTexts(el, 1);
    const name = "p(target) \u2212 p(contrast)";
    expect(texts.rowTip).toContain(`${name} at output`);
    expect(texts.cellTip).toContain(`${name} after block 1`);
    expect(texts.barsReadout).toContain(name);
    expect(texts.curveReadout).toContain(name);
    expect(texts.detail).toContain(name);
    expect(texts.heatmapLegend).toContain(`contribution to ${name}`);
    expect(texts.stripLegend).toContain(name);
    expect(texts.colorBy).toBe(`${name} at output`);
    expect(texts.stripTitle).toContain(`${name} =`);
    for (const [where, text] of Object.entries(texts)) expect(`${where}: ${text}`).not.toMatch(BARE);
  });

  it("the lens value's name is the payload's target_name", () => {
    const result = makeResult({ T: 6, nBlocks: 8, contrast: true });
    result.target_name = "p(Paris) \u2212 p(Hanoi)";
    const { el } = mountWidget({ state: { ...makeState(), result, selected: 1 } });
    const texts = lensTexts(el, 1);
    for (const [where, text] of Object.entries(texts)) {
      expect(`${where}: ${text}`).toContain("p(Paris) \u2212 p(Hanoi)");
      expect(`${where}: ${text}`).not.toContain("p(target)");
    }
  });

  /** A result whose position 0 has contributions [0.5, −0.1, 0.4, 0.1] (Δp = 0.9): segment 1 opposes Δp by 20% of the largest. */
  function thresholdResult(/** @type {number} */ threshold) {
    const result = makeResult({ T: 2, nBlocks: 4, K: 0, threshold });
    const c = [0.5, -0.1, 0.4, 0.1, 0.2, 0.2, 0.2, 0.2];
    const lens = [];
    const delta = [];
    for (let i = 0; i < 2; i++) {
      let p = 0.01;
      lens.push(p);
      for (let j = 0; j < 4; j++) {
        p += c[i * 4 + j];
        lens.push(p);
      }
      delta.push(p - 0.01);
    }
    result.contributions = encodeArray(new Float32Array(c), [2, 4]);
    result.lens_probs = encodeArray(new Float32Array(lens), [2, 5]);
    result.delta_p = encodeArray(new Float32Array(delta), [2]);
    result.onset = encodeArray(new Int32Array([1, 1]), [2]);
    result.onset_segment = encodeArray(new Int32Array([0, 0]), [2]);
    return result;
  }

  it("the non-monotone threshold comes from the payload: it changes what is flagged and is stated", () => {
    const low = mountWidget({ state: { ...makeState(), result: thresholdResult(0.05), selected: 0 } }).el;
    expect(low.querySelectorAll(".iglens-bar-flag").length).toBe(1);
    expect(q(low, ".iglens-flags").textContent).toContain("Against \u0394p");
    expect(q(low, ".iglens-flags").textContent).toContain("against \u0394p by more than 5% of the largest |contribution|");
    expect(q(low, ".iglens-help").textContent).toContain("by more than 5% of the largest |contribution|");

    const high = mountWidget({ state: { ...makeState(), result: thresholdResult(0.25), selected: 0 } }).el;
    expect(high.querySelectorAll(".iglens-bar-flag").length).toBe(0);
    expect(high.querySelectorAll(".iglens-nonmono-shade").length).toBe(0);
    expect(q(high, ".iglens-flags").textContent).toContain("Monotone: no segment moves against \u0394p by more than 25% of the largest |contribution|");
    expect(q(high, ".iglens-help").textContent).toContain("by more than 25% of the largest |contribution|");
  });

  it("segment labels come from the payload (legend, tooltip, detail)", () => {
    const result = makeResult({ T: 5, nBlocks: 20, every: 5 });
    result.segment_labels = ["early", "middle", "late", "final"];
    result.onset = encodeArray(new Int32Array([10, 10, 10, 10, 10]), [5]); // segment 1: blocks 6–10
    result.onset_segment = encodeArray(new Int32Array([1, 1, 1, 1, 1]), [5]);
    const { el, model } = mountWidget({ state: { ...makeState(), result, selected: 1 } });
    model.set("color_by", "onset");
    const legend = q(el, ".iglens-strip-legend").textContent ?? "";
    expect(legend).toContain("early");
    expect(legend).toContain("final");
    const canvas = q(el, "canvas.iglens-heatmap-canvas");
    fire(canvas, "mousemove", { clientX: LABEL_W + 3, clientY: 24 + 2 * 20 + 5 });
    expect(q(el, ".iglens-tooltip").textContent).toContain("early");
    const onsetStat = /** @type {HTMLElement} */ ([...el.querySelectorAll(".iglens-detail .iglens-stat")].find((x) => x.textContent?.startsWith("onset")));
    expect(onsetStat.title).toContain("blocks middle");
    expect(onsetStat.textContent).toBe("onsetblocks middle");
    fire(/** @type {Element} */ (el.querySelector(".iglens-detail svg.iglens-chart")), "mousemove", { clientX: 0 });
    expect(q(el, ".iglens-readout").textContent).toContain("blocks early");
  });
});
