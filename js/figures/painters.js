/**
 * The painters every figure draws through: one small `Painter` interface, implemented once
 * for SVG (vector, built element by element, serialized with XMLSerializer), once for a 2D
 * canvas (the PNG, at twice the pixel density) and once as a recording replayed on another
 * painter (how one figure is stacked above another), so the PNG and the SVG show the same
 * thing. Text becomes SVG text nodes or canvas `fillText`, never markup; characters XML
 * cannot hold are written as escapes (`xmlSafe`).
 * @module figures/painters
 */
import { s } from "../lib/dom.js";
import { escapeChar } from "../lib/tokens.js";

/**
 * @typedef {object} TextOptions
 * @property {number} [size] px (default 12)
 * @property {number|string} [weight] (default 400)
 * @property {"start"|"middle"|"end"} [anchor] (default "start")
 * @property {string} [fill]
 * @property {boolean} [mono]
 *
 * @typedef {object} Painter
 * @property {number} width @property {number} height
 * @property {(x: number, y: number, w: number, h: number, fill: string, stroke?: string, strokeWidth?: number) => void} rect
 * @property {(x: number, y: number, text: string, o?: TextOptions) => void} text  y is the text's middle
 * @property {(x1: number, y1: number, x2: number, y2: number, stroke: string, width?: number, dash?: string) => void} line
 * @property {(pts: Array<[number, number]>, stroke: string, width?: number, dash?: string) => void} polyline
 * @property {(cx: number, cy: number, r: number, fill: string) => void} circle
 * @property {(img: HTMLCanvasElement, x: number, y: number, w: number, h: number) => void} image  pixelated
 * @property {(text: string, o?: TextOptions) => number} measure
 */

const XML_NS = "http://www.w3.org/XML/1998/namespace";
const XLINK_NS = "http://www.w3.org/1999/xlink";
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Arial, sans-serif";
const MONO = "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace";

// XML 1.0 cannot hold C0 controls (but tab, LF, CR), U+FFFE/U+FFFF or lone surrogates.
const XML_BAD = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Text XML can hold: forbidden characters as `\xNN` / `\uNNNN` escapes. @param {string} t */
export function xmlSafe(t) {
  return String(t).replace(XML_BAD, (c) => escapeChar(c));
}

/** A canvas 2D context for measuring text (null where none). */
let measureCtx = /** @type {CanvasRenderingContext2D|null|undefined} */ (undefined);
/** @param {string} text @param {TextOptions} [o] */
function measureText(text, o = {}) {
  const size = o.size ?? 12;
  if (measureCtx === undefined) {
    try {
      measureCtx = typeof document !== "undefined" ? document.createElement("canvas").getContext("2d") : null;
    } catch {
      measureCtx = null;
    }
  }
  if (measureCtx) {
    measureCtx.font = `${o.weight ?? 400} ${size}px ${o.mono ? MONO : FONT}`;
    const w = measureCtx.measureText(text)?.width;
    if (typeof w === "number" && Number.isFinite(w)) return w;
  }
  return 0.58 * size * Array.from(text).length;
}

/**
 * An SVG painter: `svg` is the root element; `toString()` its XML text.
 * @param {number} width @param {number} height @param {string} title the `<title>` text
 * @returns {Painter & {svg: SVGElement, toString: () => string}}
 */
export function svgPainter(width, height, title) {
  // XMLSerializer writes the SVG namespace declaration itself
  const svg = s("svg", { version: "1.1", width, height, viewBox: `0 0 ${width} ${height}`, "font-family": FONT });
  svg.appendChild(s("title", {}, xmlSafe(title)));
  const num = (/** @type {number} */ v) => Number(v.toFixed(2));
  return {
    svg,
    width,
    height,
    rect(x, y, w, hh, fill, stroke, sw) {
      svg.appendChild(
        s("rect", {
          x: num(x),
          y: num(y),
          width: num(Math.max(0, w)),
          height: num(Math.max(0, hh)),
          fill,
          stroke: stroke ?? null,
          "stroke-width": stroke ? (sw ?? 1) : null,
        }),
      );
    },
    text(x, y, text, o = {}) {
      const el = s(
        "text",
        {
          x: num(x),
          y: num(y),
          "font-size": o.size ?? 12,
          "font-weight": o.weight ?? null,
          "text-anchor": o.anchor ?? null,
          "dominant-baseline": "central",
          fill: o.fill ?? "#1f2328",
          "font-family": o.mono ? MONO : null,
        },
        xmlSafe(text),
      );
      if (/^\s|\s$|\s\s/.test(text)) el.setAttributeNS(XML_NS, "xml:space", "preserve");
      svg.appendChild(el);
    },
    line(x1, y1, x2, y2, stroke, w = 1, dash) {
      svg.appendChild(s("line", { x1: num(x1), y1: num(y1), x2: num(x2), y2: num(y2), stroke, "stroke-width": w, "stroke-dasharray": dash ?? null }));
    },
    polyline(pts, stroke, w = 1.5, dash) {
      svg.appendChild(
        s("polyline", {
          points: pts.map(([a, b]) => `${num(a)},${num(b)}`).join(" "),
          fill: "none",
          stroke,
          "stroke-width": w,
          "stroke-dasharray": dash ?? null,
          "stroke-linejoin": "round",
        }),
      );
    },
    circle(cx, cy, r, fill) {
      svg.appendChild(s("circle", { cx: num(cx), cy: num(cy), r, fill }));
    },
    image(img, x, y, w, hh) {
      let url = "";
      try {
        url = img.toDataURL("image/png");
      } catch {
        url = "";
      }
      if (typeof url !== "string" || !url.startsWith("data:image/png")) {
        svg.appendChild(s("rect", { x: num(x), y: num(y), width: num(w), height: num(hh), fill: "#cccccc" }));
        return;
      }
      const el = s("image", {
        x: num(x),
        y: num(y),
        width: num(w),
        height: num(hh),
        href: url,
        preserveAspectRatio: "none",
        style: "image-rendering: pixelated; image-rendering: crisp-edges",
      });
      el.setAttributeNS(XLINK_NS, "xlink:href", url); // for SVG 1.1 viewers
      svg.appendChild(el);
    },
    measure: measureText,
    toString() {
      return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(svg);
    },
  };
}

