// @vitest-environment jsdom
// Issue 23's template switch and teacher notes on the Python payload (js/testing/payload.json:
// a tiny Llama, prompt "w5 w17 w3 w42 w8", answer " w9 w11"). The payload has no chat
// template, so the template tests give it `template_positions` here (the Python side's
// computation is tested in tests/protocol/test_template_positions_and_notes.py); the fold must hide exactly those
// chips, keep every position's number, and unfold on a click. Notes: written as a trait or
// with the lesson's editor, shown as callouts (text only), marked in the strip.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, fire } from "../../testing/dom.js";
import { render } from "../app.js";
import { createModel } from "../../standalone.js";
import { templateMask, foldRuns, templateFolded, skipFolded } from "../strip/template-fold.js";
import { readNotes, notesAt, newNote, MAX_NOTE_CHARS, MAX_NOTES } from "../../model/notes.js";
import { boundaryOfBlock } from "./notes.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "testing", "payload.json"), "utf-8"));
const T = golden.state.result.tokens.length;
const ANSWER_START = golden.state.result.answer_start;

beforeAll(() => installFakeCanvas());
afterEach(() => document.body.replaceChildren());

/** @param {Record<string, any>} [traits] @param {number[]|null} [template] */
function mount(traits = {}, template = null) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const state = { ...structuredClone(golden.state), view: "lesson", ...traits };
  state.result.template_positions = template;
  const model = createModel(state);
  const cleanup = render({ model, el });
  return { el, model, cleanup, lesson: /** @type {HTMLElement} */ (el.querySelector("[data-view=lesson]")) };
}

