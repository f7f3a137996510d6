// @vitest-environment jsdom
// The student view (view = "lesson") on the Python payload (js/testing/payload.json: a tiny
// Llama, answer=" w9 w11", versus=" w7", opened on the answer's first content token): the
// header's top 5, the curves in percent (values as sent), the lens column, the walk (slider,
// keys, play) and the way back to the heatmap. Token text from the payload stays text.
import { describe, it, expect, beforeAll, afterEach, vi } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, fire } from "../../testing/dom.js";
import { render } from "../app.js";
import { createModel } from "../../standalone.js";
import { decodeResult, topAt, lensRow } from "../../model/result.js";
import { formatToken } from "../../lib/tokens.js";
import { fmtPercentPlain } from "../../lib/format.js";
import { PLAY_MS } from "./index.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "testing", "payload.json"), "utf-8"));
const want = golden.expected.answers;

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  vi.useRealTimers();
  document.body.replaceChildren();
});

/** @param {{view?: string, edit?: (result: any) => void}} [o] */
function mount(o = {}) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const state = structuredClone(golden.state);
  state.view = o.view ?? "lesson";
  if (o.edit) o.edit(state.result);
  const model = createModel(state);
  const cleanup = render({ model, el });
  const lesson = /** @type {HTMLElement} */ (el.querySelector("[data-view=lesson]"));
  return { el, model, cleanup, lesson, r: /** @type {import("../../model/result.js").Result} */ (decodeResult(structuredClone(state.result))) };
}

