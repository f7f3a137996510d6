// @vitest-environment jsdom
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeState } from "../testing/fixture.js";
import { decodeResult, contributionRow, segmentText } from "./result.js";
import {
  decodeAblation,
  readAblationTrait,
  ablationMismatch,
  spearman,
  ranks,
  argmax,
  compareAblation,
  rhoText,
  causalSummary,
  checkFields,
  defaultChoice,
  positionsText,
  agreementSentence,
  READABLE_NOT_COMPUTED,
} from "./ablation.js";
import { ABLATE_HINT, ABLATE_SHORT_HINT } from "../views/detail/ablation.js";
import { NO_KERNEL_NOTE, CONNECTING_NOTE } from "../views/kernel.js";
import { fmtSigned } from "../lib/format.js";
import { createModel, mount } from "../standalone.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
/** @param {any} raw */
const decoded = (raw) => /** @type {import("./result.js").Result} */ (decodeResult(raw));
const button = (/** @type {Element} */ el) => /** @type {HTMLButtonElement} */ (el.querySelector(".iglens-detail [data-action=ablate]"));
const dropBars = (/** @type {Element} */ el) => /** @type {SVGElement[]} */ ([...el.querySelectorAll(".iglens-detail [data-series=ablation] rect")]);

/**
 * The `ablation` trait Python would send for position i of a result: drops given.
 * @param {import("./result.js").Result} r @param {number} i @param {(number|null)[]} drops
 * @param {Record<string, any>} [extra]
 */
function trait(r, i, drops, extra = {}) {
  return {
    position: i,
    mode: "zero",
    drops,
    clean: 0.42,
    labels: r.segmentLabels.slice(),
    parts: r.segmentLabels.map((l) => (l.endsWith(".attn") ? "attn" : l.endsWith(".mlp") ? "mlp" : "block")),
    target_id: r.targetIds[i],
    contrast_id: null,
    target_name: r.targetName,
    seconds: 0.25,
    result_id: r.id,
    request_id: "q-1",
    ...extra,
  };
}

const FIT = { id: "r1", T: 4, k: 3, segmentLabels: ["1", "2", "3"], targetIds: [5, 6, 7, 8] };
const GOOD = {
  position: 1,
  mode: "zero",
  drops: [0.1, null, -0.2],
  clean: 0.5,
  labels: ["1", "2", "3"],
  parts: ["block", "block", "block"],
  target_id: 6,
  contrast_id: null,
  target_name: "p(target)",
  seconds: 1.5,
  result_id: "r1",
  request_id: "q-1",
};

