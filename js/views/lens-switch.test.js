// @vitest-environment jsdom
// The widget under a fitted lens (issue 20): the lens select (prefilled, sent in the
// recompute command, off without a kernel), the header's and the exported titles' `lens:`
// fact (only for a lens that is not the logit lens), the captions naming the lens, the heads
// matrix's `coordinate` column, and a hostile lens name shown as text.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeResult, makeState } from "../testing/fixture.js";
import { decodeResult, contribution } from "../model/result.js";
import { segmentMatrix, decodeComponents } from "../model/component-split.js";
import { detailHeading } from "../figures/detail.js";
import { gridFigure } from "../figures/grid.js";
import { heatmapFigure } from "../figures/heatmap.js";
import { svgPainter } from "../figures/painters.js";
import { titleLines } from "../figures/titles.js";
import { formatToken } from "../lib/tokens.js";
import { LENS_OPTIONS, firstFitNote, fitStatus, lensFact, lensPhrase } from "../model/lens-name.js";
import { makeRequest } from "./controls.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
const lensSelect = (/** @type {Element} */ el) => /** @type {HTMLSelectElement} */ (el.querySelector(".iglens-controls select[name=lens]"));
const metaParts = (/** @type {Element} */ el) =>
  [...el.querySelectorAll(".iglens-meta .iglens-meta-part")].map((p) => (p.textContent ?? "").replace(/^ \u00b7 /, ""));
/** @param {any} raw */
const decoded = (raw) => /** @type {import("../model/result.js").Result} */ (decodeResult(raw));
const EVIL = "<img src=x onerror=alert(1)>\u202eevil";

describe("the lens select", () => {
  it("offers the logit lens and the three fitted kinds, with a tooltip on fitting and caching", () => {
    const { el } = mountWidget({ T: 4, nBlocks: 6 });
    const sel = lensSelect(el);
    expect(sel).not.toBeNull();
    expect([...sel.options].map((o) => [o.value, o.textContent])).toEqual([
      ["logit", "logit lens (raw)"],
      ["shortcut", "linear shortcut (fitted)"],
      ["tuned", "tuned lens (fitted)"],
      ["jacobian", "Jacobian lens (fitted)"],
    ]);
    expect(LENS_OPTIONS.length).toBe(4);
    expect(sel.title).toMatch(/fitted once/);
    expect(sel.title).toMatch(/cached/);
    expect(sel.title).toMatch(/first use takes a while/);
    // a payload without `lens` (before lenses): the logit lens
    expect(sel.value).toBe("logit");
  });

  it("is prefilled from result.lens and sent in the recompute command", () => {
    const { el, model } = mountWidget({ T: 4, nBlocks: 6, lens: "shortcut" });
    const sel = lensSelect(el);
    expect(sel.value).toBe("shortcut");
    fire(q(el, ".iglens-apply"), "click");
    expect(model.last("recompute")?.controls.lens).toBe("shortcut"); // unchanged: the same lens, kept
    model.answer(/** @type {any} */ (model.last("recompute")));
    sel.value = "tuned";
    fire(q(el, ".iglens-apply"), "click");
    const sent = /** @type {Record<string, any>} */ (model.last("recompute"));
    expect(sent.controls).toEqual({ target: "predicted", contrast: "", boundaries: "all", estimator: "prediction_aware", steps: 1, lens: "tuned" });
    // while it runs, the status says a fitted lens's first use fits it
    expect(q(el, ".iglens-controls .iglens-status").textContent).toMatch(/tuned lens is fitted on its first use, then cached/);
    model.answer(sent);
    // back to the raw logit lens
    sel.value = "logit";
    fire(q(el, ".iglens-apply"), "click");
    expect(model.last("recompute")?.controls.lens).toBe("logit");
  });

  it("a new result re-prefills it; a saved lens gets its own option, sent back as Python named it", () => {
    const { el, model } = mountWidget({ T: 4, nBlocks: 6 });
    expect(lensSelect(el).value).toBe("logit");
    model.set("result", makeResult({ T: 4, nBlocks: 6, id: "r2", lens: "jacobian" }));
    expect(lensSelect(el).value).toBe("jacobian");
    // a saved lens: its name in the payload, its path in controls.lens (what keeps it)
    model.set("result", makeResult({ T: 4, nBlocks: 6, id: "r3", lens: "my-lens", controlsLens: "/tmp/lenses/my-lens.safetensors" }));
    const sel = lensSelect(el);
    expect(sel.options.length).toBe(5);
    const own = sel.options[4];
    expect(own.value).toBe("/tmp/lenses/my-lens.safetensors");
    expect(own.textContent).toBe("my-lens (this result's lens)");
    expect(sel.value).toBe("/tmp/lenses/my-lens.safetensors");
    fire(q(el, ".iglens-apply"), "click");
    expect(model.last("recompute")?.controls.lens).toBe("/tmp/lenses/my-lens.safetensors");
    // the next result under a built-in lens drops the extra option
    model.answer(/** @type {any} */ (model.last("recompute")));
    model.set("result", makeResult({ T: 4, nBlocks: 6, id: "r4", lens: "logit" }));
    expect(lensSelect(el).options.length).toBe(4);
    expect(lensSelect(el).value).toBe("logit");
  });

  it("is disabled with the rest of the controls when no kernel answers", () => {
    const { el } = mountWidget({ T: 4, nBlocks: 6, lens: "shortcut", kernel: "silent" });
    expect(lensSelect(el).disabled).toBe(true);
    expect(/** @type {HTMLInputElement} */ (q(el, ".iglens-controls [name=target]")).disabled).toBe(true);
  });

  it("makeRequest sends the lens ('' is the logit lens) and leaves it out when not given", () => {
    const v = { target: "", contrast: "", boundaries: "all", custom: "", estimator: "prediction_aware", steps: "1" };
    expect(makeRequest({ ...v, lens: "shortcut" }).lens).toBe("shortcut");
    expect(makeRequest({ ...v, lens: "" }).lens).toBe("logit");
    expect("lens" in makeRequest(v)).toBe(false);
  });
});

