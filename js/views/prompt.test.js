// @vitest-environment jsdom
// The prompt box (the `ask` command) and the student view's "compare with…" box (`recompute`
// with `versus`) on the Python payload (js/testing/payload.json: a tiny Llama, answer=" w9 w11",
// versus=" w7"), with a fake kernel: what is sent, progress and Cancel, the error line, the
// disabled state and note without a kernel, typed text kept as text.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, fire } from "../testing/dom.js";
import { kernelModel } from "../testing/kernel.js";
import { render } from "./app.js";
import { NO_KERNEL_NOTE } from "./kernel.js";
import { MAX_ASK_NEW_TOKENS, MAX_PROMPT_LENGTH } from "./prompt.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

/** @param {{view?: string, hello?: "answer"|"silent"}} [o] */
function mount(o = {}) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const state = structuredClone(golden.state);
  state.view = o.view ?? "lesson";
  state.interactive = true;
  const model = kernelModel(state, { hello: o.hello ?? "answer" });
  render({ model, el });
  const where = o.view === "heatmap" ? ".iglens-controls" : "[data-view=lesson]";
  const box = /** @type {HTMLFormElement} */ (el.querySelector(`${where} form[data-prompt-box]`));
  return { el, model, box, id: String(state.result.id) };
}

const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));
const field = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLTextAreaElement} */ (el.querySelector(sel));

describe("the prompt box", () => {
  for (const view of ["lesson", "heatmap"]) {
    it(`in the ${view} view: a question is sent as typed, progress shows, the answer clears it`, () => {
      const { el, model, box, id } = mount({ view });
      expect(box).not.toBeNull();
      const prompt = field(box, "textarea[name=prompt]");
      const ask = q(box, "[data-action=ask]");
      expect(ask.getAttribute("type")).toBe("submit");
      expect(prompt.disabled).toBe(false);
      prompt.value = "What is the capital of <b>Vietnam</b>?";
      ask.click();
      const sent = /** @type {any} */ (model.last("ask"));
      expect(sent).toEqual({ kind: "ask", id: expect.any(String), result_id: id, prompt: "What is the capital of <b>Vietnam</b>?" });
      model.set("running", { id: sent.id, command: "ask" });
      model.set("progress", 0.4);
      expect(q(box, ".iglens-prompt-status").textContent).toBe("Thinking\u2026 40%");
      expect(/** @type {HTMLProgressElement} */ (q(box, "progress")).value).toBe(0.4);
      expect(/** @type {HTMLButtonElement} */ (ask).disabled).toBe(true);
      // the full view's Apply waits too (one background command at a time)
      expect(/** @type {HTMLButtonElement} */ (q(el, ".iglens-controls .iglens-apply")).disabled).toBe(true);
      model.set("running", {});
      model.set("progress", -1);
      model.answer(sent);
      expect(q(box, "[data-action=cancel-ask]").hidden).toBe(true);
      expect(q(box, ".iglens-prompt-status").textContent).toBe("");
      expect(el.querySelector("b")).toBeNull(); // typed text is never markup
    });
  }

  it("Cancel names the running question; the cancelled answer's error shows, the result stays", () => {
    const { el, model, box } = mount();
    const before = JSON.stringify(model.get("result"));
    field(box, "textarea[name=prompt]").value = "w9 w11";
    box.requestSubmit();
    const sent = /** @type {any} */ (model.last("ask"));
    const cancel = q(box, "[data-action=cancel-ask]");
    expect(cancel.hidden).toBe(false); // busy before Python's running arrives
    cancel.click();
    expect(model.last("cancel")).toEqual({ kind: "cancel", id: expect.any(String), request_id: sent.id });
    expect(q(box, ".iglens-prompt-status").textContent).toBe("Cancelling\u2026");
    model.answer(/** @type {any} */ (model.last("cancel")));
    model.answer(sent, { error: { type: "RecomputeCancelled", message: "cancelled: the previous result is still shown" } });
    const error = q(el, "[data-view=lesson] .iglens-prompt-error");
    expect(error.hidden).toBe(false);
    expect(error.textContent).toBe("cancelled: the previous result is still shown");
    expect(JSON.stringify(model.get("result"))).toBe(before);
  });

  it("Enter asks, Shift+Enter does not; an empty or too long question is refused in the page", () => {
    const { model, box } = mount();
    const prompt = field(box, "textarea[name=prompt]");
    fire(prompt, "keydown", { key: "Enter" });
    expect(model.commands("ask").length).toBe(0);
    expect(q(box.parentElement ?? box, ".iglens-prompt-error").textContent).toBe("Type a question first.");
    prompt.value = "x".repeat(MAX_PROMPT_LENGTH + 1);
    fire(prompt, "keydown", { key: "Enter" });
    expect(model.commands("ask").length).toBe(0);
    expect(q(box.parentElement ?? box, ".iglens-prompt-error").textContent).toMatch(/at most 20000: shorten it/);
    prompt.value = "w3";
    fire(prompt, "keydown", { key: "Enter", shiftKey: true });
    expect(model.commands("ask").length).toBe(0);
    fire(prompt, "keydown", { key: "Enter" });
    expect(model.commands("ask").length).toBe(1);
    expect(q(box.parentElement ?? box, ".iglens-prompt-error").hidden).toBe(true);
  });

  it("the answer length: sent when typed, absent when empty, refused in the page when not 1 … 256", () => {
    const { model, box, id } = mount();
    const prompt = field(box, "textarea[name=prompt]");
    const length = /** @type {HTMLInputElement} */ (box.querySelector("input[name=max_new_tokens]"));
    expect(length.type).toBe("number");
    expect(length.placeholder).toBe("tokens"); // the payload's request teacher-forces its answer
    prompt.value = "w3";
    length.value = "7";
    box.requestSubmit();
    expect(model.last("ask")).toEqual({ kind: "ask", id: expect.any(String), result_id: id, prompt: "w3", max_new_tokens: 7 });
    model.answer(/** @type {any} */ (model.last("ask")));
    const error = q(box.parentElement ?? box, ".iglens-prompt-error");
    for (const bad of ["0", String(MAX_ASK_NEW_TOKENS + 1), "2.5", "-3"]) {
      length.value = bad;
      box.requestSubmit();
      expect(model.commands("ask").length).toBe(1);
      expect(error.textContent).toBe(`The answer length is a whole number of tokens, 1 \u2026 ${MAX_ASK_NEW_TOKENS} (empty: as now).`);
    }
    length.value = "";
    box.requestSubmit();
    expect(model.commands("ask").length).toBe(2);
    expect("max_new_tokens" in /** @type {any} */ (model.last("ask"))).toBe(false);
    expect(error.hidden).toBe(true);
  });

  it("without a kernel: disabled, and the kernel note says why", async () => {
    const { box } = mount({ hello: "silent" });
    const root = /** @type {HTMLElement} */ (box.parentElement);
    expect(field(box, "textarea[name=prompt]").disabled).toBe(true);
    expect(/** @type {HTMLButtonElement} */ (q(box, "[data-action=ask]")).disabled).toBe(true);
    expect(q(root, ".iglens-prompt-note").hidden).toBe(false);
    expect(q(root, ".iglens-prompt-note").textContent).toBe("connecting to the kernel\u2026");
    await new Promise((r) => setTimeout(r, 4100)); // HELLO_TIMEOUT_MS
    expect(q(root, ".iglens-prompt-note").textContent).toBe(NO_KERNEL_NOTE);
  }, 10_000);
});