describe("the ablation trait: decoding and validation", () => {
  it("decodes every field; null drops are NaN", () => {
    const a = /** @type {import("./ablation.js").Ablation} */ (decodeAblation(GOOD));
    expect(a.position).toBe(1);
    expect(a.mode).toBe("zero");
    expect(Array.from(a.drops)).toEqual([0.1, NaN, -0.2]);
    expect(a.clean).toBe(0.5);
    expect(a.labels).toEqual(["1", "2", "3"]);
    expect(a.parts).toEqual(["block", "block", "block"]);
    expect(a.targetId).toBe(6);
    expect(a.contrastId).toBeNull();
    expect(a.targetName).toBe("p(target)");
    expect(a.seconds).toBe(1.5);
    // optional keys may be left out
    const bare = /** @type {import("./ablation.js").Ablation} */ (decodeAblation({ position: 0, mode: "zero", drops: [1], labels: ["1"] }));
    expect(bare.parts).toBeNull();
    expect(bare.targetId).toBeNull();
    expect(Number.isNaN(bare.clean) && Number.isNaN(bare.seconds)).toBe(true);
  });

  it("empty means none; malformed values name the key", () => {
    expect(decodeAblation({})).toBeNull();
    expect(decodeAblation(null)).toBeNull();
    expect(decodeAblation(undefined)).toBeNull();
    const bad = (/** @type {any} */ patch) => () => decodeAblation({ ...GOOD, ...patch });
    expect(() => decodeAblation([1, 2])).toThrow(/must be an object/);
    expect(bad({ position: -1 })).toThrow(/position/);
    expect(bad({ position: 1.5 })).toThrow(/position/);
    expect(bad({ mode: "" })).toThrow(/mode/);
    expect(bad({ drops: [] })).toThrow(/drops/);
    expect(bad({ drops: [0.1, "x", 0.2] })).toThrow(/drops/);
    expect(bad({ labels: ["1", "2"] })).toThrow(/labels has 2 entries, drops 3/);
    expect(bad({ labels: "123" })).toThrow(/labels/);
    expect(bad({ parts: ["block"] })).toThrow(/parts has 1/);
    expect(bad({ target_id: -3 })).toThrow(/target_id/);
    expect(bad({ clean: "0.5" })).toThrow(/clean/);
    expect(bad({ target_name: 3 })).toThrow(/target_name/);
  });

  it("the trait is read against the result: by its result_id, then its form; never throws", () => {
    expect(readAblationTrait({}, FIT)).toEqual({ ablation: null, error: null, stale: false });
    expect(readAblationTrait(GOOD, FIT).ablation?.position).toBe(1);
    // a check of another result (by its id; none counts as ""): not shown, not an error
    expect(readAblationTrait({ ...GOOD, result_id: "r0" }, FIT)).toEqual({ ablation: null, error: null, stale: true });
    expect(readAblationTrait({ ...GOOD, result_id: undefined }, FIT).stale).toBe(true);
    expect(readAblationTrait({ ...GOOD, result_id: undefined }, { ...FIT, id: "" }).ablation?.position).toBe(1);
    // a check of this result that is not of the documented form is reported
    expect(readAblationTrait({ ...GOOD, result_id: 3 }, FIT).error).toMatch(/result_id must be a string/);
    expect(readAblationTrait({ ...GOOD, drops: "no" }, FIT).error).toMatch(/^Could not read the ablation drops: .*drops/);
    expect(readAblationTrait({ error: "no IGLens", result_id: "r1" }, FIT).error).toMatch(/^Could not read the ablation drops: .*position/);
    expect(readAblationTrait([1], FIT).error).toMatch(/must be an object/);
    // … and so is one that does not fit the result it names
    expect(readAblationTrait({ ...GOOD, position: 4 }, FIT).error).toMatch(/does not fit the result: position 4/);
    expect(readAblationTrait({ ...GOOD, drops: [1, 2], labels: ["1", "2"], parts: null }, FIT).error).toMatch(/2 drops/);
    expect(readAblationTrait({ ...GOOD, labels: ["1", "2", "3.mlp"] }, FIT).error).toMatch(/segment 2/);
    expect(readAblationTrait({ ...GOOD, target_id: 9 }, FIT).error).toMatch(/target id 9/);
    const a = /** @type {import("./ablation.js").Ablation} */ (decodeAblation(GOOD));
    expect(ablationMismatch(a, { ...FIT, segmentLabels: ["1", "2–3", "3"] })).toMatch(/segment 1 is "2"/);
    expect(ablationMismatch(a, FIT)).toBeNull();
  });
});

describe("the caption's numbers", () => {
  it("ranks ties by their average rank", () => {
    expect(ranks([10, 30, 20, 30])).toEqual([1, 3.5, 2, 3.5]);
  });

  it("Spearman's ρ: hand-computed values, ties, skipped non-finite pairs", () => {
    expect(spearman([1, 2, 3, 4], [10, 20, 30, 40])).toBeCloseTo(1, 15);
    expect(spearman([1, 2, 3, 4], [0.4, 0.3, 0.2, -5])).toBeCloseTo(-1, 15);
    // ranks of b: [1, 2, 3.5, 5, 3.5]; Σdxdy = 8, Σdx² = 10, Σdy² = 9.5
    expect(spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])).toBeCloseTo(8 / Math.sqrt(95), 14);
    // a NaN pair is left out: the same as the 4 finite pairs
    expect(spearman([1, NaN, 2, 3, 4], [1, 9, 2, 4, 3])).toBeCloseTo(spearman([1, 2, 3, 4], [1, 2, 4, 3]), 15);
    expect(spearman([1, 2, 3, 4], [1, 2, 4, 3])).toBeCloseTo(0.8, 14); // 1 − 6·2/(4·15)
    expect(spearman([1, 2, 3], [5, 5, 5])).toBeNaN();
    expect(spearman([1], [2])).toBeNaN();
    expect(rhoText(0.8)).toBe("+0.80");
    expect(rhoText(-0.125)).toBe("\u22120.13");
    expect(rhoText(NaN)).toBe("n/a");
  });

  it("agree / disagree from the largest signed values", () => {
    expect(argmax([0.1, NaN, 0.3, 0.3])).toBe(2);
    expect(argmax([NaN, NaN])).toBe(-1);
    const agree = compareAblation([0.1, 0.5, -0.2], [0.0, 0.9, 0.3]);
    expect(agree).toMatchObject({ topContribution: 1, topDrop: 1, agree: true, n: 3 });
    expect(agree.rho).toBeCloseTo(0.5, 14);
    const disagree = compareAblation([0.1, 0.5, -0.2], [0.8, 0.1, 0.3]);
    expect(disagree).toMatchObject({ topContribution: 1, topDrop: 0, agree: false });
    // the largest |value| is not the largest value: a big negative drop does not count
    expect(compareAblation([0.1, 0.5, -0.2], [0.1, 0.2, -0.9]).topDrop).toBe(1);
    expect(compareAblation([0.1, 0.2], [NaN, NaN])).toMatchObject({ topDrop: -1, agree: false, n: 0 });
  });
});

