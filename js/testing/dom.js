/**
 * jsdom helpers for the view tests: a do-nothing 2D canvas context (jsdom has no canvas),
 * a mounted widget, and event shortcuts.
 * @module testing/dom
 */
import { render } from "../app.js";
import { createModel } from "../standalone.js";
import { makeState } from "./fixture.js";

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
 * Render the widget into a fresh element attached to the document.
 * @param {Parameters<typeof makeState>[0] & {state?: any}} [o]
 */
export function mountWidget(o = {}) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const model = createModel(o.state ?? makeState(o));
  const cleanup = render({ model, el });
  return { el, model, cleanup };
}

/** @param {Element} el @param {string} type @param {Record<string, any>} [init] */
export function fire(el, type, init = {}) {
  const Ctor = type.startsWith("key") ? KeyboardEvent : MouseEvent;
  el.dispatchEvent(new Ctor(type, { bubbles: true, cancelable: true, ...init }));
}