/** @param {ParentNode} el @param {string} sel */
const q = (el, sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
/** @param {ParentNode} el @param {string} key */
const curve = (el, key) => /** @type {string} */ (q(el, `polyline[data-series=${key}]`).getAttribute("data-values")).split(" ").map(Number);
/** @param {HTMLElement} lesson */
const currentRow = (lesson) => Number(q(lesson, ".iglens-lesson-row[aria-current=true]").getAttribute("data-block"));

describe("the student view opens on the answer's content token", () => {
  it("is a tab like the grid: [data-view-tab=lesson] selected, its root shown, the root in lesson mode", () => {
    const { el, lesson } = mount();
    expect(q(el, "[data-view-tab=lesson]").getAttribute("aria-selected")).toBe("true");
    expect(lesson.hidden).toBe(false);
    expect(q(el, "[data-view=heatmap]").hidden).toBe(true);
    expect(q(el, ".iglens-root").classList.contains("iglens-lesson-mode")).toBe(true);
    // the switcher's export buttons hidden: the view has its own, for a slide; no estimator,
    // steps or segments in its text
    expect([...el.querySelectorAll("[data-export]")].every((b) => /** @type {HTMLElement} */ (b).hidden)).toBe(true);
    expect([...lesson.querySelectorAll("[data-lesson-export]")].map((b) => b.getAttribute("data-lesson-export"))).toEqual(["png", "svg"]);
    expect(lesson.textContent).not.toMatch(/m=\d|estimator|Riemann|segment|\u0394p|onset/);
    expect(lesson.getAttribute("data-position")).toBe(String(golden.state.selected));
    expect(golden.state.selected).toBe(want.answer_positions[0]); // " w9" is not a prompt word
  });

  it("the header: the answer's text and the output's top 5 at the position, in percent", () => {
    const { lesson, r } = mount();
    const i = golden.state.selected;
    expect(q(lesson, ".iglens-lesson-answer").textContent).toContain(formatToken(want.answer_text, { maxLen: 60 }));
    const items = [...lesson.querySelectorAll("[data-lesson-top5] li")];
    const top = topAt(r, i, r.k, 5);
    expect(items.length).toBe(Math.min(5, r.K));
    items.forEach((li, n) => {
      expect(q(li, ".iglens-chip").textContent).toBe(formatToken(top[n].text, { maxLen: 16 }));
      expect(q(li, ".iglens-lesson-pct").textContent).toBe(fmtPercentPlain(top[n].p));
      expect(q(li, ".iglens-lesson-pct").textContent).toMatch(/^(<0\.1|\d+(\.\d)?)%$|^>99\.9%$/);
    });
  });

  it("the curves: the whole answer, the position's next token and the answer to compare with, as sent", () => {
    const { lesson, r } = mount();
    expect(curve(lesson, "answer")).toEqual(want.answer_lens_probs);
    expect(curve(lesson, "versus")).toEqual(want.versus_lens_probs);
    expect(curve(lesson, "token")).toEqual(Array.from(lensRow(r, golden.state.selected)));
    const legend = q(lesson, ".iglens-lesson-legend").textContent;
    expect(legend).toContain(`compare with \u201c${formatToken(want.versus_text, { maxLen: 40 })}\u201d`);
    expect(q(lesson, ".iglens-lesson-curve").textContent).toContain("100%"); // the axis is in percent
  });

  it("the lens column: one row per boundary with its top tokens, the output's row current", () => {
    const { lesson, r } = mount();
    const rows = [...lesson.querySelectorAll(".iglens-lesson-row")];
    expect(rows.length).toBe(r.k + 1);
    rows.forEach((row, L) => {
      const top = topAt(r, golden.state.selected, L, 3);
      expect([...row.querySelectorAll(".iglens-chip")].map((c) => c.textContent)).toEqual(top.map((t) => formatToken(t.text, { maxLen: 16 })));
    });
    expect(currentRow(lesson)).toBe(r.k);
    expect(lesson.getAttribute("data-cursor")).toBe(String(r.k));
  });
});

describe("the walk through the layers", () => {
  it("the slider, a row, ←/→ and Home/End move the cursor: the curve's line and the column's row follow", () => {
    const { lesson } = mount();
    const slider = /** @type {HTMLInputElement} */ (q(lesson, "input[name=lesson-block]"));
    slider.value = "1";
    fire(slider, "input");
    expect(lesson.getAttribute("data-cursor")).toBe("1");
    expect(q(lesson, ".iglens-lesson-curve").getAttribute("data-cursor")).toBe("1");
    expect(currentRow(lesson)).toBe(1);
    fire(lesson, "keydown", { key: "ArrowLeft" });
    expect(currentRow(lesson)).toBe(0);
    fire(lesson, "keydown", { key: "ArrowLeft" }); // stays at the embeddings
    expect(slider.value).toBe("0");
    fire(lesson, "keydown", { key: "ArrowRight" });
    expect(lesson.getAttribute("data-cursor")).toBe("1");
    fire(lesson, "keydown", { key: "End" });
    expect(lesson.getAttribute("data-cursor")).toBe("2");
    q(lesson, ".iglens-lesson-row[data-block='0']").click();
    expect(lesson.getAttribute("data-cursor")).toBe("0");
    expect(q(lesson, ".iglens-lesson-readout").textContent).toMatch(/^embeddings · the model's guess: /);
  });

  it("the focused slider's keys step the walk here, once, and go no further (a notebook's own handlers take them otherwise)", () => {
    const { lesson } = mount();
    const slider = /** @type {HTMLInputElement} */ (q(lesson, "input[name=lesson-block]"));
    /** the keydown on the slider, as JupyterLab's document listener would see it after the view */
    const press = (/** @type {string} */ key) => {
      const e = new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true });
      let reached = false;
      const seen = () => (reached = true);
      document.addEventListener("keydown", seen);
      slider.dispatchEvent(e);
      document.removeEventListener("keydown", seen);
      return { prevented: e.defaultPrevented, reached };
    };
    expect(lesson.getAttribute("data-cursor")).toBe("2");
    expect(press("ArrowLeft")).toEqual({ prevented: true, reached: false }); // stepped here, not natively again
    expect([lesson.getAttribute("data-cursor"), slider.value, String(currentRow(lesson))]).toEqual(["1", "1", "1"]);
    press("ArrowDown");
    expect(lesson.getAttribute("data-cursor")).toBe("0");
    press("ArrowUp");
    press("ArrowRight");
    expect(lesson.getAttribute("data-cursor")).toBe("2");
    press("Home");
    expect(slider.value).toBe("0");
    expect(press("Tab")).toEqual({ prevented: false, reached: true }); // not the walk's key
  });

  it("space plays from the output back at the embeddings, one block per tick, and stops at the output", () => {
    vi.useFakeTimers();
    const { lesson } = mount();
    const play = q(lesson, "[data-action=lesson-play]");
    fire(lesson, "keydown", { key: " " });
    expect(lesson.getAttribute("data-cursor")).toBe("0");
    expect(play.getAttribute("aria-pressed")).toBe("true");
    vi.advanceTimersByTime(PLAY_MS);
    expect(lesson.getAttribute("data-cursor")).toBe("1");
    fire(lesson, "keydown", { key: " " }); // pause
    vi.advanceTimersByTime(5 * PLAY_MS);
    expect(lesson.getAttribute("data-cursor")).toBe("1");
    play.click(); // play on from here
    vi.advanceTimersByTime(5 * PLAY_MS);
    expect(lesson.getAttribute("data-cursor")).toBe("2");
    expect(play.getAttribute("aria-pressed")).toBe("false");
  });

  it("a sentence per notable block, each a button to its block", () => {
    const { lesson } = mount();
    const events = [...lesson.querySelectorAll(".iglens-lesson-event")];
    for (const b of events) {
      expect(b.textContent).toMatch(/^(embeddings|block \d+): /);
      /** @type {HTMLElement} */ (b).click();
      expect(lesson.getAttribute("data-cursor")).toBe(b.getAttribute("data-block"));
      expect(b.getAttribute("aria-current")).toBe("true");
    }
  });
});