describe("the sentence that says what the check's outcome means", () => {
  it("agreement, disagreement and nothing to compare, in the unit ablated", () => {
    // contributions peak at segment 1; drops peak at 1 (agree) or 0 (disagree)
    const agree = agreementSentence(compareAblation([0.1, 0.5, -0.2], [0.2, 0.9, 0.1]), "sub-layer");
    expect(agree).toContain("where removing a sub-layer hurts it most");
    expect(agree).toContain("here they agree");
    const disagree = agreementSentence(compareAblation([0.1, 0.5, -0.2], [0.8, 0.1, 0.3]));
    expect(disagree).toContain("where removing a block hurts it most");
    expect(disagree).toContain("here they disagree, which is not an error");
    expect(disagree).toContain("readable in the lens is not the same as computed there");
    expect(agreementSentence(compareAblation([NaN, NaN], [0.1, 0.2]))).toBe(READABLE_NOT_COMPUTED);
  });
});

describe("the causal check in the detail panel", () => {
  it("an interactive widget has a keyboard-reachable button that sends the ablation command", () => {
    const { el, model } = mountWidget({ T: 5, nBlocks: 6, selected: 2, interactive: true });
    const b = button(el);
    expect(b).not.toBeNull();
    expect(b.tagName).toBe("BUTTON");
    expect(b.type).toBe("button");
    expect(b.disabled).toBe(false);
    expect(b.tabIndex).toBe(0);
    expect(b.textContent).toBe("Causal check (ablate each block)");
    expect(b.closest("figure")?.querySelector("[aria-label='segment contributions']")).not.toBeNull(); // chart (a)'s figure
    expect(dropBars(el)).toEqual([]);
    fire(b, "click");
    const first = /** @type {Record<string, any>} */ (model.last("ablation"));
    expect(first).toEqual({
      kind: "ablation",
      id: expect.any(String),
      result_id: "r1",
      position: 2,
      positions: "target",
      counterfactual: null,
      contrast: null,
    });
    // until Python answers, the button is busy and a second click sends nothing
    expect(button(el).getAttribute("aria-busy")).toBe("true");
    fire(button(el), "click");
    expect(model.commands("ablation").length).toBe(1);
    model.answer(first);
    expect(button(el).hasAttribute("aria-busy")).toBe(false);
    fire(button(el), "click"); // the same token again still reaches Python, with a new id
    expect(model.commands("ablation").length).toBe(2);
    expect(model.last("ablation")?.id).not.toBe(first.id);
  });

  it("while Python ablates (running), the button says so, keeps the focus and ignores clicks", () => {
    const { el, model } = mountWidget({ T: 5, nBlocks: 6, selected: 2, interactive: true });
    button(el).focus();
    model.set("running", { id: "another-view-1", command: "ablation" });
    const b = button(el);
    expect(document.activeElement).toBe(b);
    expect(b.getAttribute("aria-disabled")).toBe("true");
    expect(b.getAttribute("aria-busy")).toBe("true");
    expect(q(el, ".iglens-ablation-status").textContent).toBe("ablating each block\u2026");
    fire(b, "click");
    expect(model.commands("ablation")).toEqual([]);
    model.set("running", {});
    expect(document.activeElement).toBe(button(el));
    expect(button(el).hasAttribute("aria-disabled")).toBe(false);
  });

  it("an interactive widget without a kernel: the button is off and says why; saved drops still show", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 2, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state, kernel: "silent" });
    expect(button(el).disabled).toBe(true);
    expect(q(el, ".iglens-ablation-status").textContent).toBe(CONNECTING_NOTE);
    fire(button(el), "click");
    expect(model.commands("ablation")).toEqual([]);
    const saved = mountWidget({ state: { ...state, ablation: trait(r, 2, Array.from(contributionRow(r, 2))) }, kernel: "standalone" });
    expect(button(saved.el)).toBeNull();
    expect(dropBars(saved.el).length).toBe(r.k);
    saved.model.set("selected", 1);
    expect(button(saved.el).disabled).toBe(true);
    expect(button(saved.el).title).toBe(NO_KERNEL_NOTE);
    expect(q(saved.el, ".iglens-ablation-status").textContent).toBe(`${NO_KERNEL_NOTE} \u00b7 this page carries the drops of position 2`);
  });

  it("draws the drops as a second series with data-segment and data-drop; legend; hover shows both", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 3, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    const c = Array.from(contributionRow(r, 3));
    const drops = c.map((v, j) => (j === 4 ? null : 0.5 * v + 0.01 * j));
    model.set("ablation", trait(r, 3, drops));
    const bars = dropBars(el);
    expect(q(el, "[data-series=ablation]").tagName.toLowerCase()).toBe("g");
    expect(bars.length).toBe(r.k - 1); // the null drop draws no bar
    bars.forEach((bar) => {
      const j = Number(bar.getAttribute("data-segment"));
      expect(bar.getAttribute("data-drop")).toBe(String(drops[j]));
      const title = bar.querySelector("title")?.textContent ?? "";
      expect(title).toContain(segmentText(r, j));
      expect(title).toContain(`contribution ${fmtSigned(c[j])}`);
      expect(title).toContain(`total effect ${fmtSigned(/** @type {number} */ (drops[j]))}`);
    });
    expect(bars.map((bar) => Number(bar.getAttribute("data-segment")))).toEqual([0, 1, 2, 3, 5]);
    // beside the IG-Lens bar of the same segment, the same width, on its right
    const ig = /** @type {SVGElement} */ (el.querySelector(".iglens-bar[data-segment='1']"));
    const drop1 = bars[1];
    expect(Number(drop1.getAttribute("x"))).toBeCloseTo(Number(ig.getAttribute("x")) + Number(ig.getAttribute("width")), 6);
    expect(drop1.getAttribute("width")).toBe(ig.getAttribute("width"));
    expect(q(el, ".iglens-ablation-legend").textContent).toContain("ablation drop (zero, at every position)");
    expect(q(el, ".iglens-ablation-legend").textContent).toContain("IG-Lens contribution");
    expect(el.querySelector("[data-series=direct]")).toBeNull(); // a check without direct effects
    // hover over chart (a): the segment's contribution and drop
    fire(q(el, "svg[aria-label='segment contributions']"), "mousemove", { clientX: 0, clientY: 10 });
    const readout = q(el, ".iglens-readout").textContent ?? "";
    expect(readout).toContain(segmentText(r, 0));
    expect(readout).toContain(`contribution ${fmtSigned(c[0])}`);
    expect(readout).toContain(`ablation drop ${fmtSigned(/** @type {number} */ (drops[0]))}`);
  });

  it("the caption's ρ and verdict come from the numbers: agree", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 1, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    const c = Array.from(contributionRow(r, 1));
    model.set(
      "ablation",
      trait(
        r,
        1,
        c.map((v) => 2 * v + 0.003),
      ),
    ); // same order: ρ = 1
    const cap = q(el, ".iglens-ablation-caption");
    const top = argmax(c);
    expect(cap.getAttribute("data-agree")).toBe("true");
    expect(Number(cap.getAttribute("data-rho"))).toBeCloseTo(1, 12);
    expect(q(cap, ".iglens-ablation-rho").textContent).toBe("total \u03c1 = +1.00");
    expect(cap.textContent).toContain(`over ${r.k} segments`);
    expect(q(cap, ".iglens-ablation-verdict").textContent).toBe(
      `The largest contribution is ${segmentText(r, top)}; the largest effect: total ${segmentText(r, top)}.`,
    );
    expect(cap.textContent).toContain("Unablated p(target) = 0.420");
    expect(q(el, ".iglens-ablation-status").textContent).toBe("computed in 0.25 s");
    // the sentence under it says what agreement means, in plain words
    const sentence = q(el, ".iglens-ablation-sentence");
    expect(sentence.getAttribute("data-agree")).toBe("true");
    expect(sentence.textContent).toMatch(/^The check compares where the probability becomes readable .* with where removing a block hurts it most/);
    expect(sentence.textContent).toContain("here they agree");
    expect(sentence.textContent).not.toContain("disagree");
  });

  it("the caption's ρ and verdict come from the numbers: disagree", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 1, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    const c = Array.from(contributionRow(r, 1));
    const top = argmax(c);
    // the drops rank the segments as the contributions do, except that the top one moves last
    const drops = c.map((v, j) => (j === top ? Math.min(...c) - 1 : v));
    model.set("ablation", trait(r, 1, drops));
    const cap = q(el, ".iglens-ablation-caption");
    const want = compareAblation(c, drops);
    expect(want.agree).toBe(false);
    expect(cap.getAttribute("data-agree")).toBe("false");
    expect(q(cap, ".iglens-ablation-rho").textContent).toBe(`total \u03c1 = ${rhoText(want.rho)}`);
    expect(q(cap, ".iglens-ablation-verdict").textContent).toBe(
      `The largest contribution is ${segmentText(r, top)}; the largest effect: total ${segmentText(r, want.topDrop)}.`,
    );
    // no bold verdict: a plain sentence under the chart says what the difference means
    expect(cap.textContent).not.toMatch(/disagree/);
    // a plain sentence under it: what the check compares, and that disagreeing is no error
    const sentence = q(el, ".iglens-ablation-sentence");
    expect(sentence.getAttribute("data-agree")).toBe("false");
    expect(sentence.textContent).toContain("where removing a block hurts it most (the largest drop)");
    expect(sentence.textContent).toContain("here they disagree, which is not an error");
    expect(sentence.textContent).toContain("readable in the lens is not the same as computed there");
  });

  it("drops of another position, another result's check and errors", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 1, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    model.set("ablation", trait(r, 3, Array.from(contributionRow(r, 3))));
    expect(dropBars(el)).toEqual([]); // shown for position 3 only
    model.set("selected", 3);
    expect(dropBars(el).length).toBe(r.k);
    // a check of another result (by its result_id): not shown, and no error
    model.set("ablation", trait(r, 3, Array.from(contributionRow(r, 3)), { result_id: "r0" }));
    expect(dropBars(el)).toEqual([]);
    expect(q(el, ".iglens-ablation-error")).toBeNull();
    // a check of this result that does not fit it is reported
    model.set("ablation", { ...trait(r, 3, Array.from(contributionRow(r, 3))), labels: r.segmentLabels.map((l) => `x${l}`) });
    expect(dropBars(el)).toEqual([]);
    expect(q(el, ".iglens-ablation-error").textContent).toMatch(/^Could not read the ablation drops: it does not fit the result/);
    model.set("ablation", {});
    // Python's error, for this position: the answer's envelope
    fire(button(el), "click");
    model.answer(/** @type {any} */ (model.last("ablation")), { error: { type: "InvalidRequestError", message: "position 3 has no target" } });
    expect(q(el, ".iglens-ablation-error").textContent).toBe("position 3 has no target");
    expect(q(el, ".iglens-ablation-error").getAttribute("role")).toBe("alert");
    model.set("selected", 1);
    expect(q(el, ".iglens-ablation-error")).toBeNull(); // about another position
  });

  it("a new result drops the old check (its id is not the new one's)", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 1, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    model.set("ablation", trait(r, 1, Array.from(contributionRow(r, 1))));
    expect(dropBars(el).length).toBe(r.k);
    model.set("result", makeState({ T: 5, nBlocks: 6, id: "r2" }).result);
    expect(dropBars(el)).toEqual([]);
    expect(q(el, ".iglens-ablation-error")).toBeNull();
    model.set("result", makeState({ T: 5, nBlocks: 6, every: 2, id: "r3" }).result);
    expect(button(el).textContent).toBe("Causal check (ablate each segment)");
  });

  it("sub-layer boundaries: ablate each sub-layer, bars at the halves", () => {
    const state = makeState({ T: 4, nBlocks: 3, sublayer: true, selected: 2, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    expect(button(el).textContent).toBe("Causal check (ablate each sub-layer)");
    model.set(
      "ablation",
      trait(
        r,
        2,
        Array.from(contributionRow(r, 2), (v) => -v),
      ),
    );
    expect(dropBars(el).length).toBe(6);
    expect(q(el, ".iglens-ablation-caption").textContent).toContain("each attention or MLP write, zero-ablated");
  });

  it("static page: the button is off with a hint, unless the page carries this token's drops", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 2, interactive: false, base64: true });
    const r = decoded(makeState({ T: 5, nBlocks: 6 }).result);
    const host = document.createElement("div");
    document.body.appendChild(host);
    const page = mount(host, state);
    expect(button(host).disabled).toBe(true);
    expect(button(host).title).toBe(ABLATE_HINT);
    expect(q(host, ".iglens-ablation-status").textContent).toBe(ABLATE_SHORT_HINT);
    expect(page.model.send).toBeUndefined(); // the in-page model cannot ask anybody
    fire(button(host), "click");
    page.destroy();
    // exported with the widget's check (plain JSON in the state)
    const withDrops = mount(host, { ...state, ablation: trait(r, 2, Array.from(contributionRow(r, 2))) });
    expect(button(host)).toBeNull();
    expect(dropBars(host).length).toBe(r.k);
    expect(q(host, ".iglens-ablation-caption")).not.toBeNull();
    // the exported page explains the outcome too: drops equal to the contributions agree
    expect(q(host, ".iglens-ablation-sentence").textContent).toContain("where removing a block hurts it most");
    expect(q(host, ".iglens-ablation-sentence").textContent).toContain("here they agree");
    withDrops.model.set("selected", 1);
    expect(button(host).disabled).toBe(true);
    expect(q(host, ".iglens-ablation-status").textContent).toBe(`${ABLATE_SHORT_HINT} \u00b7 this page carries the drops of position 2`);
    withDrops.destroy();
  });

  it("text from the trait is text, never markup", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 2, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    const evil = "<img src=x onerror=window.__pwned=1>";
    fire(button(el), "click");
    model.answer(/** @type {any} */ (model.last("ablation")), { error: { type: evil, message: `${evil} & </script>` } });
    expect(el.querySelector("img")).toBeNull();
    expect(q(el, ".iglens-ablation-error").textContent).toBe(`${evil} & </script>`);
    model.set("ablation", trait(r, 2, Array.from(contributionRow(r, 2)), { target_name: evil, mode: "<b>zero</b>" }));
    expect(el.querySelector("img, b")).toBeNull();
    expect(q(el, ".iglens-ablation-caption").textContent).toContain(`Effect on ${evil} at [2]`);
    expect(q(el, ".iglens-ablation-legend").textContent).toContain("ablation drop (<b>zero</b>,");
    expect(/** @type {any} */ (window).__pwned).toBeUndefined();
  });

  it("the in-page model defaults the new traits", () => {
    const model = createModel({});
    expect(model.get("ablation")).toEqual({});
    expect(model.get("running")).toEqual({});
    expect(model.get("ablation_request")).toBeUndefined();
    expect(model.get("ablation_busy")).toBeUndefined();
  });
});

