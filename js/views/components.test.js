// @vitest-environment jsdom
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeResult, makeState, componentsTrait } from "../testing/fixture.js";
import { decodeResult, contribution, segmentText } from "../model/result.js";
import { decodeComponents, segmentMatrix, cellName, shortName } from "../model/component-split.js";
import { divergingScale } from "../lib/colorscale.js";
import { fmtSigned } from "../lib/format.js";
import { formatToken } from "../lib/tokens.js";
import { NO_SPLIT_HINT } from "./components.js";
import { NO_KERNEL_NOTE, CONNECTING_NOTE } from "./kernel.js";
import { NAN_COLOR } from "../lib/palette.js";
import { render } from "./app.js";
import { createModel, mount } from "../standalone.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
const section = (/** @type {Element} */ el) => q(el, ".iglens-detail .iglens-components");
const shownSegment = (/** @type {Element} */ el) => Number(section(el).getAttribute("data-segment"));
const cells = (/** @type {Element} */ el) => /** @type {HTMLElement[]} */ ([...el.querySelectorAll("[data-view=components] [data-component]")]);
const tokens = (/** @type {Element} */ el) => /** @type {HTMLElement[]} */ ([...el.querySelectorAll("[data-token-index]")]);
/** @param {any} raw */
const decoded = (raw) => /** @type {import("../model/result.js").Result} */ (decodeResult(raw));
/** "rgb(r, g, b)", as the DOM writes a colour back. @param {number[]} c */
const rgb = (c) => `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
/** @param {string} hex */
const hexRgb = (hex) => rgb([1, 3, 5].map((o) => parseInt(hex.slice(o, o + 2), 16)));

/**
 * The rendered matrix against the split: one cell per (block, component) of segment j,
 * data attributes, value text and colour (the heatmap's scale and limit; NaN grey).
 * @param {HTMLElement} el @param {import("../model/result.js").Result} r
 * @param {import("../model/component-split.js").Shares} shares @param {number} j @param {"light"|"dark"} [theme]
 */
function expectMatrix(el, r, shares, j, theme = "light") {
  const M = segmentMatrix(shares, j);
  const root = q(el, "[data-view=components]");
  expect(root).not.toBeNull();
  expect(root.getAttribute("data-segment")).toBe(String(j));
  const want = M.cells.flat().filter(Boolean);
  const got = cells(el);
  expect(got.length).toBe(want.length);
  const scale = divergingScale(r.contribLimit, theme);
  want.forEach((cell, n) => {
    const td = got[n];
    const c = /** @type {import("../model/component-split.js").MatrixCell} */ (cell);
    expect(td.dataset.block).toBe(String(c.block));
    expect(td.dataset.component).toBe(c.name);
    expect(td.dataset.share).toBe(String(c.value));
    if (Number.isFinite(c.value)) {
      expect(Math.fround(Number(td.dataset.share))).toBe(c.value);
      expect(td.style.backgroundColor).toBe(rgb(/** @type {number[]} */ (scale.rgb(c.value))));
      expect(td.title).toContain(fmtSigned(c.value));
      expect(td.getAttribute("aria-label")).toBe(`${cellName(c)} (${c.name}): ${fmtSigned(c.value)}`);
    } else {
      expect(td.dataset.share).toBe("NaN");
      expect(td.classList.contains("iglens-comp-nan")).toBe(true);
      expect(td.style.backgroundColor).toBe(hexRgb(NAN_COLOR[theme]));
      expect(td.title).toContain("not applicable");
    }
  });
  const heads = [...root.querySelectorAll("thead th")].map((th) => th.textContent);
  expect(heads).toEqual(["block", ...M.colNames.map(shortName)]);
  const rows = [...root.querySelectorAll("tbody th")].map((th) => th.textContent);
  expect(rows).toEqual(M.blocks.map((b) => `L${b}`));
  return M;
}

describe("heads section: the block × component shares of one segment", () => {
  it("shows the onset segment by default, with the heatmap's colours, the top 3 and the sum check", () => {
    const state = makeState({ T: 5, nBlocks: 6, every: 2, components: { heads: 3 }, selected: 2, interactive: false });
    const r = decoded(state.result);
    const { el } = mountWidget({ state });
    const j = r.onset[2];
    expect(shownSegment(el)).toBe(j);
    const head = q(el, ".iglens-components-title").textContent ?? "";
    expect(head).toContain(segmentText(r, j));
    expect(head).toContain("(onset)");
    const shares = /** @type {import("../model/component-split.js").Shares} */ (r.components?.sharesAt(2));
    const M = expectMatrix(el, r, shares, j);
    expect(M.blocks.length).toBe(2); // every:2: two blocks per segment
    // caption: the three largest |share|, signed
    const top = M.ranked
      .slice(0, 3)
      .map((c) => `${cellName(c)} ${fmtSigned(c.value)}`)
      .join(", ");
    expect(q(el, ".iglens-components-top").textContent).toBe(top);
    expect(top).toMatch(/^L\d+\.(h\d|mlp|rest) [+−]\d\.\d{4}/);
    // the sum note: Σ shares against the segment's contribution
    const note = q(el, ".iglens-components-sum");
    expect(note.textContent).toContain(`\u03a3 shares = ${fmtSigned(M.sum)}, contribution of ${segmentText(r, j)} = ${fmtSigned(contribution(r, 2, j))}`);
    expect(fmtSigned(M.sum)).toBe(fmtSigned(contribution(r, 2, j)));
    expect(note.classList.contains("iglens-ok")).toBe(true);
  });

  it("NaN shares are neutral grey; the select picks any segment", () => {
    const state = makeState({ T: 5, nBlocks: 6, every: 2, components: { heads: 3 }, selected: 2, interactive: false });
    const r = decoded(state.result);
    const { el } = mountWidget({ state });
    const select = /** @type {HTMLSelectElement} */ (q(el, "select[name=component_segment]"));
    expect([...select.options].map((o) => o.textContent?.replace(" (onset)", ""))).toEqual(r.segmentLabels);
    select.value = "0";
    fire(select, "change");
    expect(shownSegment(el)).toBe(0);
    expectMatrix(el, r, /** @type {any} */ (r.components?.sharesAt(2)), 0);
    const rest = /** @type {HTMLElement} */ (el.querySelector("[data-block='1'][data-component='rest']"));
    expect(rest.dataset.share).toBe("NaN");
    expect(rest.style.backgroundColor).toBe(hexRgb(NAN_COLOR.light));
    expect(/** @type {HTMLSelectElement} */ (q(el, "select[name=component_segment]")).value).toBe("0");
  });

  it("choosing with the keyboard keeps the focus on the select", () => {
    const { el, model } = mountWidget({ T: 4, nBlocks: 4, sublayer: true, components: true, selected: 1, interactive: false });
    const select = /** @type {HTMLSelectElement} */ (q(el, "select[name=component_segment]"));
    select.focus();
    select.value = "3";
    fire(select, "change");
    const now = /** @type {HTMLSelectElement} */ (q(el, "select[name=component_segment]"));
    expect(now).not.toBe(select); // the section was rebuilt …
    expect(document.activeElement).toBe(now); // … and the focus moved with it
    expect(now.value).toBe("3");
    fire(now, "keydown", { key: "Escape" }); // the select's keys stay in the select
    expect(model.get("selected")).toBe(1);
    expect(q(el, ".iglens-components-scroll").getAttribute("tabindex")).toBe("0");
  });

  it("uses the dark variant of the same scale on a dark page", () => {
    const state = makeState({ T: 4, nBlocks: 4, sublayer: true, components: { heads: 2 }, selected: 1, interactive: false });
    const r = decoded(state.result);
    const el = document.createElement("div");
    el.setAttribute("data-iglens-theme", "dark");
    document.body.appendChild(el);
    render({ model: createModel(state), el });
    expectMatrix(el, r, /** @type {any} */ (r.components?.sharesAt(1)), r.onset[1], "dark");
  });

  it("a sub-layer segment holds one half: the heads and rest of an attention, or the MLP alone", () => {
    const state = makeState({ T: 4, nBlocks: 4, sublayer: true, components: { heads: 2 }, selected: 0, interactive: false });
    const r = decoded(state.result);
    const { el } = mountWidget({ state });
    const select = /** @type {HTMLSelectElement} */ (q(el, "select[name=component_segment]"));
    select.value = "4"; // 3.attn
    fire(select, "change");
    expect(q(el, ".iglens-components-segment").textContent).toBe("block 3.attn");
    expect(cells(el).map((c) => c.dataset.component)).toEqual(["head:0", "head:1", "rest"]);
    expect(cells(el).every((c) => c.dataset.block === "3")).toBe(true);
    const again = /** @type {HTMLSelectElement} */ (q(el, "select[name=component_segment]"));
    again.value = "5"; // 3.mlp
    fire(again, "change");
    expect(cells(el).map((c) => c.dataset.component)).toEqual(["mlp"]);
    const mlp = cells(el)[0];
    expect(Number(mlp.dataset.share)).toBeCloseTo(contribution(r, 0, 5), 6);
    expect(mlp.textContent).toBe(fmtSigned(Number(mlp.dataset.share))); // few columns: the value is written in the cell
  });

  it("the note says so when the shares do not add up to the contribution", () => {
    const raw = makeResult({ T: 4, nBlocks: 4, every: 2 });
    const trait = componentsTrait(raw, { heads: 2, positions: [1] });
    const data = /** @type {Float32Array} */ (decodeComponents(trait)?.shares);
    for (let n = 0; n < data.length; n++) data[n] *= 2; // (the payload's own bytes)
    const { el } = mountWidget({ state: { ...makeState(), result: raw, selected: 1, interactive: true, components: trait } });
    const note = q(el, ".iglens-components-sum");
    expect(note.classList.contains("iglens-warn")).toBe(true);
    expect(note.textContent).toContain("do not add up");
  });
});

describe("picking the segment", () => {
  /** clientX of the middle of segment j on chart (a) (jsdom: no layout, width 478). */
  const barX = (/** @type {import("../model/result.js").Result} */ r, /** @type {number} */ j) => {
    const b = r.boundaries;
    const W = 478;
    const lo = b[0] - 0.6,
      hi = b[r.k] + 0.6;
    return 48 + (((b[j] + b[j + 1]) / 2 - lo) / (hi - lo)) * (W - 14 - 48);
  };

  it("by a bar of the detail chart, by a heatmap cell of the row; a new token starts at its onset", () => {
    const state = makeState({ T: 5, nBlocks: 6, sublayer: true, components: { heads: 2 }, selected: 1, interactive: false });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    expect(shownSegment(el)).toBe(r.onset[1]);
    const j = (r.onset[1] + 3) % r.k;
    fire(q(el, ".iglens-detail svg.iglens-chart"), "click", { clientX: barX(r, j) });
    expect(shownSegment(el)).toBe(j);
    expect(q(el, ".iglens-components-segment").textContent).toBe(segmentText(r, j));
    expect(q(el, `.iglens-bar[data-segment='${j}']`).classList.contains("iglens-bar-focus")).toBe(true);
    expect(el.querySelectorAll(".iglens-bar-focus").length).toBe(1);
    expectMatrix(el, r, /** @type {any} */ (r.components?.sharesAt(1)), j);
    expect(model.get("selected")).toBe(1); // a local choice: no trait changes

    // a heatmap cell: selects its row and shows its segment
    const canvas = q(el, "canvas.iglens-heatmap-canvas");
    const labelW = Math.round(Math.min(200, Math.max(96, 0.3 * 640)));
    const colW = Math.floor((640 - labelW - 8) / r.k);
    const j2 = (r.onset[3] + 5) % r.k;
    fire(canvas, "mousemove", { clientX: labelW + j2 * colW + 3, clientY: 24 + 3 * 20 + 5 });
    fire(canvas, "click", { clientX: labelW + j2 * colW + 3, clientY: 24 + 3 * 20 + 5 });
    expect(model.get("selected")).toBe(3);
    expect(q(el, ".iglens-detail").getAttribute("data-selected-index")).toBe("3");
    expect(shownSegment(el)).toBe(j2);
    expectMatrix(el, r, /** @type {any} */ (r.components?.sharesAt(3)), j2);
    // another cell of the same row
    fire(canvas, "click", { clientX: labelW + 1 * colW + 3, clientY: 24 + 3 * 20 + 5 });
    expect(shownSegment(el)).toBe(1);
    fire(canvas, "mouseleave");

    // a new token: back to its onset; coming back does not restore the old pick
    fire(tokens(el)[4], "click");
    expect(shownSegment(el)).toBe(r.onset[4]);
    fire(tokens(el)[3], "click");
    expect(shownSegment(el)).toBe(r.onset[3]);
    // a new result too
    fire(q(el, ".iglens-detail svg.iglens-chart"), "click", { clientX: barX(r, 0) });
    expect(shownSegment(el)).toBe(0);
    model.set("result", makeResult({ T: 5, nBlocks: 6, sublayer: true, components: { heads: 2 }, seed: 5 }));
    expect(shownSegment(el)).toBe(decoded(model.get("result")).onset[3]);
  });
});

describe("where the shares come from", () => {
  it("interactive: the page asks for the selected token's split; computing… until the trait brings it; a preview asks for a click", () => {
    const state = makeState({ T: 5, nBlocks: 4, sublayer: true, selected: 2, interactive: true });
    const r = decoded(state.result);
    const { el, model } = mountWidget({ state });
    expect(model.commands("components")).toEqual([{ kind: "components", id: expect.any(String), result_id: "r1", position: 2 }]);
    expect(q(el, "[data-view=components]")).toBeNull();
    expect(q(el, ".iglens-components-status").textContent).toBe("computing\u2026");
    expect(q(el, ".iglens-components-status").getAttribute("role")).toBe("status");
    fire(tokens(el)[4], "mouseover");
    expect(q(el, ".iglens-components-status").textContent).toBe("Click the token to compute its head shares.");
    fire(q(el, ".iglens-strip"), "mouseleave");
    expect(model.commands("components").length).toBe(1); // a preview asks nothing
    const trait = componentsTrait(state.result, { heads: 2, positions: [2], requestId: model.last("components")?.id });
    model.set("components", trait);
    model.answer(/** @type {any} */ (model.last("components")));
    expectMatrix(el, r, /** @type {any} */ (decodeComponents(trait)?.sharesAt(2)), r.onset[2]);
    expect(model.commands("components").length).toBe(1);
    fire(tokens(el)[3], "click");
    expect(model.last("components")).toMatchObject({ result_id: "r1", position: 3 });
    expect(q(el, ".iglens-components-status").textContent).toBe("computing\u2026");
    // a trait of this result that is not of the documented form is reported
    model.set("components", { names: ["attn", "mlp"], segments: null, result_id: "r1" });
    expect(q(el, ".iglens-components-status").textContent).toMatch(/^Could not read the head shares: the components trait\.segments/);
    model.set("components", {});
    // Python's error: the answer's envelope, for this token
    model.answer(/** @type {any} */ (model.last("components")), {
      error: { type: "IGLensError", message: "gpt2: the attention write is not linear in its heads" },
    });
    expect(q(el, ".iglens-components-status").textContent).toBe("gpt2: the attention write is not linear in its heads");
    model.set("interactive", false);
    fire(tokens(el)[1], "click");
    expect(q(el, ".iglens-components-status").textContent).toBe(NO_SPLIT_HINT);
    expect(model.last("components")?.position).toBe(3); // not interactive: nothing asked
  });

  it("an answer to a superseded request is dropped; without a kernel the page asks nothing and says why", () => {
    const state = makeState({ T: 5, nBlocks: 4, sublayer: true, selected: 2, interactive: true });
    const { el, model } = mountWidget({ state });
    const first = /** @type {any} */ (model.last("components"));
    fire(tokens(el)[3], "click"); // supersedes the request for 2
    model.answer(first, { error: { type: "IGLensError", message: "too late" } });
    expect(q(el, ".iglens-components-status").textContent).toBe("computing\u2026");
    fire(tokens(el)[2], "click");
    expect(q(el, ".iglens-components-status").textContent).toBe("computing\u2026"); // asked again, not the dropped error
    expect(model.commands("components").map((m) => m.position)).toEqual([2, 3, 2]);

    const silent = mountWidget({ state, kernel: "silent" });
    expect(silent.model.commands("components")).toEqual([]);
    expect(q(silent.el, ".iglens-components-status").textContent).toBe(CONNECTING_NOTE);
    const none = mountWidget({ state, kernel: "standalone" });
    expect(q(none.el, ".iglens-components-status").textContent).toBe(NO_KERNEL_NOTE);
  });

  it("a static page: the result's split, the trait absent; without a split, the hint", () => {
    const state = makeState({ T: 5, nBlocks: 6, every: 3, components: { heads: 2 }, base64: true, selected: 1, interactive: false });
    // @ts-ignore: an exported page may carry no components trait at all
    delete state.components;
    const el = document.body.appendChild(document.createElement("div"));
    const { model } = mount(el, state);
    expect(model.get("components")).toEqual({});
    const r = decoded(model.get("result"));
    expectMatrix(el, r, /** @type {any} */ (r.components?.sharesAt(1)), r.onset[1]);

    const bare = document.body.appendChild(document.createElement("div"));
    mount(bare, makeState({ T: 5, nBlocks: 6, base64: true, selected: 1, interactive: false }));
    expect(q(bare, ".iglens-components-status").textContent).toBe("attribute with components=True to see head shares");
    expect(q(bare, "[data-view=components]")).toBeNull();

    const some = document.body.appendChild(document.createElement("div"));
    mount(some, makeState({ T: 5, nBlocks: 6, components: { positions: [0, 4] }, selected: 1, interactive: false }));
    expect(q(some, ".iglens-components-status").textContent).toBe("No head shares for position 1 (computed for 0, 4).");
  });

  it("the trait wins for its positions; the result's split serves the others; a stale trait is ignored", () => {
    const result = makeResult({ T: 5, nBlocks: 4, sublayer: true, components: { heads: 2 } });
    const r = decoded(result);
    const trait = componentsTrait(result, { heads: 2, positions: [2], seed: 99 });
    const fromTrait = /** @type {any} */ (decodeComponents(trait)?.sharesAt(2));
    const fromResult = /** @type {any} */ (r.components?.sharesAt(2));
    expect(Array.from(fromTrait.shares)).not.toEqual(Array.from(fromResult.shares));
    const { el, model } = mountWidget({ state: { ...makeState(), result, components: trait, selected: 2, interactive: true } });
    expectMatrix(el, r, fromTrait, r.onset[2]);
    model.set("selected", 1);
    expectMatrix(el, r, r.components?.sharesAt(1), r.onset[1]);
    // a split of another result (by its result_id): not shown
    model.set("components", componentsTrait(makeResult({ T: 5, nBlocks: 4, every: 2, id: "r0" }), { heads: 2, positions: [2] }));
    model.set("selected", 2);
    expectMatrix(el, r, fromResult, r.onset[2]);
  });

  it("a malformed result.components is reported in the section; the rest of the view stands", () => {
    const result = makeResult({ T: 4, nBlocks: 4, components: true });
    result.components = { ...result.components, names: ["head:0"] };
    const { el } = mountWidget({ state: { ...makeState(), result, selected: 1, interactive: false } });
    expect(q(el, ".iglens-notice").hidden).toBe(true);
    expect(el.querySelectorAll(".iglens-bar").length).toBe(4);
    expect(q(el, ".iglens-components-status").textContent).toMatch(/result\.components\.segments must have shape \(n, C=1\)/);
  });
});

describe("untrusted text in the heads section", () => {
  const EVIL = "<img src=x onerror=alert(1)>";
  it("token, target, lens name and component names stay text", () => {
    const toks = [" a", EVIL, " c", "<script>alert(2)</script>"];
    const result = makeResult({ T: 4, nBlocks: 3, tokens: toks, components: { heads: 2 } });
    result.target_tokens = result.target_tokens.map(() => EVIL);
    result.target_name = EVIL;
    result.components.names = [EVIL, "<b onmouseover=alert(3)>h</b>", "mlp", "rest"];
    const { el } = mountWidget({ state: { ...makeState(), result, selected: 1, interactive: false } });
    expect(document.querySelectorAll("img, script, b, iframe, object").length).toBe(0);
    expect(el.querySelectorAll("[onerror], [onmouseover]").length).toBe(0);
    const caption = q(el, ".iglens-components-caption").textContent ?? "";
    expect(caption).toContain(`contribution to ${EVIL} at [1] ${formatToken(EVIL, { maxLen: 16 })}`);
    expect(caption).toContain(formatToken(EVIL, { maxLen: 16 }));
    const top = q(el, ".iglens-components-top").textContent ?? "";
    expect(top).toMatch(/^L\d\./);
    const heads = [...el.querySelectorAll("[data-view=components] thead th")].map((th) => th.textContent);
    expect(heads).toContain(EVIL);
    expect(heads).toContain("<b onmouseover=alert(3)>h</b>");
    expect(/** @type {HTMLElement} */ (el.querySelector("[data-view=components] [data-block]")).dataset.component).toBe(EVIL);
  });
});
