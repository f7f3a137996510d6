/**
 * Tiny DOM helpers. Strings always become text nodes: there is no path from data to HTML
 * parsing in this bundle (no innerHTML, insertAdjacentHTML, outerHTML, document.write).
 * @module dom
 */

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
