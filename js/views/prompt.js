/**
 * The prompt box and the "compare with…" box (shown when the widget is `interactive`; live
 * only while a kernel answers, else disabled with the kernel note).
 *
 * The prompt box, `<form data-prompt-box>` with a `<textarea name="prompt">`, an answer length
 * `<input name="max_new_tokens">` (tokens; empty: as the shown request) and a submit button
 * `[data-action="ask"]`, sends the `ask` command (`{result_id, prompt[, max_new_tokens]}`):
 * Python answers with a new `result` for the question, its answer generated as the shown
 * request does or as long as the length field says. While
 * it runs the box shows Python's `progress` and a Cancel button (`[data-action="cancel-ask"]`,
 * the `cancel` command naming it); an error (a long prompt, a cancelled question) shows in the
 * box's error line and the old result stays.
 *
 * The compare box, `<form data-compare-box>` with an `<input name="versus">` and
 * `[data-action="compare"]`, sends `recompute` with the shown result's own `controls` and
 * `versus` (the text; empty drops the comparison): the student view's curve then draws the
 * two answers. Typed text is sent as typed and never inserted as markup.
 * @module views/prompt
 */
import { h, listen } from "../lib/dom.js";
import { kernelNote, requestError, latestRequestSeq } from "./kernel.js";

import { MAX_ASK_NEW_TOKENS, MAX_PROMPT_LENGTH } from "../model/protocol.js";

/** The longest prompt Python takes and the longest answer an ask may ask for (iglens_viz.protocol.commands). */
export { MAX_ASK_NEW_TOKENS, MAX_PROMPT_LENGTH };

/**
 * Check a prompt before sending: "" when it can go, else what is wrong (the same rules as
 * Python's, so the page says it at once).
 * @param {string} text
 */
export function promptProblem(text) {
  if (!text.trim()) return "Type a question first.";
  if (text.length > MAX_PROMPT_LENGTH) return `The question is ${text.length} characters long; at most ${MAX_PROMPT_LENGTH}: shorten it.`;
  return "";
}

/**
 * The answer length typed in the box: null when empty (as the shown request), else the number,
 * or a string saying what is wrong.
 * @param {string} text
 * @returns {number | null | string}
 */
export function answerLength(text) {
  if (!text.trim()) return null;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > MAX_ASK_NEW_TOKENS) {
    return `The answer length is a whole number of tokens, 1 \u2026 ${MAX_ASK_NEW_TOKENS} (empty: as now).`;
  }
  return n;
}

/**
 * @param {import("./context.js").Context} ctx
 * @param {{placeholder?: string, label?: string, hideStatic?: boolean}} [options] `hideStatic`: hidden on an
 *   exported page (no kernel can ever answer there; the student view keeps its room for the lesson)
 */
export function createPromptBox(ctx, options = {}) {
  const prompt = h("textarea", {
    name: "prompt",
    class: "iglens-input iglens-prompt-input",
    rows: 1,
    maxlength: MAX_PROMPT_LENGTH + 1, // one over: a paste that is too long says so instead of being cut
    placeholder: options.placeholder ?? "Ask the model a new question\u2026",
    spellcheck: "false",
    "aria-label": options.label ?? "a new question for the model",
  });
  const length = h("input", {
    name: "max_new_tokens",
    type: "number",
    class: "iglens-input iglens-prompt-length",
    min: 1,
    max: MAX_ASK_NEW_TOKENS,
    step: 1,
    inputmode: "numeric",
    title: "the answer's length in tokens (empty: as now)",
    "aria-label": "the answer's length in tokens",
  });
  const ask = h("button", { type: "submit", class: "iglens-ask-button iglens-ask", "data-action": "ask", text: "Ask" });
  const progress = h("progress", { class: "iglens-prompt-progress", max: 1, "aria-label": "progress of the question" });
  progress.hidden = true;
  const cancel = h("button", { type: "button", class: "iglens-cancel", "data-action": "cancel-ask", text: "Cancel" });
  cancel.hidden = true;
  const status = h("span", { class: "iglens-prompt-status", role: "status", "aria-live": "polite" });
  const error = h("div", { class: "iglens-prompt-error", role: "alert" });
  error.hidden = true;
  const note = h("div", { class: "iglens-prompt-note iglens-muted", role: "status" });
  note.hidden = true;
  /** A problem found before sending, and the latest request then (a later one, any box's, clears it). */
  let local = { text: "", seq: 0 };
  const form = h("form", { class: "iglens-prompt-box", "data-prompt-box": "", novalidate: true }, prompt, length, ask, status, progress, cancel);
  const el = h("div", { class: "iglens-prompt" }, form, note, error);

  const busyNow = () => ctx.running()?.command === "ask" || !!ctx.commands.pending("ask");

  function sync() {
    el.hidden = !ctx.model.get("interactive") || (!!options.hideStatic && !!ctx.model.standalone);
    const live = ctx.live();
    const busy = busyNow();
    const running = ctx.running();
    prompt.disabled = !live;
    length.disabled = !live;
    const asked = Number(ctx.result?.request?.max_new_tokens);
    length.placeholder = asked > 0 ? `${asked} tokens` : "tokens";
    ask.disabled = !live || busy || !!running;
    ask.title = !live ? kernelNote(ctx) : running && !busy ? `the ${running.command} is running: wait for it` : "";
    note.hidden = live;
    note.textContent = live ? "" : kernelNote(ctx);
    form.setAttribute("aria-busy", busy ? "true" : "false");
    form.classList.toggle("iglens-busy", busy);
    const p = Number(ctx.model.get("progress"));
    const known = busy && Number.isFinite(p) && p >= 0;
    progress.hidden = !busy;
    if (known) progress.value = p;
    else progress.removeAttribute("value");
    cancel.hidden = !busy || !live;
    if (!status.getAttribute("data-cancelling") || !busy) {
      status.removeAttribute("data-cancelling");
      status.textContent = busy ? (known ? `Thinking\u2026 ${Math.round(100 * p)}%` : "Thinking\u2026") : "";
    }
    const own = local.text && local.seq === latestRequestSeq(ctx.commands) ? local.text : "";
    const msg = own || requestError(ctx.commands, "ask");
    error.hidden = !msg;
    error.textContent = msg ?? "";
  }

  function submit() {
    if (!ctx.live() || busyNow() || ctx.running()) return;
    const tokens = answerLength(length.value);
    local = { text: promptProblem(prompt.value) || (typeof tokens === "string" ? tokens : ""), seq: latestRequestSeq(ctx.commands) };
    if (!local.text) {
      const fields = { result_id: ctx.result ? ctx.result.id : "", prompt: prompt.value };
      ctx.command("ask", tokens === null ? fields : { ...fields, max_new_tokens: tokens });
    }
    sync();
  }

  const offs = [
    listen(form, "submit", (e) => {
      e.preventDefault();
      submit();
    }),
    listen(length, "keydown", (/** @type {KeyboardEvent} */ e) => e.stopPropagation()),
    listen(prompt, "keydown", (/** @type {KeyboardEvent} */ e) => {
      e.stopPropagation(); // typing must not drive the strip's or the walk's keys
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault(); // Enter asks; Shift+Enter is a new line
        submit();
      }
    }),
    listen(cancel, "click", () => {
      const id = ctx.running()?.command === "ask" ? ctx.running()?.id : ctx.commands.pending("ask")?.id;
      if (!id) return;
      ctx.command("cancel", { request_id: id });
      status.setAttribute("data-cancelling", "true");
      status.textContent = "Cancelling\u2026";
    }),
    ...follow(ctx, sync),
  ];
  sync();
  return {
    el,
    form,
    sync,
    destroy() {
      offs.forEach((off) => off());
    },
  };
}

