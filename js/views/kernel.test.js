// @vitest-environment jsdom
// Whose message an error line shows (js/views/kernel.js's requestError): a message belongs to
// its request and goes once a later request is sent, so the widget shows one at a time (issue
// 32: "cancelled: the previous result is still shown" stayed red through a later Apply that
// succeeded, and a failed Apply showed two red lines). With a fake kernel (js/testing/kernel.js)
// and the Python payload (js/testing/payload.json) in the full view.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas } from "../testing/dom.js";
import { kernelModel } from "../testing/kernel.js";
import { createCommands } from "../model/commands.js";
import { render } from "./app.js";
import { requestError } from "./kernel.js";

const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));
const CANCELLED = { type: "RecomputeCancelled", message: "cancelled: the previous result is still shown" };
const BAD_TARGET = { type: "InvalidRequestError", message: "target 'w1 w2' is not a single token" };

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

describe("requestError: the message of a box's latest request", () => {
  const setup = () => {
    const model = kernelModel({ result: { id: "r1" } });
    const commands = createCommands(model);
    /** Send `kind` and answer it (`error`: failed). @param {import("../model/commands.js").CommandKind} kind @param {any} [error] */
    const run = (kind, error = null) => {
      commands.send(kind, { result_id: "r1" });
      model.answer(/** @type {any} */ (model.last(kind)), { error });
    };
    return { model, commands, run };
  };

  it("shows its request's error, and its cancel's, until a later request is sent", () => {
    const { model, commands, run } = setup();
    run("ask", CANCELLED);
    expect(requestError(commands, "ask")).toBe(CANCELLED.message);
    commands.send("recompute", { result_id: "r1" }); // a later request starts: the message goes
    expect(requestError(commands, "ask")).toBeNull();
    expect(requestError(commands, "recompute")).toBeNull(); // running, no answer yet
    model.answer(/** @type {any} */ (model.last("recompute")));
    expect([requestError(commands, "ask"), requestError(commands, "recompute")]).toEqual([null, null]);
    // a failed Apply: its message only
    run("recompute", BAD_TARGET);
    expect([requestError(commands, "ask"), requestError(commands, "recompute")]).toEqual([null, BAD_TARGET.message]);
    // a causal check started after it clears it too
    commands.send("ablation", { result_id: "r1", position: 1 });
    expect(requestError(commands, "recompute")).toBeNull();
  });

  it("a failed cancel of the latest request is that request's message; another box's request is not its", () => {
    const { model, commands, run } = setup();
    const id = commands.send("recompute", { result_id: "r1" });
    run("cancel", { type: "InvalidRequestError", message: "nothing to cancel" });
    model.answer(/** @type {any} */ (model.sent.find((m) => m.id === id)));
    expect(requestError(commands, "recompute")).toBe("nothing to cancel");
    expect(requestError(commands, "recompute", (sent) => sent.id !== id)).toBeNull();
  });
});

describe("one red line at a time in the widget", () => {
  /** The full view with a live fake kernel. */
  function mount() {
    const el = document.createElement("div");
    document.body.appendChild(el);
    const state = structuredClone(golden.state);
    state.view = "heatmap";
    state.interactive = true;
    const model = kernelModel(state);
    render({ model, el });
    const shown = () =>
      [...el.querySelectorAll("[role=alert]")].filter((e) => !(/** @type {HTMLElement} */ (e).hidden) && e.textContent).map((e) => e.textContent);
    return { el, model, shown };
  }
  const q = (/** @type {Element} */ el, /** @type {string} */ sel) => /** @type {HTMLElement} */ (el.querySelector(sel));

  it("a cancelled question's message goes with a later Apply; a failed Apply is the only one", () => {
    const { el, model, shown } = mount();
    const prompt = /** @type {HTMLTextAreaElement} */ (q(el, ".iglens-controls textarea[name=prompt]"));
    prompt.value = "w9 w11";
    /** @type {HTMLFormElement} */ (q(el, ".iglens-controls form[data-prompt-box]")).requestSubmit();
    model.answer(/** @type {any} */ (model.last("ask")), { error: CANCELLED });
    expect(shown()).toEqual([CANCELLED.message]);
    const apply = q(el, ".iglens-controls .iglens-apply");
    apply.click(); // an Apply that succeeds
    model.answer(/** @type {any} */ (model.last("recompute")));
    expect(shown()).toEqual([]);
    /** @type {HTMLInputElement} */ (q(el, ".iglens-controls [name=target]")).value = "w1 w2";
    apply.click(); // and one that fails
    model.answer(/** @type {any} */ (model.last("recompute")), { error: BAD_TARGET });
    expect(shown()).toEqual([BAD_TARGET.message]);
  });
});
