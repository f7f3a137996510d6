// @vitest-environment jsdom
// The help in two levels (views/help.js) as a reader meets it in the widget: the student
// version shown by default in the student view (view = "lesson"), the researcher text behind
// "More detail" there, and shown in the full views; a change of view resets the switch.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeState } from "../testing/fixture.js";

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

/** @param {ParentNode} el @param {string} sel */
const q = (el, sel) => /** @type {HTMLElement} */ (el.querySelector(sel));

/** What a reader sees of the help: shown levels, the switch's words and state. @param {HTMLElement} el */
function help(el) {
  const panel = q(el, ".iglens-help");
  const shown = (/** @type {string} */ level) => {
    const part = q(panel, `[data-help-level=${level}]`);
    return !panel.hidden && !part.hidden;
  };
  const more = q(panel, "[data-action=help-more]");
  return {
    panel,
    student: shown("student"),
    researcher: shown("researcher"),
    more: more.textContent,
    expanded: more.getAttribute("aria-expanded"),
    button: more,
  };
}

/** @param {HTMLElement} el */
const open = (el) => fire(q(el, ".iglens-help-toggle"), "click");

describe("the help in two levels", () => {
  it("the student view opens on the short student version; More detail shows the researcher text", () => {
    const { el } = mountWidget({ state: { ...makeState(), view: "lesson" } });
    expect(help(el).panel.hidden).toBe(true); // one click away, as before
    open(el);
    const h = help(el);
    expect([h.student, h.researcher, h.more, h.expanded]).toEqual([true, false, "More detail", "false"]);
    // the student version: a few plain sentences, what the curve is, what a block is, readable ≠ computed
    const student = q(el, "[data-help-level=student]");
    const sentences = [...student.querySelectorAll("p")].map((p) => /** @type {string} */ (p.textContent));
    expect(sentences.length).toBeGreaterThanOrEqual(3);
    expect(sentences.length).toBeLessThanOrEqual(5);
    expect(student.textContent).toMatch(/The curve shows how sure the model is of the answer after each block, in percent/);
    expect(student.textContent).toMatch(/A block is one of the model's layers/);
    expect(student.textContent).toContain("Readable is not the same as computed");
    expect(student.textContent).toContain("\u2423 is a space and \u21b5 a line break"); // the chips' marks
    expect(student.textContent).toContain("percentage points");
    // no researcher vocabulary in it
    expect(student.textContent).not.toMatch(/\u0394p|conditional marginal|unembedding|Integrated-Gradients|logit|segment/);
    fire(help(el).button, "click");
    expect([help(el).student, help(el).researcher, help(el).more, help(el).expanded]).toEqual([true, true, "Less detail", "true"]);
    expect(q(el, "[data-help-level=researcher]").textContent).toContain("conditional marginal");
    fire(help(el).button, "click");
    expect(help(el).researcher).toBe(false);
  });

  it("the full view shows the researcher text (with the result's threshold); switching views resets the level", () => {
    const { el, model } = mountWidget({ state: makeState({ threshold: 0.6 }) });
    expect(model.get("view")).not.toBe("lesson");
    open(el);
    expect([help(el).student, help(el).researcher, help(el).more]).toEqual([true, true, "Less detail"]);
    expect(q(el, "[data-help-level=researcher]").textContent).toContain("against \u0394p by more than 60% of the largest |contribution|");
    model.set("view", "lesson");
    expect([help(el).student, help(el).researcher, help(el).more]).toEqual([true, false, "More detail"]);
    fire(help(el).button, "click");
    expect(help(el).researcher).toBe(true);
    model.set("view", "heatmap"); // back to the full view: its own level again
    expect(help(el).researcher).toBe(true);
    fire(help(el).button, "click"); // a researcher may fold it in the full view too
    expect([help(el).researcher, help(el).more]).toEqual([false, "More detail"]);
    model.set("view", "lesson");
    expect(help(el).researcher).toBe(false);
  });
});