/**
 * A canvas painter at `scale` device pixels per unit.
 * @param {number} width @param {number} height @param {number} [scale]
 * @returns {Painter & {canvas: HTMLCanvasElement}}
 */
export function canvasPainter(width, height, scale = 2) {
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(width * scale);
  canvas.height = Math.round(height * scale);
  const c = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  c.setTransform(scale, 0, 0, scale, 0, 0);
  return {
    canvas,
    width,
    height,
    rect(x, y, w, hh, fill, stroke, sw) {
      if (fill && fill !== "none") {
        c.fillStyle = fill;
        c.fillRect(x, y, w, hh);
      }
      if (stroke) {
        c.strokeStyle = stroke;
        c.lineWidth = sw ?? 1;
        c.strokeRect(x, y, w, hh);
      }
    },
    text(x, y, text, o = {}) {
      c.font = `${o.weight ?? 400} ${o.size ?? 12}px ${o.mono ? MONO : FONT}`;
      c.fillStyle = o.fill ?? "#1f2328";
      c.textAlign = o.anchor === "middle" ? "center" : o.anchor === "end" ? "right" : "left";
      c.textBaseline = "middle";
      c.fillText(text, x, y);
    },
    line(x1, y1, x2, y2, stroke, w = 1, dash) {
      c.strokeStyle = stroke;
      c.lineWidth = w;
      c.setLineDash(dash ? dash.split(/[\s,]+/).map(Number) : []);
      c.beginPath();
      c.moveTo(x1, y1);
      c.lineTo(x2, y2);
      c.stroke();
      c.setLineDash([]);
    },
    polyline(pts, stroke, w = 1.5, dash) {
      if (!pts.length) return;
      c.strokeStyle = stroke;
      c.lineWidth = w;
      c.lineJoin = "round";
      c.setLineDash(dash ? dash.split(/[\s,]+/).map(Number) : []);
      c.beginPath();
      pts.forEach(([a, b], q) => (q ? c.lineTo(a, b) : c.moveTo(a, b)));
      c.stroke();
      c.setLineDash([]);
    },
    circle(cx, cy, r, fill) {
      c.fillStyle = fill;
      c.beginPath();
      c.arc(cx, cy, r, 0, 2 * Math.PI);
      c.fill();
    },
    image(img, x, y, w, hh) {
      c.imageSmoothingEnabled = false;
      c.drawImage(img, x, y, w, hh);
    },
    measure(text, o = {}) {
      c.font = `${o.weight ?? 400} ${o.size ?? 12}px ${o.mono ? MONO : FONT}`;
      return c.measureText(text).width;
    },
  };
}

/**
 * A painter that records what is drawn on it, to be replayed on another painter shifted by
 * (dx, dy): how a figure is stacked above another in one file.
 * @param {number} width @param {number} height
 * @returns {Painter & {replay: (p: Painter, dx: number, dy: number) => void}}
 */
export function recordingPainter(width, height) {
  /** @type {Array<(p: Painter, dx: number, dy: number) => void>} */
  const ops = [];
  return {
    width,
    height,
    rect: (x, y, w, hh, fill, stroke, sw) => ops.push((p, dx, dy) => p.rect(x + dx, y + dy, w, hh, fill, stroke, sw)),
    text: (x, y, text, o) => ops.push((p, dx, dy) => p.text(x + dx, y + dy, text, o)),
    line: (x1, y1, x2, y2, stroke, w, dash) => ops.push((p, dx, dy) => p.line(x1 + dx, y1 + dy, x2 + dx, y2 + dy, stroke, w, dash)),
    polyline: (pts, stroke, w, dash) =>
      ops.push((p, dx, dy) =>
        p.polyline(
          pts.map(([a, b]) => [a + dx, b + dy]),
          stroke,
          w,
          dash,
        ),
      ),
    circle: (cx, cy, rr, fill) => ops.push((p, dx, dy) => p.circle(cx + dx, cy + dy, rr, fill)),
    image: (img, x, y, w, hh) => ops.push((p, dx, dy) => p.image(img, x + dx, y + dy, w, hh)),
    measure: measureText,
    replay(p, dx, dy) {
      for (const op of ops) op(p, dx, dy);
    },
  };
}
