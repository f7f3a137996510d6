/**
 * The page's commands to Python and Python's answers (docs/widget-protocol.md, "Commands and
 * answers"), in one place: sending (`model.send({kind, id, ...fields})`), the bookkeeping of
 * what this view asked (the latest request of each kind; an older one is superseded), the
 * answer listener (`msg:custom` envelopes; one this view did not send, or has superseded, is
 * dropped) and the kernel state (`hello` answered → "live"; no answer within the timeout →
 * "none"; a model that cannot send, the exported page's shim, → "none" at once). No DOM.
 * @module commands
 */

/** How long the page waits for the answer to `hello` before it says there is no kernel. */
export const HELLO_TIMEOUT_MS = 4000;

import { MAX_ID_LENGTH } from "./protocol.js";
import { isObject } from "./answer-trait.js";

/** The longest request id Python accepts (iglens_viz.protocol.commands, via js/model/protocol.js). */
export { MAX_ID_LENGTH };

/**
 * @typedef {import("./protocol.js").CommandKind} CommandKind
 * @typedef {"unknown"|"live"|"none"} KernelState
 *
 * @typedef {object} AnswerError
 * @property {string} type "InvalidRequestError", "RecomputeCancelled", …
 * @property {string} message what went wrong and what would work
 *
 * @typedef {object} Answer one answer envelope, read
 * @property {string} requestId the command's id
 * @property {string} command the command's kind
 * @property {boolean} ok
 * @property {string} resultId the id of the result shown after the command
 * @property {AnswerError|null} error
 *
 * @typedef {object} Sent one command this view sent
 * @property {string} id
 * @property {CommandKind} kind
 * @property {Record<string, any>} fields what it carried beside `kind` and `id`
 * @property {number} seq its place among this view's commands (1, 2, …)
 * @property {Answer|null} answer Python's envelope, null while it is pending
 *
 * @typedef {{type: "answer", sent: Sent, answer: Answer} | {type: "sent", sent: Sent} | {type: "kernel", state: KernelState}} CommandEvent
 *
 * @typedef {object} Commands
 * @property {(kind: CommandKind, fields?: Record<string, any>) => string|null} send send a command;
 *   its id, or null when this model cannot send (no kernel)
 * @property {(kind: CommandKind) => Sent|null} latest the latest command of a kind this view sent
 * @property {(kind: CommandKind) => Sent|null} pending the latest of a kind while it has no answer
 * @property {() => KernelState} kernel
 * @property {(fn: (event: CommandEvent) => void) => () => void} listen be told of answers, sends and
 *   kernel changes; returns the unsubscribe
 * @property {() => void} start send `hello` (or, without a way to send, say "none" at once)
 * @property {() => void} dispose stop listening and waiting
 */

/**
 * Read an answer envelope; null when the message is not one (another kind of message, or a
 * malformed envelope: dropped).
 * @param {unknown} msg
 * @returns {Answer|null}
 */
export function readAnswer(msg) {
  if (!isObject(msg) || msg.kind !== "answer") return null;
  const { request_id: requestId, command, ok, result_id: resultId, error } = msg;
  if (typeof requestId !== "string" || typeof command !== "string" || typeof ok !== "boolean") return null;
  if (resultId !== undefined && resultId !== null && typeof resultId !== "string") return null;
  /** @type {AnswerError|null} */
  let err = null;
  if (error !== null && error !== undefined) {
    if (!isObject(error)) return null;
    err = {
      type: typeof error.type === "string" ? error.type : "Error",
      message: typeof error.message === "string" && error.message ? error.message : "the command failed",
    };
  }
  if (!ok && !err) err = { type: "Error", message: "the command failed" };
  return { requestId, command, ok, resultId: resultId ?? "", error: err };
}