describe("the causal check: direct effect, positions and counterfactual patching", () => {
  const PATCHING = {
    metric: "logit_diff",
    direction: "noising",
    positions: "target",
    prompt: "w3 w5 w8",
    tokens: ["w3", "w5", "w8"],
    contrast_id: 48,
    contrast: "w48",
    total: [0.9, null, 0.2],
    direct: [0.3, 0.1, 0.2],
    clean_metric: 5.5,
    corrupt_metric: -7.7,
    normalized: true,
    warnings: [],
  };

  it("decodes positions, direct and patching; malformed ones name the key", () => {
    const a = /** @type {import("./ablation.js").Ablation} */ (decodeAblation({ ...GOOD, positions: "target", direct: [0.2, 0.1, null], patching: PATCHING }));
    expect(a.positions).toBe("target");
    expect(Array.from(/** @type {Float64Array} */ (a.direct))).toEqual([0.2, 0.1, NaN]);
    const pt = /** @type {import("./ablation.js").Patching} */ (a.patching);
    expect(Array.from(pt.total)).toEqual([0.9, NaN, 0.2]);
    expect(Array.from(pt.direct)).toEqual([0.3, 0.1, 0.2]);
    expect(pt).toMatchObject({ tokens: ["w3", "w5", "w8"], contrast: "w48", contrastId: 48, cleanMetric: 5.5, corruptMetric: -7.7, normalized: true });
    // an older trait (no positions, direct, patching) still decodes
    const old = /** @type {import("./ablation.js").Ablation} */ (decodeAblation(GOOD));
    expect([old.positions, old.direct, old.patching]).toEqual([null, null, null]);
    expect(() => decodeAblation({ ...GOOD, positions: "some" })).toThrow(/positions/);
    expect(() => decodeAblation({ ...GOOD, direct: [1] })).toThrow(/direct has 1 entries, drops 3/);
    expect(() => decodeAblation({ ...GOOD, direct: "x" })).toThrow(/direct must be a list/);
    expect(() => decodeAblation({ ...GOOD, patching: { ...PATCHING, total: [1, 2] } })).toThrow(/patching.total has 2 entries/);
    expect(() => decodeAblation({ ...GOOD, patching: [1] })).toThrow(/patching must be an object/);
    expect(() => decodeAblation({ ...GOOD, patching: { ...PATCHING, tokens: [1] } })).toThrow(/patching.tokens/);
  });

  it("summarises every series against the contributions", () => {
    const a = /** @type {import("./ablation.js").Ablation} */ (
      decodeAblation({ ...GOOD, drops: [0.1, 0.3, -0.2], direct: [0.3, 0.2, 0.1], patching: PATCHING })
    );
    const sum = causalSummary([1, 2, 3], a);
    expect(sum.total.rho).toBeCloseTo(spearman([1, 2, 3], [0.1, 0.3, -0.2]), 12);
    expect(/** @type {any} */ (sum.direct).rho).toBeCloseTo(-1, 12);
    expect(/** @type {any} */ (sum.patchTotal).n).toBe(2);
    expect(/** @type {any} */ (sum.patchDirect).topDrop).toBe(0);
    const bare = causalSummary([1, 2, 3], /** @type {any} */ (decodeAblation(GOOD)));
    expect([bare.direct, bare.patchTotal, bare.patchDirect]).toEqual([null, null, null]);
  });

  it("the command's fields from the controls' choice", () => {
    expect(defaultChoice()).toEqual({ positions: "target", counterfactual: "", contrast: "" });
    expect(checkFields("r1", 2, defaultChoice())).toEqual({ result_id: "r1", position: 2, positions: "target", counterfactual: null, contrast: null });
    expect(checkFields("r1", 2, { positions: "all", counterfactual: "  ", contrast: "w4" })).toEqual({
      result_id: "r1",
      position: 2,
      positions: "all",
      counterfactual: null,
      contrast: null,
    });
    expect(checkFields("r1", 2, { positions: "target", counterfactual: "a b", contrast: " x" })).toMatchObject({ counterfactual: "a b", contrast: " x" });
    expect(checkFields("r1", 2, { positions: "target", counterfactual: "a b", contrast: "" }).contrast).toBeNull();
    expect(positionsText("target")).toBe("at the answer position");
    expect(positionsText("all")).toBe("at every position");
    expect(positionsText(null)).toBe("at every position");
  });

  it("the controls: answer position by default, all positions and a counterfactual prompt on request", () => {
    const { el, model } = mountWidget({ T: 5, nBlocks: 6, selected: 2, interactive: true });
    const radio = (/** @type {string} */ v) => /** @type {HTMLInputElement} */ (el.querySelector(`.iglens-detail [data-positions=${v}]`));
    expect(radio("target").checked).toBe(true);
    expect(radio("all").checked).toBe(false);
    expect(el.querySelector(".iglens-detail [role=radiogroup]")).not.toBeNull();
    radio("all").checked = true;
    fire(radio("all"), "change");
    const prompt = /** @type {HTMLInputElement} */ (el.querySelector(".iglens-detail .iglens-ablation-prompt"));
    const contrast = /** @type {HTMLInputElement} */ (el.querySelector(".iglens-detail .iglens-ablation-contrast"));
    prompt.value = "w1 w2 w9";
    fire(prompt, "input");
    contrast.value = "w9";
    fire(contrast, "input");
    fire(button(el), "click");
    expect(model.last("ablation")).toMatchObject({ result_id: "r1", position: 2, positions: "all", counterfactual: "w1 w2 w9", contrast: "w9" });
    // the choice survives the re-render of the answer
    model.answer(/** @type {any} */ (model.last("ablation")));
    expect(radio("all").checked).toBe(true);
    expect(/** @type {HTMLInputElement} */ (el.querySelector(".iglens-detail .iglens-ablation-prompt")).value).toBe("w1 w2 w9");
  });

  it("draws total and direct beside the contributions, and the patching chart with its numbers", () => {
    const state = makeState({ T: 5, nBlocks: 6, selected: 3, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    const c = Array.from(contributionRow(r, 3));
    const drops = c.map((v) => 0.5 * v);
    const direct = c.map((v, j) => (j === 2 ? null : 0.25 * v + 0.001));
    const total = c.map((_, j) => (j === 5 ? 1 : 0.1 * j));
    const pdirect = c.map((_, j) => 0.05 * j);
    model.set("ablation", trait(r, 3, drops, { positions: "target", direct, patching: { ...PATCHING, total, direct: pdirect } }));
    const read = (/** @type {string} */ series, /** @type {string} */ attr) =>
      [...el.querySelectorAll(`.iglens-detail [data-series=${series}] rect`)].map((b) => Number(b.getAttribute(attr)));
    expect(read("ablation", "data-drop")).toEqual(drops);
    expect(read("direct", "data-direct")).toEqual(direct.filter((v) => v !== null));
    expect(read("patching-total", "data-effect")).toEqual(total);
    expect(read("patching-direct", "data-effect")).toEqual(pdirect);
    // thirds of the slot: contribution, total, direct, left to right, all inside the slot
    const ig = /** @type {SVGElement} */ (el.querySelector(".iglens-bar[data-segment='1']"));
    const tot = /** @type {SVGElement} */ (el.querySelector("[data-series=ablation] rect[data-segment='1']"));
    const dir = /** @type {SVGElement} */ (el.querySelector("[data-series=direct] rect[data-segment='1']"));
    const x = (/** @type {SVGElement} */ e) => Number(e.getAttribute("x"));
    const w = (/** @type {SVGElement} */ e) => Number(e.getAttribute("width"));
    expect(x(tot)).toBeCloseTo(x(ig) + w(ig), 6);
    expect(x(dir)).toBeGreaterThanOrEqual(x(tot) + w(tot));
    expect(x(dir) + w(dir)).toBeLessThanOrEqual(x(tot) + 2 * w(tot) + 1e-9);
    expect(dir.getAttribute("fill")).toBe("none"); // hollow: legible on either theme
    const legend = q(el, ".iglens-ablation-legend").textContent;
    expect(legend).toContain("total effect: ablation drop (zero, at the answer position)");
    expect(legend).toContain("direct effect (later blocks frozen)");
    expect(legend).toContain("patching, total");
    const cap = q(el, ".iglens-ablation-caption");
    const rhos = [...cap.querySelectorAll(".iglens-ablation-rho")].map((e) => [e.getAttribute("data-series"), e.textContent]);
    const want = causalSummary(c, /** @type {any} */ (decodeAblation(trait(r, 3, drops, { direct, patching: { ...PATCHING, total, direct: pdirect } }))));
    expect(rhos).toEqual([
      ["ablation", `total \u03c1 = ${rhoText(want.total.rho)}`],
      ["direct", `direct \u03c1 = ${rhoText(/** @type {any} */ (want.direct).rho)}`],
      ["patching-total", `patching total \u03c1 = ${rhoText(/** @type {any} */ (want.patchTotal).rho)}`],
      ["patching-direct", `patching direct \u03c1 = ${rhoText(/** @type {any} */ (want.patchDirect).rho)}`],
    ]);
    expect(cap.textContent).toContain("zero-ablated at the answer position");
    expect(q(el, ".iglens-ablation-patching-caption").textContent).toContain('["w3" "w5" "w8"]');
    expect(q(el, ".iglens-ablation-patching-caption").textContent).toContain('logit(target) \u2212 logit("w48")');
    const agrees = argmax(c) === argmax(drops);
    expect(q(el, ".iglens-ablation-sentence").textContent).toContain(agrees ? "here they agree" : "here they disagree, which is not an error");
    // a check without a counterfactual draws no patching chart
    model.set("ablation", trait(r, 3, drops, { positions: "all", direct }));
    expect(el.querySelector(".iglens-patching-chart")).toBeNull();
    expect(q(el, ".iglens-ablation-legend").textContent).toContain("at every position");
  });
});
