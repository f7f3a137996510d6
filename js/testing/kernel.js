/**
 * A fake kernel for the view tests: the in-memory model (js/standalone.js) without its
 * `standalone` mark, whose `send` records each command, and that can emit `msg:custom`
 * envelopes the way anywidget hands Python's `widget.send(...)` to the page.
 * @module testing/kernel
 */
import { createModel } from "../standalone.js";

/**
 * @typedef {ReturnType<typeof createModel> & {
 *   sent: Record<string, any>[],
 *   send: (msg: any) => void,
 *   emit: (msg: any) => void,
 *   answer: (msg: Record<string, any>, o?: {ok?: boolean, error?: {type: string, message: string}|null, result_id?: string}) => void,
 *   commands: (kind: string) => Record<string, any>[],
 *   last: (kind: string) => Record<string, any>|undefined,
 *   listeners: () => number,
 * }} KernelModel
 */

/**
 * @param {Record<string, any>} state the traits
 * @param {{hello?: "answer"|"silent"}} [o] answer `hello` at once (default), or never (no kernel)
 * @returns {KernelModel}
 */
export function kernelModel(state, o = {}) {
  const base = createModel(state);
  /** @type {Set<Function>} */
  const custom = new Set();
  /** @type {Record<string, any>[]} */
  const sent = [];
  const on = base.on;
  const off = base.off;
  const model = /** @type {KernelModel} */ (
    Object.assign(base, {
      standalone: false,
      sent,
      on(/** @type {string} */ event, /** @type {Function} */ cb) {
        if (event === "msg:custom") custom.add(cb);
        else on(event, cb);
      },
      off(/** @type {string} */ event, /** @type {Function|undefined} */ cb = undefined) {
        if (event === "msg:custom") {
          if (cb) custom.delete(cb);
          else custom.clear();
        } else off(event, cb);
      },
      send(/** @type {any} */ msg) {
        sent.push(msg);
        if (msg.kind === "hello" && (o.hello ?? "answer") === "answer") model.answer(msg);
      },
      emit(/** @type {any} */ msg) {
        for (const fn of [...custom]) fn(msg, []);
      },
      answer(/** @type {Record<string, any>} */ msg, /** @type {any} */ a = {}) {
        const ok = a.ok ?? !a.error;
        model.emit({
          kind: "answer",
          request_id: msg.id,
          command: msg.kind,
          ok,
          result_id: a.result_id ?? model.get("result")?.id ?? "",
          error: a.error ?? null,
        });
      },
      commands: (/** @type {string} */ kind) => sent.filter((m) => m.kind === kind),
      last: (/** @type {string} */ kind) => sent.filter((m) => m.kind === kind).at(-1),
      listeners: () => custom.size,
    })
  );
  return model;
}