/** A short random prefix for this view's ids (so two views of one model never share one). */
function randomPrefix() {
  const c = /** @type {any} */ (globalThis).crypto;
  if (c && typeof c.getRandomValues === "function") {
    const a = new Uint32Array(2);
    c.getRandomValues(a);
    return Array.from(a, (v) => v.toString(36)).join("");
  }
  return Math.random().toString(36).slice(2, 12) || "v";
}

/**
 * The command channel of one rendered view.
 * @param {import("../views/context.js").Model} model
 * @param {{timeoutMs?: number, prefix?: string}} [options]
 * @returns {Commands}
 */
export function createCommands(model, options = {}) {
  const timeoutMs = options.timeoutMs ?? HELLO_TIMEOUT_MS;
  const prefix = (options.prefix ?? randomPrefix()).slice(0, 40);
  const canSend = !model.standalone && typeof model.send === "function";
  /** @type {Map<CommandKind, Sent>} */
  const latestByKind = new Map();
  /** @type {Set<(event: CommandEvent) => void>} */
  const listeners = new Set();
  /** @type {KernelState} */
  let kernel = "unknown";
  let counter = 0;
  /** @type {ReturnType<typeof setTimeout>|null} */
  let timer = null;
  let disposed = false;

  const emit = (/** @type {CommandEvent} */ event) => {
    for (const fn of [...listeners]) fn(event);
  };
  const setKernel = (/** @type {KernelState} */ state) => {
    if (state === kernel) return;
    kernel = state;
    if (state === "live" && timer !== null) {
      clearTimeout(timer);
      timer = null;
    }
    emit({ type: "kernel", state });
  };

  const onMessage = (/** @type {unknown} */ msg) => {
    if (disposed) return;
    const answer = readAnswer(msg);
    if (!answer) return;
    // Somebody answered: a kernel is listening (even when the answer is another view's).
    setKernel("live");
    const sent = [...latestByKind.values()].find((s) => s.id === answer.requestId);
    // not ours, or superseded by a newer command of its kind, or answered already: dropped
    if (!sent || sent.answer) return;
    sent.answer = answer;
    emit({ type: "answer", sent, answer });
  };
  model.on("msg:custom", onMessage);

  /** @type {Commands} */
  const commands = {
    send(kind, fields = {}) {
      if (!canSend || disposed) return null;
      counter += 1;
      const id = `${prefix}-${counter}`.slice(0, MAX_ID_LENGTH);
      /** @type {Sent} */
      const sent = { id, kind, fields: { ...fields }, seq: counter, answer: null };
      const previous = latestByKind.get(kind);
      latestByKind.set(kind, sent); // before sending: an answer may come back at once
      try {
        /** @type {(msg: any) => void} */ (model.send)({ ...fields, kind, id });
      } catch {
        // a closed comm: nobody will answer
        if (previous) latestByKind.set(kind, previous);
        else latestByKind.delete(kind);
        return null;
      }
      emit({ type: "sent", sent });
      return id;
    },
    latest: (kind) => latestByKind.get(kind) ?? null,
    pending(kind) {
      const s = latestByKind.get(kind);
      return s && !s.answer ? s : null;
    },
    kernel: () => kernel,
    listen(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    start() {
      if (disposed || kernel !== "unknown" || timer !== null) return;
      if (!canSend) {
        setKernel("none");
        return;
      }
      timer = setTimeout(() => {
        timer = null;
        if (kernel === "unknown") setKernel("none");
      }, timeoutMs);
      commands.send("hello");
    },
    dispose() {
      disposed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      listeners.clear();
      model.off("msg:custom", onMessage);
    },
  };
  return commands;
}

/**
 * The `running` trait: the command running in Python's background thread, or null when
 * idle (`{}`) or when the value is not of the form `{id, command}`.
 * @param {unknown} raw
 * @returns {{id: string, command: string}|null}
 */
export function readRunning(raw) {
  if (!isObject(raw) || typeof raw.id !== "string" || !raw.id || typeof raw.command !== "string") return null;
  return { id: raw.id, command: raw.command };
}
