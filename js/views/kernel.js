/**
 * What the views that ask Python for work (the recompute controls, the prompt box and the
 * compare box, the causal check, the interior path, the lazy head split) say when they cannot ask: the widget is interactive
 * but no kernel answers (a static page of a notebook's saved state), or not yet.
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
