/**
 * What the views that ask Python for work (the recompute controls, the prompt box and the
 * compare box, the causal check, the interior path, the lazy head split) say when they cannot ask: the widget is interactive
 * but no kernel answers (a static page of a notebook's saved state), or not yet; and which
 * request's error a box's error line shows (one at a time: a message belongs to its request).
 * @module views/kernel
 */
/** No kernel answered `hello`: the page is static. */
export const NO_KERNEL_NOTE = "Recompute, new questions, the causal check, interior paths and head shares need a running Python kernel: run the notebook.";

/** The `hello` is on its way. */
export const CONNECTING_NOTE = "connecting to the kernel\u2026";

/**
 * Why an interactive view cannot ask Python now ("" when it can, and "" when the widget is not
 * interactive: each view keeps its own static hint then).
 * @param {import("./context.js").Context} ctx
 */
export function kernelNote(ctx) {
  if (!ctx.model.get("interactive")) return "";
  const state = ctx.commands.kernel();
  return state === "live" ? "" : state === "unknown" ? CONNECTING_NOTE : NO_KERNEL_NOTE;
}

/**
 * The requests a person sends that change what the widget shows: a message about one belongs
 * to it, and goes once a later one is sent (it started; it will have its own answer).
 * @type {import("../model/commands.js").CommandKind[]}
 */
export const USER_REQUESTS = ["recompute", "ask", "ablation", "gates"];

/**
 * The seq of the latest request of USER_REQUESTS this view sent (0 before any).
 * @param {import("../model/commands.js").Commands} commands
 */
export function latestRequestSeq(commands) {
  return Math.max(0, ...USER_REQUESTS.map((k) => commands.latest(k)?.seq ?? 0));
}

/**
 * The message of a box's error line: the error of the latest request of `kind` when it is the
 * box's (`mine`), or of a cancel sent after it — null when neither failed, and null once a
 * later request of USER_REQUESTS was sent, by this box or another: a message belongs to its
 * request, and the widget shows one at a time ("cancelled" does not stay red through a later
 * Apply that succeeds, and a failed Apply is the only red line).
 * @param {import("../model/commands.js").Commands} commands @param {import("../model/commands.js").CommandKind} kind
 * @param {(sent: import("../model/commands.js").Sent) => boolean} [mine] which of its commands are the box's
 */
export function requestError(commands, kind, mine = () => true) {
  const sent = commands.latest(kind);
  if (!sent || !mine(sent) || latestRequestSeq(commands) > sent.seq) return null;
  if (sent.answer?.error) return sent.answer.error.message;
  const cancel = commands.latest("cancel");
  return cancel?.answer?.error && cancel.seq > sent.seq ? cancel.answer.error.message : null;
}