describe("a lens fitted on its first use (issue 32)", () => {
  const fitNote = (/** @type {Element} */ el) => /** @type {HTMLElement} */ (el.querySelector(".iglens-controls .iglens-fit-note"));
  const choose = (/** @type {Element} */ el, /** @type {string} */ value) => {
    const sel = lensSelect(el);
    sel.value = value;
    fire(sel, "change");
  };

  it("says before Apply that a first fit takes minutes, only for a fitted lens not cached yet", () => {
    const { el, model } = mountWidget({ T: 4, nBlocks: 6 });
    expect(model.get("cached_lenses")).toEqual([]); // the trait's default
    const note = fitNote(el);
    expect(note).not.toBeNull();
    expect(note.hidden).toBe(true); // the logit lens: nothing to fit
    choose(el, "tuned");
    expect(note.hidden).toBe(false);
    expect(note.textContent).toMatch(/^The tuned lens is not fitted for this model yet: Apply fits it first, which takes minutes on a CPU/);
    expect(note.textContent).toMatch(/Cancel stops the fit/);
    // Python says the tuned lens is cached: no note; the Jacobian lens is not
    model.set("cached_lenses", ["tuned"]);
    expect(note.hidden).toBe(true);
    choose(el, "jacobian");
    expect(note.hidden).toBe(false);
    expect(note.textContent).toContain("The jacobian lens is not fitted");
    choose(el, "logit");
    expect(note.hidden).toBe(true);
  });

  it("says nothing for the shown result's own lens, while a recompute runs, or without a kernel", () => {
    const a = mountWidget({ T: 4, nBlocks: 6, lens: "shortcut" });
    expect(fitNote(a.el).hidden).toBe(true); // shortcut: the lens already shown
    choose(a.el, "tuned");
    expect(fitNote(a.el).hidden).toBe(false);
    fire(q(a.el, ".iglens-apply"), "click");
    expect(a.model.last("recompute")?.controls.lens).toBe("tuned");
    expect(fitNote(a.el).hidden).toBe(true); // running: the status line speaks instead
    const b = mountWidget({ T: 4, nBlocks: 6, kernel: "silent" });
    choose(b.el, "tuned");
    expect(fitNote(b.el).hidden).toBe(true);
  });

  it("shows the running fit's phase, count and time left beside Cancel", () => {
    const { el, model } = mountWidget({ T: 4, nBlocks: 6 });
    choose(el, "tuned");
    fire(q(el, ".iglens-apply"), "click");
    const sent = /** @type {Record<string, any>} */ (model.last("recompute"));
    const fit = { kind: "tuned", phase: "fit", done: 20, total: 250, unit: "steps", remaining_s: 181.4, resumed_at: 0 };
    model.set("running", { id: sent.id, command: "recompute", fit });
    model.set("progress", 0.08);
    const status = q(el, ".iglens-controls .iglens-status");
    expect(status.textContent).toBe("First use of the tuned lens: fitting 20/250 steps \u00b7 about 3 min left");
    const cancel = q(el, ".iglens-controls .iglens-cancel");
    expect(cancel.hidden).toBe(false);
    fire(cancel, "click");
    expect(model.last("cancel")?.request_id).toBe(sent.id);
    model.set("running", { id: sent.id, command: "recompute", fit: { ...fit, phase: "corpus", done: 3, total: 64, unit: "tokens", remaining_s: null } });
    expect(status.textContent).toBe("First use of the tuned lens: sampling its corpus 3/64 tokens");
  });

  it("firstFitNote and fitStatus are pure and escape what they quote", () => {
    expect(firstFitNote("tuned", "logit", ["shortcut"])).toMatch(/^The tuned lens is not fitted/);
    expect(firstFitNote("tuned", "logit", ["tuned"])).toBeNull();
    expect(firstFitNote("tuned", "tuned", [])).toBeNull();
    expect(firstFitNote("/tmp/my.safetensors", "logit", [])).toBeNull(); // a saved lens: no fit
    expect(firstFitNote("tuned", "logit", "garbage")).toMatch(/^The tuned lens/);
    expect(fitStatus(null)).toBeNull();
    expect(fitStatus({ kind: "shortcut", phase: "states", done: 16, total: 48, unit: "texts", remaining_s: 12.2 })).toBe(
      "First use of the shortcut lens: reading the corpus's states 16/48 texts \u00b7 about 12 s left",
    );
    const hostile = /** @type {string} */ (fitStatus({ kind: EVIL, phase: "fit", done: 1, total: 2, unit: "\u202esteps", remaining_s: 5400 }));
    expect(hostile).not.toContain("\u202e");
    expect(hostile).toContain("about 1.5 h left");
  });
});