/**
 * The "compare with…" box of the student view: the answer the class expects, drawn beside
 * the model's (the request's `versus`). Hidden without a first answer, and on an exported page.
 * @param {import("./context.js").Context} ctx
 */
export function createCompareBox(ctx) {
  const versus = h("input", {
    name: "versus",
    type: "text",
    class: "iglens-input iglens-versus-input",
    placeholder: "the answer the class expects\u2026",
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": "an answer to compare with",
  });
  const go = h("button", { type: "submit", class: "iglens-ask-button iglens-versus-button", "data-action": "compare", text: "Compare" });
  const status = h("span", { class: "iglens-prompt-status", role: "status", "aria-live": "polite" });
  const error = h("div", { class: "iglens-prompt-error iglens-versus-error", role: "alert" });
  error.hidden = true;
  const form = h(
    "form",
    { class: "iglens-versus-box", "data-compare-box": "", novalidate: true },
    h("span", { class: "iglens-lesson-key", text: "Compare with" }),
    versus,
    go,
    status,
  );
  const el = h("div", { class: "iglens-versus-with" }, form, error);
  /** The ids of the recomputes this box sent. */
  const mine = new Set();
  const isMine = (/** @type {import("../model/commands.js").Sent} */ s) => mine.has(s.id);
  const busyNow = () => {
    const sent = ctx.commands.pending("recompute");
    return !!sent && isMine(sent);
  };

  function sync() {
    const r = ctx.result;
    // a comparison needs a first answer: the model's (generated or given)
    el.hidden = !ctx.model.get("interactive") || !!ctx.model.standalone || !r || !r.answer;
    const live = ctx.live();
    const busy = busyNow();
    versus.disabled = !live;
    go.disabled = !live || busy || !!ctx.running();
    go.title = live ? "" : kernelNote(ctx);
    status.textContent = busy ? "Computing\u2026" : "";
    const msg = requestError(ctx.commands, "recompute", isMine);
    error.hidden = !msg;
    error.textContent = msg ?? "";
  }

  /** The box shows the shown result's comparison (a new result: its own). */
  function prefill() {
    const r = ctx.result;
    if (r && document.activeElement !== versus) versus.value = r.versus ? r.versus.text : "";
    sync();
  }

  const offs = [
    listen(form, "submit", (e) => {
      e.preventDefault();
      const r = ctx.result;
      if (!r || !ctx.live() || busyNow() || ctx.running()) return;
      const id = ctx.command("recompute", { result_id: r.id, controls: { ...r.controls }, versus: versus.value.trim() ? versus.value : null });
      if (id) mine.add(id);
      sync();
    }),
    listen(versus, "keydown", (e) => e.stopPropagation()),
    ...follow(ctx, sync),
  ];
  prefill();
  return {
    el,
    form,
    sync,
    prefill,
    destroy() {
      offs.forEach((off) => off());
    },
  };
}

/**
 * Call `sync` when what a box shows may change: a command answered or sent, the kernel's
 * state, and the traits `running`, `progress`, `interactive`.
 * @param {import("./context.js").Context} ctx @param {() => void} sync
 * @returns {Array<() => void>}
 */
function follow(ctx, sync) {
  const traits = ["change:running", "change:progress", "change:interactive"];
  for (const t of traits) ctx.model.on(t, sync);
  const off = ctx.commands.listen(() => sync());
  return [off, () => traits.forEach((t) => ctx.model.off(t, sync))];
}
