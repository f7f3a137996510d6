/**
 * The strip's span of positions: shift-click (from the selected token to the clicked one), a
 * drag across the chips, Shift+←/→ (from the focused token); the span's chips marked; Escape
 * clears it (then, as before, the selection). The span lives in `ctx.span` (local, not a
 * trait); a plain click or arrow key drops it.
 * @module views/strip/span
 */
import { listen } from "../../lib/dom.js";
import { extendSpan, spanBounds } from "../../lib/span.js";

/**
 * @param {import("../context.js").Context} ctx
 * @param {{list: HTMLElement, status: HTMLElement, chips: () => HTMLElement[], indexOf: (t: EventTarget|null) => number,
 *   setFocusIndex: (i: number) => void, show: (chip: HTMLElement) => void}} o `show`: scroll the strip to a chip
 */
export function stripSpan(ctx, o) {
  const { list, status, chips, indexOf, setFocusIndex, show } = o;
  /** A drag across the chips: where the button went down (-1: none), and whether it reached another chip. */
  const drag = { from: -1, moved: false };

  /** Mark the span's chips (the picked span, not the default whole answer) and say it. */
  function update() {
    const b = ctx.span && ctx.result ? spanBounds(ctx.span) : null;
    chips().forEach((chip, i) => {
      const inside = !!b && i >= b.lo && i <= b.hi;
      chip.classList.toggle("iglens-in-span", inside);
      chip.classList.toggle("iglens-span-start", inside && i === b?.lo);
      chip.classList.toggle("iglens-span-end", inside && i === b?.hi);
      if (inside) chip.setAttribute("data-in-span", "");
      else chip.removeAttribute("data-in-span");
    });
    status.textContent = b ? `Span ${b.lo}\u2013${b.hi} selected (${b.hi - b.lo + 1} positions): its ledger is under the main view. Escape clears it.` : "";
  }

  /** Shift+←/→: extend the span from the focused token (its anchor), the focus moving with its end. @param {number} step @param {number} focused */
  function extendByKey(step, focused) {
    const r = ctx.result;
    if (!r || focused < 0) return;
    const span = extendSpan(ctx.span, focused, step, r.T);
    if (ctx.selected() !== span.anchor) ctx.select(span.anchor);
    ctx.setSpan(span);
    setFocusIndex(span.end);
    const chip = chips()[span.end];
    chip?.focus({ preventScroll: true });
    if (chip) show(chip);
  }

  /**
   * A click on the strip: true when it was the span's (the end of a drag, a shift-click).
   * @param {MouseEvent} e @param {number} i the clicked chip, -1 for none
   */
  function click(e, i) {
    if (drag.moved) {
      drag.moved = false; // the click that ends a drag keeps its span
      return true;
    }
    if (i < 0 || !e.shiftKey || ctx.selected() < 0) return false;
    // from the selected token to the clicked one: the selection stays the anchor
    ctx.setSpan({ anchor: ctx.selected(), end: i });
    setFocusIndex(i);
    return true;
  }

  /**
   * A key on the strip: true when it was the span's (Escape with a span, Shift+←/→).
   * @param {KeyboardEvent} e @param {number} cur the selected (else focused) token
   */
  function key(e, cur) {
    if (e.key === "Escape" && ctx.span) {
      ctx.setSpan(null);
    } else if (e.shiftKey && (e.key === "ArrowLeft" || e.key === "ArrowRight")) {
      const focused = indexOf(e.target);
      extendByKey(e.key === "ArrowRight" ? 1 : -1, focused >= 0 ? focused : cur);
    } else return false;
    e.preventDefault();
    e.stopPropagation();
    return true;
  }

  const offs = [
    listen(list, "mousedown", (e) => {
      drag.from = e.button === 0 && !e.shiftKey ? indexOf(e.target) : -1;
      drag.moved = false;
    }),
    listen(list, "mouseover", (e) => {
      const i = indexOf(e.target);
      if (i < 0 || drag.from < 0 || i === drag.from || !(e.buttons & 1)) return;
      // a drag across tokens: a span from where it started
      drag.moved = true;
      if (ctx.selected() !== drag.from) ctx.select(drag.from);
      ctx.setSpan({ anchor: drag.from, end: i });
    }),
    listen(typeof document !== "undefined" ? document : list, "mouseup", () => {
      drag.from = -1;
    }),
  ];
  return {
    update,
    click,
    key,
    destroy() {
      offs.forEach((off) => off());
    },
  };
}
