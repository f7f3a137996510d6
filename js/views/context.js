/**
 * The shared state of one rendered view: the model, the decoded result, the theme, and
 * the selection/hover actions every sub-view uses (LIT's split: click selects and locks,
 * hover previews; a new selection clears the preview).
 * @module views/context
 */
import { decodeResult } from "../result.js";

/**
 * @typedef {object} Model the anywidget model surface the front end uses
 * @property {(name: string) => any} get
 * @property {(name: string, value: any) => void} set
 * @property {() => void} save_changes
 * @property {(event: string, cb: (...args: any[]) => void) => void} on
 * @property {(event: string, cb?: (...args: any[]) => void) => void} off
 * @property {(msg: any) => void} [send]
 */

/**
 * @typedef {object} Context
 * @property {Model} model
 * @property {HTMLElement} root
 * @property {import("../result.js").Result|null} result
 * @property {string|null} resultError why the result could not be decoded
 * @property {"light"|"dark"} theme
 * @property {() => number} selected  valid selected position or -1
 * @property {() => number} hovered   valid hovered position or -1
 * @property {() => number} shown     the position the detail shows: hovered, else selected
 * @property {(i: number) => void} select  set `selected` (clamped; -1 clears) and clear the preview
 * @property {(i: number) => void} hover   set `hovered` (-1 clears); saved lazily
 * @property {(name: string, value: any) => void} setTrait set + save_changes
 * @property {() => void} flush send pending lazy saves
 * @property {() => void} dispose
 */

/**
 * @param {Model} model
 * @param {HTMLElement} root
 * @returns {Context}
 */
export function createContext(model, root) {
  /** @type {ReturnType<typeof setTimeout>|null} */
  let timer = null;
  const valid = (/** @type {any} */ v) => {
    const T = ctx.result ? ctx.result.T : 0;
    const i = Number(v);
    return Number.isInteger(i) && i >= 0 && i < T ? i : -1;
  };
  const flush = () => {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    try { model.save_changes(); } catch { /* a closed comm: nothing to sync */ }
  };
  /** @type {Context} */
  const ctx = {
    model,
    root,
    result: null,
    resultError: null,
    theme: "light",
    selected: () => valid(model.get("selected")),
    hovered: () => valid(model.get("hovered")),
    shown: () => { const hv = ctx.hovered(); return hv >= 0 ? hv : ctx.selected(); },
    select(i) {
      const T = ctx.result ? ctx.result.T : 0;
      const next = i < 0 || !T ? -1 : Math.max(0, Math.min(T - 1, Math.trunc(i)));
      // selection first: with the mouse over the clicked item, hovered === next already,
      // so the detail panel re-renders once, not twice
      if (model.get("selected") !== next) model.set("selected", next);
      if (model.get("hovered") !== -1) model.set("hovered", -1);
      flush();
    },
    hover(i) {
      const next = valid(i);
      if (model.get("hovered") === next) return;
      model.set("hovered", next);
      if (timer === null) timer = setTimeout(flush, 120);
    },
    setTrait(name, value) {
      model.set(name, value);
      flush();
    },
    flush,
    dispose() { if (timer !== null) { clearTimeout(timer); timer = null; } },
  };
  ctx.result = loadResult(ctx, model.get("result"));
  return ctx;
}

/**
 * Decode the result trait, recording a decoding error instead of throwing.
 * @param {Context} ctx @param {any} raw
 */
export function loadResult(ctx, raw) {
  try {
    ctx.resultError = null;
    return decodeResult(raw);
  } catch (err) {
    ctx.resultError = err instanceof Error ? err.message : String(err);
    return null;
  }
}
