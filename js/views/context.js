/**
 * The shared state of one rendered view: the model, the decoded result, the theme, and
 * the selection/hover actions every sub-view uses (LIT's split: click selects and locks,
 * hover previews; a new selection clears the preview).
 * @module views/context
 */
import { decodeResult } from "../model/result.js";
import { readComponentsTrait, mergeComponents } from "../model/component-split.js";
import { readAblationTrait } from "../model/ablation.js";
import { createCommands, readRunning } from "../model/commands.js";

/**
 * @typedef {object} Model the anywidget model surface the front end uses
 * @property {(name: string) => any} get
 * @property {(name: string, value: any) => void} set
 * @property {() => void} save_changes
 * @property {(event: string, cb: (...args: any[]) => void) => void} on
 * @property {(event: string, cb?: (...args: any[]) => void) => void} off
 * @property {(msg: any) => void} [send]
 * @property {boolean} [standalone] the exported page's in-memory model: no kernel behind it
 */

/**
 * @typedef {object} Context
 * @property {Model} model
 * @property {HTMLElement} root
 * @property {import("../model/result.js").Result|null} result
 * @property {string|null} resultError why the result could not be decoded
 * @property {"light"|"dark"} theme
 * @property {{sharesAt: (t: number) => import("../model/component-split.js").Shares|null, positions: number[]}} components
 *   the component split: the `components` trait's positions, else `result.components`
 * @property {string|null} componentsError why the trait could not be read, else why the result's
 *   split could not
 * @property {import("../model/ablation.js").TraitAblation} ablation the `ablation` trait (the causal check
 *   of one position), read against the result
 * @property {{index: number, j: number}} segmentFocus the segment the user picked for position
 *   `index` (index -1: none, the detail shows the onset segment)
 * @property {(i: number, j: number) => void} focusSegment pick segment j for position i (local, not a trait)
 * @property {Set<() => void>} focusListeners called after focusSegment
 * @property {import("../lib/span.js").Span|null} span the span of positions picked in the strip (local, not a trait;
 *   null: none, the answers panel shows the whole answer)
 * @property {(span: import("../lib/span.js").Span|null) => void} setSpan pick a span (null clears it)
 * @property {Set<() => void>} spanListeners called after setSpan changed the span
 * @property {() => number} selected  valid selected position or -1
 * @property {() => number} hovered   valid hovered position or -1
 * @property {() => number} shown     the position the detail shows: hovered, else selected
 * @property {(i: number) => void} select  set `selected` (clamped; -1 clears) and clear the preview
 * @property {(i: number) => void} hover   set `hovered` (-1 clears); saved lazily
 * @property {(name: string, value: any) => void} setTrait set + save_changes
 * @property {import("../model/commands.js").Commands} commands the command channel (sent, answers, kernel state)
 * @property {(kind: import("../model/commands.js").CommandKind, fields?: Record<string, any>) => string|null} command
 *   send a command to Python; its id (null: no kernel to send to)
 * @property {() => boolean} live a Python kernel answers and the widget is interactive: commands can run
 * @property {() => {id: string, command: string}|null} running the command running in Python's background (`running`)
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
    if (timer !== null) {
      clearTimeout(timer);
      timer = null;
    }
    try {
      model.save_changes();
    } catch {
      /* a closed comm: nothing to sync */
    }
  };
  const commands = createCommands(model);
  /** @type {Context} */
  const ctx = {
    model,
    commands,
    command: (kind, fields) => commands.send(kind, fields),
    live: () => !!model.get("interactive") && commands.kernel() === "live",
    running: () => readRunning(model.get("running")),
    root,
    result: null,
    resultError: null,
    theme: "light",
    components: mergeComponents(null, null),
    componentsError: null,
    ablation: readAblationTrait(null, null),
    segmentFocus: { index: -1, j: -1 },
    focusListeners: new Set(),
    span: null,
    spanListeners: new Set(),
    setSpan(span) {
      const T = ctx.result ? ctx.result.T : 0;
      const clampT = (/** @type {number} */ i) => Math.max(0, Math.min(T - 1, Math.trunc(i)));
      const next = span && T ? { anchor: clampT(span.anchor), end: clampT(span.end) } : null;
      const prev = ctx.span;
      if (prev === next || (prev && next && prev.anchor === next.anchor && prev.end === next.end)) return;
      ctx.span = next;
      for (const fn of [...ctx.spanListeners]) fn();
    },
    focusSegment(i, j) {
      const prev = ctx.segmentFocus;
      if (prev.index === i && prev.j === j) return;
      ctx.segmentFocus = { index: i, j };
      for (const fn of [...ctx.focusListeners]) fn();
    },
    selected: () => valid(model.get("selected")),
    hovered: () => valid(model.get("hovered")),
    shown: () => {
      const hv = ctx.hovered();
      return hv >= 0 ? hv : ctx.selected();
    },
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
    dispose() {
      commands.dispose();
      if (timer !== null) {
        clearTimeout(timer);
        timer = null;
      }
    },
  };
  ctx.result = loadResult(ctx, model.get("result"));
  loadComponents(ctx);
  loadAblation(ctx);
  return ctx;
}

/**
 * Read the `ablation` trait against the current result (a check of another result, by its
 * `result_id`, is not shown).
 * @param {Context} ctx
 */
export function loadAblation(ctx) {
  ctx.ablation = readAblationTrait(ctx.model.get("ablation"), ctx.result);
}

/**
 * Merge the `components` trait with the result's split (the trait wins for the positions it
 * has); a trait made for another result (by its `result_id`) is not shown.
 * @param {Context} ctx
 */
export function loadComponents(ctx) {
  const r = ctx.result;
  const trait = readComponentsTrait(ctx.model.get("components"), r);
  ctx.components = mergeComponents(trait.components, r ? r.components : null);
  ctx.componentsError = trait.error ?? (r ? r.componentsError : null);
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