/** @param {ParentNode} el @param {string} sel */
const q = (el, sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
/** The positions whose chips are shown. @param {HTMLElement} el */
const visible = (el) =>
  [...el.querySelectorAll(".iglens-strip [data-token-index]")]
    .filter((c) => !(/** @type {HTMLElement} */ (c).hidden))
    .map((c) => Number(c.getAttribute("data-token-index")));
const range = (/** @type {number} */ a, /** @type {number} */ b) => Array.from({ length: b - a }, (_, i) => a + i);

describe("the template switch", () => {
  it("reads template_positions as a mask and folds runs before the answer only", () => {
    expect(templateMask(null, 4)).toBe(null);
    expect(templateMask([0, 9], 4)).toBe(null); // out of range: not a mask of this result
    expect(templateMask([0, 1.5], 4)).toBe(null);
    expect(templateMask([0, 2, 3], 4)).toEqual([true, false, true, true]);
    const template = [true, true, false, true, true, true];
    expect(foldRuns({ T: 6, answerStart: 5, template })).toEqual([
      [0, 1],
      [3, 4],
    ]);
    expect(foldRuns({ T: 6, answerStart: 6, template: null })).toEqual([]);
    expect([templateFolded("auto", "lesson"), templateFolded("auto", "heatmap"), templateFolded("folded", "grid"), templateFolded("shown", "lesson")]).toEqual([
      true,
      false,
      true,
      false,
    ]);
    const folded = [true, true, false, false];
    expect([skipFolded(1, 2, folded), skipFolded(3, 2, folded), skipFolded(0, -1, folded)]).toEqual([2, 3, 2]);
  });

  it("folds the template's chips into one chip in the student view; positions, selection and the lesson are unchanged", () => {
    const template = [0, 1, 3];
    const { el, model, lesson } = mount({}, template);
    const before = lesson.getAttribute("data-position");
    const folds = [...el.querySelectorAll(".iglens-template-fold")];
    // [0, 1] and [3] fold (both before answer_start = 4); position 2 is the user's
    expect(ANSWER_START).toBe(4);
    expect(folds.map((f) => [f.getAttribute("data-fold-start"), f.getAttribute("data-fold-end")])).toEqual([
      ["0", "1"],
      ["3", "3"],
    ]);
    expect(folds[0].textContent).toContain("2 tokens");
    expect(visible(el)).toEqual([2, ...range(4, T)]);
    const box = /** @type {HTMLInputElement} */ (q(el, "input[name=hide_template]"));
    expect(q(el, ".iglens-template-switch").hidden).toBe(false);
    expect(box.checked).toBe(true);
    // every chip keeps its number; the lesson is still about the same position
    expect([...el.querySelectorAll(".iglens-strip [data-token-index]")].map((c) => c.getAttribute("data-token-index"))).toEqual(range(0, T).map(String));
    expect(lesson.getAttribute("data-position")).toBe(before);
    expect(model.get("selected")).toBe(golden.state.selected);
    // a click on the folded chip unfolds: every chip again, the switch off
    /** @type {HTMLElement} */ (folds[0]).click();
    expect(model.get("template")).toBe("shown");
    expect(visible(el)).toEqual(range(0, T));
    expect(el.querySelector(".iglens-template-fold")).toBe(null);
    expect(box.checked).toBe(false);
    // and the switch folds again
    box.checked = true;
    fire(box, "change");
    expect(model.get("template")).toBe("folded");
    expect(visible(el)).toEqual([2, ...range(4, T)]);
  });

  it("is off in the full view by default, on there when switched; the arrow keys step over a folded run", () => {
    const { el, model } = mount({ view: "heatmap", selected: 2 }, [0, 1, 3]);
    expect(visible(el)).toEqual(range(0, T));
    expect(/** @type {HTMLInputElement} */ (q(el, "input[name=hide_template]")).checked).toBe(false);
    model.set("template", "folded");
    expect(visible(el)).toEqual([2, ...range(4, T)]);
    const strip = q(el, ".iglens-strip");
    fire(q(el, "[data-token-index='2']"), "keydown", { key: "ArrowRight" });
    expect(model.get("selected")).toBe(4); // 3 is folded
    fire(q(el, "[data-token-index='4']"), "keydown", { key: "ArrowLeft" });
    expect(model.get("selected")).toBe(2);
    fire(q(el, "[data-token-index='2']"), "keydown", { key: "ArrowLeft" });
    expect(model.get("selected")).toBe(2); // 0 and 1 are folded: nowhere to go
    expect(strip).toBeTruthy();
  });

  it("has no switch for a result without a template", () => {
    const { el } = mount();
    expect(q(el, ".iglens-template-switch").hidden).toBe(true);
    expect(el.querySelector(".iglens-template-fold")).toBe(null);
    expect(visible(el)).toEqual(range(0, T));
  });
});

describe("teacher notes", () => {
  const EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> & look here';

  it("reads the trait defensively and builds notes as Python stores them", () => {
    const raw = [
      { position: 1, text: "a" },
      { block: 2, text: "b" },
      { position: 99, text: "far" },
      { text: "nowhere" },
      { position: 1, text: "  " },
      "x",
      { block: 1, position: 0, text: "c" },
    ];
    const notes = readNotes(raw, 5, 4);
    expect(notes.map((n) => n.index)).toEqual([0, 1, 6]);
    expect(notesAt(notes, 1).map((n) => n.text)).toEqual(["a", "b"]);
    expect(notesAt(notes, 0).map((n) => n.text)).toEqual(["b", "c"]);
    expect(newNote("hi", { position: 3, block: null })).toEqual({ position: 3, text: "hi" });
    expect(Object.keys(/** @type {object} */ (newNote("hi", { position: 3, block: 2 })))).toEqual(["position", "block", "text"]);
    expect(newNote("   ", { position: 3 })).toBe(null);
    expect(newNote("hi", {})).toBe(null);
    expect(/** @type {any} */ (newNote("x".repeat(MAX_NOTE_CHARS + 10), { block: 0 })).text.length).toBe(MAX_NOTE_CHARS);
    expect(
      readNotes(
        Array.from({ length: MAX_NOTES + 5 }, () => ({ block: 0, text: "n" })),
        5,
        4,
      ).length,
    ).toBe(MAX_NOTES);
    expect([boundaryOfBlock([0, 1, 4], 4), boundaryOfBlock([0, 1, 4], 2), boundaryOfBlock([0, 1, 4], 9)]).toEqual([2, 2, -1]);
  });

  it("shows the position's notes as callouts, text only, and marks the noted chip in the strip", () => {
    const sel = golden.state.selected;
    const { el, lesson } = mount({
      notes: [
        { position: sel, text: EVIL },
        { position: 0, text: "elsewhere" },
        { block: 1, text: "block one" },
      ],
    });
    const callouts = [...lesson.querySelectorAll("aside.iglens-note")];
    expect(callouts.map((c) => q(c, ".iglens-note-text").textContent)).toEqual([EVIL, "block one"]);
    expect(el.querySelector("img, script")).toBe(null);
    expect(/** @type {any} */ (window).__pwned).toBeUndefined();
    // the block note's "go to block" moves the walk and highlights it
    q(callouts[1], ".iglens-note-go").click();
    expect(lesson.getAttribute("data-cursor")).toBe("1");
    expect(callouts[1].classList.contains("iglens-note-now")).toBe(true);
    const noted = [...el.querySelectorAll(".iglens-strip .iglens-token-noted")].map((c) => Number(c.getAttribute("data-token-index")));
    expect(noted).toEqual([0, sel].sort((a, b) => a - b));
    expect(q(el, `[data-token-index='${sel}']`).title).toContain(`note: ${EVIL}`);
  });

  it("the editor adds a note to the token, the block or both, and × removes it; typing does not drive the walk", () => {
    const sel = golden.state.selected;
    const { lesson, model, el } = mount();
    const text = /** @type {HTMLTextAreaElement} */ (q(lesson, "textarea[name=note-text]"));
    const pin = /** @type {HTMLSelectElement} */ (q(lesson, "select[name=note-pin]"));
    expect(text.maxLength).toBe(MAX_NOTE_CHARS);
    const cursor = lesson.getAttribute("data-cursor");
    fire(text, "keydown", { key: " " });
    fire(text, "keydown", { key: "ArrowLeft" });
    expect(lesson.getAttribute("data-cursor")).toBe(cursor);
    expect(q(lesson, ".iglens-lesson-play").getAttribute("aria-pressed")).toBe("false");
    q(lesson, "[data-action=note-add]").click(); // blank: nothing added
    expect(model.get("notes")).toEqual([]);
    text.value = EVIL;
    q(lesson, "[data-action=note-add]").click();
    expect(model.get("notes")).toEqual([{ position: sel, text: EVIL }]);
    expect(q(lesson, "aside.iglens-note .iglens-note-text").textContent).toBe(EVIL);
    expect(q(el, `[data-token-index='${sel}']`).classList.contains("iglens-token-noted")).toBe(true);
    fire(lesson, "keydown", { key: "Home" }); // the walk at the embeddings
    text.value = "the embeddings";
    pin.value = "both";
    q(lesson, "[data-action=note-add]").click();
    expect(model.get("notes")[1]).toEqual({ position: sel, block: 0, text: "the embeddings" });
    q(lesson, "aside.iglens-note [data-action=note-remove]").click();
    expect(model.get("notes")).toEqual([{ position: sel, block: 0, text: "the embeddings" }]);
    expect(lesson.querySelectorAll("aside.iglens-note").length).toBe(1);
    expect(el.querySelector("img, script")).toBe(null);
  });
});
