/**
 * A figure handed to the browser: drawn as SVG text or a PNG Blob (`renderFigure`), named
 * (`figureFileName`) and downloaded through a Blob URL (`download`; no network, no CDN),
 * unless the page's frame blocks downloads (`downloadsBlocked`).
 * @module figures/download
 */
import { svgPainter, canvasPainter } from "./painters.js";
/** @typedef {import("./painters.js").Painter} Painter */

/**
 * A file name for a figure: "iglens-<view>-<model>.<ext>", safe on every file system.
 * @param {string} view @param {string} model @param {"png"|"svg"} ext
 */
export function figureFileName(view, model, ext) {
  const slug = (/** @type {string} */ t) =>
    t
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40);
  return `iglens-${slug(view) || "view"}${model ? "-" + slug(model) : ""}.${ext}`;
}

/**
 * Whether this page's frame blocks downloads: a sandboxed iframe without `allow-downloads`
 * (Colab's and VS Code's output frames may be one), where an `<a download>` does nothing and
 * says nothing. Read from the frame's `sandbox` attribute where the parent is readable; a
 * frame of opaque origin (`sandbox` without `allow-same-origin`) counts as blocking; a
 * top-level page of opaque origin (an export opened from file://) does not.
 * @param {Window} [win]
 * @returns {boolean}
 */
export function downloadsBlocked(win = window) {
  try {
    const frame = win.frameElement;
    const flags = frame?.getAttribute("sandbox");
    if (typeof flags === "string") return !flags.split(/\s+/).includes("allow-downloads");
  } catch {
    /* a parent of another origin: not readable */
  }
  // An opaque origin blocks only inside a frame: a page opened from file:// has one too.
  return win.origin === "null" && win !== win.top;
}

/**
 * Hand a Blob to the browser as a download (an `<a download>` on a Blob URL, revoked later).
 * @param {Blob} blob @param {string} name @param {HTMLElement} [host] where the link is attached
 */
export function download(blob, name, host) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.rel = "noopener";
  a.style.display = "none";
  (host ?? document.body).appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Draw a figure as SVG text or as a PNG Blob.
 * @param {"svg"|"png"} kind
 * @param {(make: (w: number, h: number) => Painter) => Painter} draw draws with the painter factory it is given
 * @param {string} title the SVG `<title>`
 * @returns {Promise<Blob>}
 */
export function renderFigure(kind, draw, title) {
  if (kind === "svg") {
    /** @type {ReturnType<typeof svgPainter>|null} */
    let painter = null;
    draw((w, hh) => (painter = svgPainter(w, hh, title)));
    return Promise.resolve(new Blob([/** @type {any} */ (painter).toString()], { type: "image/svg+xml" }));
  }
  /** @type {ReturnType<typeof canvasPainter>|null} */
  let painter = null;
  draw((w, hh) => (painter = canvasPainter(w, hh, 2)));
  const canvas = /** @type {any} */ (painter).canvas;
  return new Promise((resolve, reject) => {
    canvas.toBlob((/** @type {Blob|null} */ blob) => (blob ? resolve(blob) : reject(new Error("the browser could not encode the PNG"))), "image/png");
  });
}