describe("the header and the exported titles name a fitted lens", () => {
  it("the header's meta says `lens: shortcut` under the shortcut lens, nothing under the logit lens", () => {
    const a = mountWidget({ T: 4, nBlocks: 6, lens: "shortcut" });
    expect(metaParts(a.el)).toContain("lens: shortcut");
    const b = mountWidget({ T: 4, nBlocks: 6, lens: "logit" });
    expect(metaParts(b.el).some((p) => p.startsWith("lens"))).toBe(false);
    const c = mountWidget({ T: 4, nBlocks: 6 }); // no `lens` at all
    expect(metaParts(c.el).some((p) => p.startsWith("lens"))).toBe(false);
  });

  it("the PNG/SVG title lines add `lens: tuned`; the logit lens's do not", () => {
    const r = decoded(makeResult({ T: 4, nBlocks: 6, lens: "tuned" }));
    const lines = titleLines(r, "layer heatmap");
    expect(lines[2]).toContain(" \u00b7 lens: tuned \u00b7 ");
    expect(lines[2].startsWith("target: predicted \u00b7 lens: tuned \u00b7 estimator:")).toBe(true);
    for (const lens of ["logit", undefined]) {
      const plain = titleLines(decoded(makeResult({ T: 4, nBlocks: 6, lens })), "layer heatmap");
      expect(plain.join("\n")).not.toContain("lens:");
    }
    // the SVG's title and its first text lines carry it too
    /** @type {any} */ let p = null;
    heatmapFigure((/** @type {number} */ w, /** @type {number} */ h) => (p = svgPainter(w, h, lines.join(" \u00b7 "))), r, {
      theme: "light",
      rows: [0, r.T - 1],
    });
    const doc = new DOMParser().parseFromString(/** @type {string} */ (p.toString()), "image/svg+xml");
    expect(doc.querySelector("title")?.textContent).toContain("lens: tuned");
    expect([...doc.querySelectorAll("text")].map((t) => t.textContent)).toContain(lines[2]);
    // the grid's figure is that lens's grid
    gridFigure((/** @type {number} */ w, /** @type {number} */ h) => (p = svgPainter(w, h, "grid")), r, {
      theme: "light",
      columns: [0, r.T - 1],
      mode: "probability",
    });
    const grid = new DOMParser().parseFromString(/** @type {string} */ (p.toString()), "image/svg+xml");
    const texts = [...grid.querySelectorAll("text")].map((t) => t.textContent);
    expect(texts[0]).toBe(`IG-Lens tuned-lens grid \u00b7 ${r.modelName}`);
    expect(texts[2]).toContain(" \u00b7 lens: tuned \u00b7 ");
  });

  it("the grid, chart (c) and chart (b) name the lens; the logit lens keeps its words", () => {
    const { el, model } = mountWidget({ T: 5, nBlocks: 6, lens: "shortcut", selected: 2 });
    const captions = () => [...el.querySelectorAll(".iglens-detail figcaption")].map((c) => c.textContent ?? "");
    expect(captions().some((c) => c.startsWith("(c) shortcut lens: the lens's top-1 token"))).toBe(true);
    expect(captions().some((c) => c.startsWith("(b)") && c.endsWith("read through the shortcut lens"))).toBe(true);
    expect(captions().join("\n")).not.toMatch(/logit lens/);
    model.set("view", "grid");
    expect(q(el, ".iglens-lensgrid .iglens-section-title").textContent).toBe("Shortcut lens: top-1 token after each block");
    expect(q(el, "[data-view-tab=grid]").textContent).toBe("Shortcut-lens grid");
    expect(q(el, ".iglens-lensgrid .iglens-foot").textContent).toContain("mapped by the shortcut lens (fitted), then read through the final norm and head");
    expect(q(el, ".iglens-help-lens").textContent).toBe("This result is read through the shortcut lens.");
    expect(detailHeading(decoded(model.get("result")), 2)).toMatch(/ \u2014 shortcut lens$/);
    // a logit-lens result: the captions as they were
    model.set("result", makeResult({ T: 5, nBlocks: 6, lens: "logit", id: "r2" }));
    expect(captions().some((c) => c.startsWith("(c) logit lens: the lens's top-1 token"))).toBe(true);
    expect(captions().some((c) => c.includes("read through"))).toBe(false);
    expect(q(el, ".iglens-lensgrid .iglens-section-title").textContent).toBe("Logit lens: top-1 token after each block");
    expect(q(el, "[data-view-tab=grid]").textContent).toBe("Logit-lens grid");
    expect(titleLines(decoded(model.get("result")), "logit-lens grid")[0]).toMatch(/^IG-Lens logit-lens grid/);
  });
});

