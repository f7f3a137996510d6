/**
 * Tiny DOM helpers. Strings always become text nodes: there is no path from data to HTML
 * parsing in this bundle (no innerHTML, insertAdjacentHTML, outerHTML, document.write).
 * @module dom
 */

import { boxRows, wholeRows } from "./layout.js";

export const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * @typedef {Record<string, string|number|boolean|null|undefined>} Attrs
 * `class` sets className; `text` sets textContent; `style` may be a string; data-* and
 * aria-* go through setAttribute; `false`/null/undefined skip the attribute.
 */

/** @param {Element} el @param {Attrs} attrs */
function applyAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === "text") el.textContent = String(v);
    else if (k === "class") el.setAttribute("class", String(v));
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

/**
 * @param {(Node|string|number|null|undefined|false)[]} children
 * @param {Element} el
 */
function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/**
 * Create an HTML element.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...(Node|string|number|null|undefined|false)} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  applyAttrs(el, attrs);
  append(el, children);
  return el;
}

/**
 * Create an SVG element.
 * @param {string} tag
 * @param {Attrs} [attrs]
 * @param {...(Node|string|number|null|undefined|false)} children
 * @returns {SVGElement}
 */
export function s(tag, attrs = {}, ...children) {
  const el = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag));
  applyAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Remove every child. @param {Node} el */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/**
 * Register a DOM listener and return its remover.
 * @param {EventTarget} target @param {string} type @param {(e: any) => void} fn
 * @param {AddEventListenerOptions|boolean} [opts]
 */
export function listen(target, type, fn, opts) {
  target.addEventListener(type, fn, opts);
  return () => target.removeEventListener(type, fn, opts);
}

/**
 * Scroll `container` (not the page) so that `child` is visible.
 * @param {HTMLElement} container @param {HTMLElement} child @param {number} [margin]
 */
export function scrollIntoContainer(container, child, margin = 6) {
  const c = container.getBoundingClientRect();
  const r = child.getBoundingClientRect();
  if (r.top < c.top + margin) container.scrollTop -= c.top + margin - r.top;
  else if (r.bottom > c.bottom - margin) container.scrollTop += r.bottom - (c.bottom - margin);
}

/**
 * Call `fn` in the frame after `el` changes size (a ResizeObserver; nothing where there is
 * none). Deferred: `fn` may size the observed box itself without a resize loop.
 * @param {Element} el @param {() => void} fn
 * @returns {() => void} stop
 */
export function onResize(el, fn) {
  if (typeof ResizeObserver !== "function") return () => {};
  let raf = 0;
  const ro = new ResizeObserver(() => {
    if (!raf) raf = requestAnimationFrame(() => ((raf = 0), fn()));
  });
  ro.observe(el);
  return () => {
    ro.disconnect();
    if (raf) cancelAnimationFrame(raf);
  };
}

/**
 * Scroll `box` (not the page) to show `child` with whole lines only: the box's children laid
 * out in lines (layout.js's boxRows), its scroll offset at a line and its height (set inline,
 * never over its CSS max-height) a whole number of lines, so that no line is cut at either
 * edge (a projector shows no half tokens). Without `child`, the first line shown now stays
 * first. Nothing is set while everything fits, or while the box is not laid out.
 * @param {HTMLElement} box a scrolling box with a max-height @param {Element|null} [child]
 */
export function showWholeLines(box, child = null) {
  const before = box.scrollTop;
  box.style.height = "";
  const cs = getComputedStyle(box);
  const maxH = parseFloat(cs.maxHeight);
  const frame = box.offsetHeight - box.clientHeight; // borders (and a horizontal scrollbar)
  const padTop = parseFloat(cs.paddingTop) || 0;
  const padBottom = parseFloat(cs.paddingBottom) || 0;
  const room = cs.boxSizing === "border-box" ? maxH - frame : maxH + padTop + padBottom;
  if (!Number.isFinite(room) || !box.clientHeight || box.scrollHeight <= room + 0.5) return;
  const origin = box.getBoundingClientRect().top + box.clientTop - box.scrollTop;
  const rows = boxRows(
    Array.from(box.children, (c) => {
      const q = c.getBoundingClientRect();
      return { top: q.top - origin, bottom: q.bottom - origin };
    }),
  );
  const at = (/** @type {number} */ y) =>
    Math.max(
      0,
      rows.findIndex((r) => r.bottom > y),
    );
  const now = at(before + 0.5);
  const q = child?.getBoundingClientRect();
  const want = q && q.bottom > q.top ? at(q.top - origin + 0.5) : now;
  const win = wholeRows(rows, want, now, { end: box.scrollHeight, padTop, padBottom, room });
  if (!win) return;
  const inner = win.bottom - win.top;
  box.style.height = `${cs.boxSizing === "border-box" ? inner + frame : inner - padTop - padBottom}px`;
  box.scrollTop = win.top;
}

let uid = 0;
/** A document-unique id prefix (for SVG pattern ids). @param {string} name */
export const uniqueId = (name) => `iglens-${name}-${++uid}`;

/**
 * Cut text to fit a width on a canvas, with an ellipsis.
 * @param {CanvasRenderingContext2D} c @param {string} text @param {number} maxW
 * @returns {string}
 */
export function fitText(c, text, maxW) {
  if (c.measureText(text).width <= maxW) return text;
  const chars = Array.from(text);
  let lo = 0,
    hi = chars.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (c.measureText(chars.slice(0, mid).join("") + "\u2026").width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return chars.slice(0, lo).join("") + "\u2026";
}

/**
 * A tooltip's key/value line (both as text).
 * @param {string} k @param {string} v
 * @returns {HTMLElement}
 */
export function keyValue(k, v) {
  return h("div", { class: "iglens-tt-row" }, h("span", { class: "iglens-tt-k", text: k }), h("span", { class: "iglens-tt-v", text: v }));
}

/**
 * A canvas's 2D context, or null where canvases cannot draw (jsdom, a lost context).
 * @param {HTMLCanvasElement} canvas @returns {CanvasRenderingContext2D|null}
 */
export function context2d(canvas) {
  try {
    return canvas.getContext("2d");
  } catch {
    return null;
  }
}

/** The widths of an element's borders, horizontal and vertical. @param {Element} el */
export function borders(el) {
  const cs = getComputedStyle(el);
  const px = (/** @type {string} */ v) => parseFloat(v) || 0;
  return { x: px(cs.borderLeftWidth) + px(cs.borderRightWidth), y: px(cs.borderTopWidth) + px(cs.borderBottomWidth) };
}
