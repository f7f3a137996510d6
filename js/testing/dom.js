/**
 * jsdom helpers for the view tests: a do-nothing 2D canvas context (jsdom has no canvas),
 * a mounted widget, and event shortcuts.
 * @module testing/dom
 */
import { render } from "../views/app.js";
import { createModel } from "../standalone.js";
import { makeState } from "./fixture.js";
import { kernelModel } from "./kernel.js";

/** Install a recording fake CanvasRenderingContext2D on HTMLCanvasElement. */
export function installFakeCanvas() {
  /** @type {string[]} */
  const calls = [];
  const make = () =>
    new Proxy(
      {},
      {
        get(target, prop) {
          if (prop in target) return /** @type {any} */ (target)[prop];
          if (prop === "measureText") return (/** @type {string} */ t) => ({ width: 6 * Array.from(String(t)).length });
          if (prop === "createImageData")
            return (/** @type {number} */ w, /** @type {number} */ hh) => ({ width: w, height: hh, data: new Uint8ClampedArray(w * hh * 4) });
          return (/** @type {any[]} */ ...args) => {
            calls.push(String(prop));
            void args;
          };
        },
        set(target, prop, value) {
          /** @type {any} */ (target)[prop] = value;
          return true;
        },
      },
    );
  // @ts-ignore
  HTMLCanvasElement.prototype.getContext = function getContext() {
    // @ts-ignore
    if (!this.__ctx) this.__ctx = make();
    // @ts-ignore
    return this.__ctx;
  };
  return calls;
}

/**
 * Render the widget into a fresh element attached to the document, on a fake kernel that
 * answers `hello` (`kernel: "live"`, the default), one that never answers (`"silent"`), or the
 * exported page's in-memory model (`"standalone"`).
 * @param {Parameters<typeof makeState>[0] & {state?: any, kernel?: "live"|"silent"|"standalone"}} [o]
 */
export function mountWidget(o = {}) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const state = o.state ?? makeState(o);
  const kernel = o.kernel ?? "live";
  const model = kernel === "standalone" ? kernelModelOf(createModel(state)) : kernelModel(state, { hello: kernel === "live" ? "answer" : "silent" });
  const cleanup = render({ model, el });
  return { el, model, cleanup };
}

/**
 * The standalone model typed as a fake kernel's (its `sent` stays empty: it cannot send).
 * @param {ReturnType<typeof createModel>} model
 */
function kernelModelOf(model) {
  return /** @type {import("./kernel.js").KernelModel} */ (Object.assign(model, { sent: [], commands: () => [], last: () => undefined }));
}

/** @param {Element} el @param {string} type @param {Record<string, any>} [init] */
export function fire(el, type, init = {}) {
  const Ctor = type.startsWith("key") ? KeyboardEvent : MouseEvent;
  el.dispatchEvent(new Ctor(type, { bubbles: true, cancelable: true, ...init }));
}