describe("the heads matrix under a fitted lens: the coordinate column", () => {
  it("shows `coordinate` as its own column (coord, full name in the title), at the segment's last block; Σ shares = contribution", () => {
    const state = makeState({ T: 5, nBlocks: 6, every: 2, lens: "shortcut", components: { heads: 2, coordinate: true }, selected: 2, interactive: false });
    const r = decoded(state.result);
    const comp = /** @type {import("../model/component-split.js").Components} */ (decodeComponents(state.result.components));
    expect(comp.names).toEqual(["head:0", "head:1", "mlp", "rest", "coordinate"]);
    const { el } = mountWidget({ state });
    const root = q(el, ".iglens-detail [data-view=components]");
    expect(root).not.toBeNull();
    const j = Number(root.getAttribute("data-segment"));
    const heads = [...root.querySelectorAll("thead th")];
    expect(heads.map((th) => th.textContent)).toEqual(["block", "h0", "h1", "mlp", "rest", "coord"]);
    expect(heads[5].getAttribute("title")).toBe("coordinate");
    // one cell per block of the segment (two blocks: every 2), the last block's the nonzero one
    const coord = /** @type {HTMLElement[]} */ ([...root.querySelectorAll("[data-component=coordinate]")]);
    const blocks = [r.boundaries[j] + 1, r.boundaries[j + 1]];
    expect(coord.map((td) => Number(td.dataset.block))).toEqual(blocks);
    expect(Number(coord[0].dataset.share)).toBe(0);
    expect(Number(coord[1].dataset.share)).not.toBe(0);
    expect(coord[1].getAttribute("aria-label")).toMatch(new RegExp(`^L${blocks[1]}\\.coord \\(coordinate\\): `));
    // not folded into a head: the head cells are the split's own values
    const shares = /** @type {import("../model/component-split.js").Shares} */ (comp.sharesAt(2));
    const M = segmentMatrix(shares, j);
    expect(M.colNames).toEqual(["head:0", "head:1", "mlp", "rest", "coordinate"]);
    for (const td of /** @type {HTMLElement[]} */ ([...root.querySelectorAll("[data-component]")])) {
      const c = comp.names.indexOf(/** @type {string} */ (td.dataset.component));
      const b = Number(td.dataset.block) - 1;
      expect(td.dataset.share).toBe(String(shares.shares[b * shares.C + c]));
    }
    // Σ shares (the coordinate included) = the segment's contribution
    const sum = q(el, ".iglens-components-sum");
    expect(sum.classList.contains("iglens-ok")).toBe(true);
    expect(Math.abs(M.sum - contribution(r, 2, j))).toBeLessThan(1e-5);
    expect(q(el, ".iglens-components-coordinate").textContent).toMatch(/^coord \(coordinate\): the change of the shortcut lens's coordinates/);
  });

  it("no coordinate column (and no note) under the logit lens's split", () => {
    const { el } = mountWidget({ T: 5, nBlocks: 6, every: 2, components: { heads: 2 }, selected: 2, interactive: false });
    expect(el.querySelector("[data-component=coordinate]")).toBeNull();
    expect(el.querySelector(".iglens-components-coordinate")).toBeNull();
  });
});

describe("a hostile lens name is text", () => {
  it("no element from the name; bidi and control characters as visible escapes in the header, the select, the captions and the titles", () => {
    const state = makeState({ T: 5, nBlocks: 6, lens: EVIL, controlsLens: `/tmp/${EVIL}`, selected: 2 });
    const { el } = mountWidget({ state });
    expect(document.querySelectorAll("img, script, iframe, object").length).toBe(0);
    const shown = formatToken(EVIL, { maxLen: 40 });
    expect(shown).toContain("\\u202e");
    expect(shown).not.toContain("\u202e");
    expect(metaParts(el)).toContain(`lens: ${shown}`);
    expect(lensFact(EVIL)).toBe(`lens: ${shown}`);
    const own = lensSelect(el).options[4];
    expect(own.textContent).toBe(`${shown} (this result's lens)`);
    expect(own.value).toBe(`/tmp/${EVIL}`); // the value Python gave, sent back as it is (never shown as markup)
    expect(own.title).not.toContain("\u202e");
    const text = el.textContent ?? "";
    expect(text).not.toContain("\u202e");
    expect(text).toContain(`(c) ${lensPhrase(EVIL)}:`);
    const lines = titleLines(decoded(state.result), "layer heatmap");
    for (const line of lines) expect(line).not.toMatch(/[\u202e\n]/);
    expect(lines[2]).toContain(`lens: ${shown}`);
  });
});
