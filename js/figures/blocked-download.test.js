// @vitest-environment jsdom
// Issue 35: in a frame that blocks downloads (a sandboxed iframe without allow-downloads, as
// Colab's and VS Code's output frames may be), the PNG / SVG export sends the picture's bytes
// to Python (the `save` command), which writes the file, and the page says so.
import { describe, it, expect, beforeAll, afterEach, vi } from "vitest";
import { installFakeCanvas, mountWidget } from "../testing/dom.js";
import { downloadsBlocked } from "./download.js";
import { BLOCKED_NOTE } from "../views/switcher.js";
import { base64ToDataView } from "../model/codec.js";

beforeAll(() => installFakeCanvas());
afterEach(() => {
  document.body.replaceChildren();
  vi.restoreAllMocks();
});

/** Pretend this page runs in an iframe with `sandbox` set to `flags`. @param {string} flags */
function inFrame(flags) {
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", flags);
  vi.spyOn(window, "frameElement", "get").mockReturnValue(frame);
}

const status = (/** @type {Element} */ el) => el.querySelector(".iglens-export-status")?.textContent ?? "";
const settle = () => new Promise((r) => setTimeout(r, 0));

describe("a frame that blocks downloads", () => {
  it("is told apart by its sandbox flags", () => {
    expect(downloadsBlocked()).toBe(false); // a top-level page
    inFrame("allow-scripts allow-same-origin");
    expect(downloadsBlocked()).toBe(true);
    inFrame("allow-scripts allow-downloads");
    expect(downloadsBlocked()).toBe(false);
  });

  it("sends the SVG's bytes to Python and shows where Python saved them", async () => {
    inFrame("allow-scripts allow-same-origin");
    const click = vi.spyOn(HTMLAnchorElement.prototype, "click");
    const { el, model } = mountWidget({ T: 5 });
    /** @type {HTMLElement} */ (el.querySelector("[data-export=svg]")).click();
    for (let i = 0; i < 20 && !model.last("save"); i++) await settle();
    const save = model.last("save");
    expect(save).toBeTruthy();
    expect(click).not.toHaveBeenCalled(); // no download attempted: it would vanish silently
    expect(save?.name).toMatch(/^iglens-[\w.-]+\.svg$/);
    const dv = base64ToDataView(save?.data);
    const text = new TextDecoder().decode(new Uint8Array(dv.buffer, dv.byteOffset, dv.byteLength));
    expect(text.startsWith("<svg") || text.startsWith("<?xml")).toBe(true);
    expect(status(el)).toContain(BLOCKED_NOTE);
    model.answer(/** @type {any} */ (save));
    await settle();
    expect(status(el)).toBe(`${BLOCKED_NOTE} Python saved ${save?.name} in the kernel's working folder`);
  });

  it("downloads as before in a frame that allows it", async () => {
    inFrame("allow-scripts allow-downloads");
    const click = vi.spyOn(HTMLAnchorElement.prototype, "click").mockImplementation(() => {});
    vi.spyOn(URL, "createObjectURL").mockReturnValue("blob:x");
    const { el, model } = mountWidget({ T: 5 });
    /** @type {HTMLElement} */ (el.querySelector("[data-export=svg]")).click();
    for (let i = 0; i < 20 && !click.mock.calls.length; i++) await settle();
    expect(click).toHaveBeenCalledTimes(1);
    expect(model.last("save")).toBeUndefined();
  });
});
