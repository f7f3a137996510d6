/**
 * The in-page model shim for the static HTML export (docs/widget-protocol.md).
 *
 * The export page inlines the bundle and calls `mount(el, state)`, where `state` holds the
 * widget's traits with every ndarray `buffer` as a base64 string. `mount` decodes the
 * buffers to DataView (what anywidget hands the front end in Jupyter), builds an in-memory
 * model with the same get/set/save_changes/on/off, injects the CSS when given, and renders.
 * @module standalone
 */
import { decodeBase64Buffers } from "./model/codec.js";
import { render } from "./views/app.js";
import { stateDefaults } from "./model/protocol.js";

// Every trait but `result` starts at its default (iglens_viz.protocol.state.STATE, mirrored in
// the generated js/model/protocol.js); a fresh copy per model, so no list or dict is shared.
const defaults = () => {
  const { result: _result, ...rest } = stateDefaults();
  return rest;
};

/**
 * An in-memory model: get / set / save_changes / on / off, marked `standalone` (no kernel
 * behind it: the page knows at once that nobody answers commands, and it has no `send`).
 * `set` notifies `change:<name>` listeners synchronously when the value changes (===).
 * @param {Record<string, any>} [state]
 * @returns {import("./views/context.js").Model & {state: Record<string, any>}}
 */
export function createModel(state = {}) {
  /** @type {Record<string, any>} */
  const values = { ...defaults(), ...state };
  /** @type {Map<string, Set<Function>>} */
  const listeners = new Map();
  const model = {
    state: values,
    get: (/** @type {string} */ name) => values[name],
    set(/** @type {string} */ name, /** @type {any} */ value) {
      if (values[name] === value) return;
      values[name] = value;
      for (const fn of [...(listeners.get(`change:${name}`) ?? [])]) fn(model, value);
      for (const fn of [...(listeners.get("change") ?? [])]) fn(model);
    },
    save_changes() {},
    on(/** @type {string} */ event, /** @type {Function} */ cb) {
      for (const ev of event.split(/\s+/)) {
        if (!listeners.has(ev)) listeners.set(ev, new Set());
        /** @type {Set<Function>} */ (listeners.get(ev)).add(cb);
      }
    },
    off(/** @type {string} */ event, /** @type {Function|undefined} */ cb = undefined) {
      for (const ev of event.split(/\s+/)) {
        if (cb) listeners.get(ev)?.delete(cb);
        else listeners.delete(ev);
      }
    },
    standalone: true,
  };
  return model;
}

/**
 * Inject a stylesheet once per document (or shadow root).
 * @param {HTMLElement} el @param {string} css
 */
export function injectCss(el, css) {
  const root = /** @type {Document|ShadowRoot} */ (el.getRootNode?.() ?? document);
  const host = root instanceof ShadowRoot ? root : document.head;
  if (host.querySelector?.("style[data-iglens-css]")) return;
  const style = document.createElement("style");
  style.setAttribute("data-iglens-css", "");
  style.textContent = css;
  host.appendChild(style);
}

/**
 * Render the widget into `el` from exported state.
 * @param {HTMLElement} el
 * @param {Record<string, any>} state traits; ndarray buffers as base64 strings (DataViews pass through)
 * @param {string|{css?: string, theme?: "light"|"dark"}} [options] the CSS text, or options
 * @returns {{model: ReturnType<typeof createModel>, destroy: () => void}}
 */
export function mount(el, state, options = {}) {
  const opts = typeof options === "string" ? { css: options } : (options ?? {});
  if (opts.css) injectCss(el, opts.css);
  if (opts.theme) el.setAttribute("data-iglens-theme", opts.theme);
  const model = createModel(decodeBase64Buffers(state ?? {}));
  const cleanup = render({ model, el });
  return { model, destroy: cleanup };
}