describe("the compare box", () => {
  it("sends the shown controls with versus; empty drops it; Python's error shows in the box", () => {
    const { el, model, id } = mount();
    const form = /** @type {HTMLFormElement} */ (el.querySelector("[data-view=lesson] form[data-compare-box]"));
    const input = /** @type {HTMLInputElement} */ (form.querySelector("input[name=versus]"));
    expect(input.value).toBe(golden.state.result.versus.text); // the shown comparison
    input.value = "The capital of Vietnam is Hanoi.";
    q(form, "[data-action=compare]").click();
    const sent = /** @type {any} */ (model.last("recompute"));
    expect(sent).toEqual({
      kind: "recompute",
      id: expect.any(String),
      result_id: id,
      controls: { lens: "logit", ...golden.state.result.controls }, // the decoded controls name the lens
      versus: "The capital of Vietnam is Hanoi.",
    });
    model.answer(sent, { error: { type: "InvalidRequestError", message: "versus is the answer itself" } });
    const error = q(el, ".iglens-versus-error");
    expect(error.hidden).toBe(false);
    expect(error.textContent).toBe("versus is the answer itself");
    input.value = "  ";
    form.requestSubmit();
    expect(/** @type {any} */ (model.last("recompute")).versus).toBeNull();
  });

  it("hidden when the result has no answer to compare with", () => {
    const el = document.createElement("div");
    document.body.appendChild(el);
    const state = structuredClone(golden.state);
    state.view = "lesson";
    state.result.answer = null;
    state.result.versus = null;
    render({ model: kernelModel(state), el });
    expect(q(el, "[data-view=lesson] .iglens-versus-with").hidden).toBe(true);
    expect(q(el, "[data-view=lesson] .iglens-prompt").hidden).toBe(false);
  });
});

describe("an exported page (no kernel, ever)", () => {
  it("the student view leaves both boxes out; the full view's box is disabled with the kernel note", async () => {
    const { createModel } = await import("../standalone.js");
    const el = document.createElement("div");
    document.body.appendChild(el);
    const state = structuredClone(golden.state);
    state.view = "lesson";
    state.interactive = true;
    render({ model: createModel(state), el });
    expect(q(el, "[data-view=lesson] .iglens-prompt").hidden).toBe(true);
    expect(q(el, "[data-view=lesson] .iglens-versus-with").hidden).toBe(true);
    const full = q(el, ".iglens-controls .iglens-prompt");
    expect(full.hidden).toBe(false);
    expect(field(full, "textarea[name=prompt]").disabled).toBe(true);
    expect(q(full, ".iglens-prompt-note").textContent).toBe(NO_KERNEL_NOTE);
  });
});