describe("in and out of the student view", () => {
  it("one click to the heatmap and back; a new selection moves the lesson to that position", () => {
    const { el, model, lesson } = mount({ view: "heatmap" });
    const root = q(el, ".iglens-root");
    expect(lesson.hidden).toBe(true);
    expect(root.classList.contains("iglens-lesson-mode")).toBe(false);
    q(el, "[data-view-tab=lesson]").click();
    expect(model.get("view")).toBe("lesson");
    expect(lesson.hidden).toBe(false);
    expect(root.classList.contains("iglens-lesson-mode")).toBe(true);
    model.set("selected", 5);
    expect(lesson.getAttribute("data-position")).toBe("5");
    expect(q(lesson, "[data-lesson-column]").getAttribute("data-lesson-column")).toBe("5");
    q(el, "[data-view-tab=heatmap]").click();
    expect(model.get("view")).toBe("heatmap");
    expect(lesson.hidden).toBe(true);
    expect(root.classList.contains("iglens-lesson-mode")).toBe(false);
    expect(q(el, "[data-view=heatmap]").hidden).toBe(false);
  });

  it("without a whole answer: the selected token's curve alone, named by its token", () => {
    const { lesson, r } = mount({
      edit: (res) => {
        res.answer = null;
        res.versus = null;
        res.comparison = null;
      },
    });
    expect([...lesson.querySelectorAll("polyline[data-series]")].map((p) => p.getAttribute("data-series"))).toEqual(["token"]);
    expect(q(lesson, ".iglens-lesson-answer").textContent).toContain(formatToken(r.targetTokens[golden.state.selected], { maxLen: 16 }));
  });

  it("token text that looks like HTML is text, never markup", () => {
    const evil = "<img src=x onerror=alert(1)>";
    const { lesson } = mount({
      edit: (res) => {
        for (const id of Object.keys(res.token_text)) res.token_text[id] = evil + id;
        res.answer.text = evil;
      },
    });
    expect(lesson.querySelector("img")).toBeNull();
    expect(lesson.textContent).toContain("<img");
  });
});
