/**
 * Export a view as a figure: SVG (vector, built element by element, serialized with
 * XMLSerializer) or PNG (the same drawing on a canvas, at twice the pixel density), each
 * with a title block naming the model, the prompt, the target and the estimator. The file
 * is handed to the browser as a download through a Blob URL: no network, no CDN.
 *
 * One drawing, two painters: every figure is drawn through the small `Painter` interface,
 * implemented once for SVG and once for a 2D canvas, so the PNG and the SVG show the same
 * thing. Token text goes through `formatToken` and becomes SVG text nodes or canvas
 * `fillText` — never markup; characters XML cannot hold are written as escapes.
 * @module export-image
 */
import { s } from "./dom.js";
import { formatToken, escapeChar } from "./tokens.js";
import { divergingScale, hexToRgb, rgbToHex, textColorFor, legendTicks, niceTicks, formatTick } from "./colorscale.js";
import { thinLabels, linearScale, clamp } from "./layout.js";
import { contribution, topAt, idText } from "./result.js";
import { cellValue, gridScale, boundaryLabel, curveValues, pinText, resultLetter, labelledRows } from "./figure-data.js";
import { NAN_COLOR } from "./palette.js";
import { PIN_COLORS } from "./comparison.js";
import { lensFact, lensGridName, lensPhrase, isLogitLens } from "./lens-name.js";
import { fmtPercentPlain } from "./format.js";
import { notableBlocks } from "./walk.js";

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
 * @typedef {object} Theme colours of an exported figure
 * @property {string} bg @property {string} fg @property {string} muted @property {string} grid
 * @property {string} accent @property {string} answer @property {string} nan
 */

/** @param {"light"|"dark"} theme @returns {Theme} */
export function figureTheme(theme) {
  return theme === "dark"
    ? { bg: "#0f1419", fg: "#e6edf3", muted: "#9aa4af", grid: "#30363d", accent: "#4493f8", answer: "#b692f6", nan: NAN_COLOR.dark }
    : { bg: "#ffffff", fg: "#1f2328", muted: "#5b6470", grid: "#d5dbe1", accent: "#0969da", answer: "#8250df", nan: NAN_COLOR.light };
}

/**
 * The prompt of a result as text: the request's prompt when it is text, else the prompt
 * tokens joined.
 * @param {import("./result.js").Result} r
 */
export function promptText(r) {
  const p = r.request && r.request.prompt;
  if (typeof p === "string") return p;
  return r.tokens.slice(0, Math.min(r.T, r.answerStart + 1)).join("");
}

/**
 * The typed target (and contrast) as the header shows them: through the token formatter,
 * so a leading space shows as \u2423 and a control or bidi character as a visible escape.
 * @param {import("./result.js").Result} r
 */
export function targetText(r) {
  const tok = (/** @type {string} */ t) => formatToken(t, { maxLen: 40 });
  return `target: ${tok(r.controls.target)}${r.hasContrast && r.controls.contrast ? ` vs ${tok(r.controls.contrast)}` : ""}`;
}

/** The title's prompt line: the prompt through `formatToken`, quoted. @param {import("./result.js").Result} r */
export function promptLine(r) {
  return `prompt: \u201c${formatToken(promptText(r), { maxLen: 120 })}\u201d`;
}

/**
 * The title block of a result's figure: [heading, prompt line, target/lens/estimator line].
 * Token text (the prompt, the target, the contrast) and the lens's name go through `formatToken`;
 * the lens is named only when it is not the logit lens.
 * @param {import("./result.js").Result} r @param {string} view e.g. "layer heatmap"
 * @returns {string[]}
 */
export function titleLines(r, view) {
  const model = r.modelName || r.family || "model";
  const target = targetText(r);
  const lens = lensFact(r.lens); // "lens: shortcut" under a fitted lens (formatted), nothing under the logit lens
  return [
    `IG-Lens ${view} \u00b7 ${model}`,
    promptLine(r),
    `${target}${lens ? ` \u00b7 ${lens}` : ""} \u00b7 estimator: ${r.estimator}, m=${r.steps} \u00b7 boundaries: ${r.controls.boundaries} \u00b7 ${r.nBlocks} blocks, ${r.T} positions`,
  ];
}

/**
 * Draw the title block; returns its height.
 * @param {Painter} p @param {string[]} lines @param {Theme} th
 */
function drawTitle(p, lines, th) {
  let y = 18;
  lines.forEach((line, q) => {
    p.text(16, y, line, { size: q === 0 ? 16 : 12.5, weight: q === 0 ? 650 : 400, fill: q === 0 ? th.fg : th.muted });
    y += q === 0 ? 22 : 18;
  });
  return y + 4;
}

/**
 * A horizontal colour legend.
 * @param {Painter} p @param {import("./colorscale.js").Scale} scale @param {string} title
 * @param {number} x @param {number} y @param {number} w @param {Theme} th
 */
function drawLegendBar(p, scale, title, x, y, w, th) {
  p.text(x, y, title, { size: 11.5, fill: th.muted });
  const n = 48;
  const n3 = scale.lut.length / 3;
  for (let q = 0; q < n; q++) {
    const idx = Math.round((q / (n - 1)) * (n3 - 1));
    p.rect(x + (q * w) / n, y + 10, w / n + 0.5, 10, rgbToHex([scale.lut[idx * 3], scale.lut[idx * 3 + 1], scale.lut[idx * 3 + 2]]));
  }
  for (const t of legendTicks(scale, 3)) {
    p.line(x + t.t * w, y + 20, x + t.t * w, y + 24, th.muted, 1);
    p.text(x + t.t * w, y + 31, t.label, { size: 10.5, anchor: "middle", fill: th.muted });
  }
}

/**
 * The rows of an exported heatmap: all (T ≤ 80), else 60 around the selection.
 * @param {number} T @param {number} sel @returns {[number, number]}
 */
export function heatmapRows(T, sel) {
  if (T <= 80) return [0, T - 1];
  const n = 60;
  const first = clamp((sel >= 0 ? sel : 0) - 20, 0, T - n);
  return [first, first + n - 1];
}

/**
 * The layer heatmap as a figure: rows [first, last] (positions) × segments.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("./result.js").Result} r @param {{theme: "light"|"dark", rows: [number, number], selected?: number, limit?: number}} o
 */
export function heatmapFigure(make, r, o) {
  const th = figureTheme(o.theme);
  const [first, last] = o.rows;
  const labelW = 190;
  const colW = clamp(Math.floor(760 / Math.max(1, r.k)), 6, 28);
  const rowH = 16;
  const lines = titleLines(r, "layer heatmap");
  if (first > 0 || last < r.T - 1) lines.push(`positions ${first}\u2013${last} of ${r.T}`);
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const headerH = 22;
  const gridW = colW * r.k;
  const W = Math.max(560, 16 + labelW + gridW + 24);
  const H = titleH + headerH + (last - first + 1) * rowH + 70;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const scale = divergingScale(o.limit ?? r.contribLimit, o.theme);
  const x0 = 16 + labelW;
  const y0 = titleH + headerH;
  let widest = 0;
  for (const l of r.segmentLabels) widest = Math.max(widest, p.measure(l, { size: 10.5 }));
  for (const j of thinLabels(r.k, colW, widest + 6))
    p.text(x0 + (j + 0.5) * colW, titleH + headerH / 2, r.segmentLabels[j], { size: 10.5, anchor: "middle", fill: th.muted });
  p.text(x0 - 8, titleH + headerH / 2, "block \u2192", { size: 10.5, anchor: "end", fill: th.muted });
  const nan = th.nan;
  for (let i = first; i <= last; i++) {
    const y = y0 + (i - first) * rowH;
    for (let j = 0; j < r.k; j++) {
      p.rect(x0 + j * colW, y, colW - (colW >= 7 ? 1 : 0), rowH - 1, scale.css(contribution(r, i, j)) || nan);
    }
    if (r.hasTarget[i] && r.onset[i] >= 0 && colW >= 6) p.rect(x0 + r.onset[i] * colW + 1, y + 1, colW - 3, rowH - 3, "none", th.fg, 1.2);
    const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 10 }) : "\u2013";
    p.text(16, y + rowH / 2, String(i), { size: 10.5, fill: th.muted });
    p.text(x0 - 8, y + rowH / 2, `${formatToken(r.tokens[i], { maxLen: 10 })} \u2192 ${tgt}`, {
      size: 11.5,
      anchor: "end",
      fill: i >= r.answerStart ? th.answer : th.fg,
    });
    if (i === o.selected) p.rect(x0 - 1, y - 1, gridW + 1, rowH + 1, "none", th.accent, 2);
  }
  drawLegendBar(
    p,
    scale,
    `contribution to ${r.targetName} (outlined: onset)`,
    x0,
    y0 + (last - first + 1) * rowH + 14,
    Math.min(260, Math.max(160, gridW)),
    th,
  );
  return p;
}

/**
 * The logit-lens grid as a figure: columns [first, last] (positions) × every boundary.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("./result.js").Result} r
 * @param {{theme: "light"|"dark", columns: [number, number], mode: "probability"|"contribution", selected?: number}} o
 */
export function gridFigure(make, r, o) {
  const th = figureTheme(o.theme);
  const [first, last] = o.columns;
  const colW = 68,
    rowH = 18,
    labelW = 52;
  const lines = titleLines(r, lensGridName(r.lens));
  lines.push(
    `top-1 lens token after each block; colour: ${o.mode === "contribution" ? `IG-Lens contribution to ${r.targetName}` : "top-1 probability"}; bold: the target` +
      (first > 0 || last < r.T - 1 ? ` \u00b7 positions ${first}\u2013${last} of ${r.T}` : ""),
  );
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const headerH = 22,
    footerH = 22;
  const ncol = last - first + 1;
  const W = Math.max(560, 16 + labelW + ncol * colW + 16);
  const H = titleH + headerH + (r.k + 1) * rowH + footerH + 60;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const scale = gridScale(r, o.mode, o.theme);
  const x0 = 16 + labelW;
  const y0 = titleH + headerH;
  const nanRgb = hexToRgb(th.nan);
  for (let i = first; i <= last; i++) {
    const x = x0 + (i - first) * colW;
    p.text(x + colW / 2, titleH + headerH / 2, formatToken(r.tokens[i], { maxLen: 9 }), {
      size: 11.5,
      weight: 600,
      anchor: "middle",
      fill: i >= r.answerStart ? th.answer : th.fg,
    });
    for (let j = 0; j <= r.k; j++) {
      const y = y0 + j * rowH;
      const rgb = scale.rgb(cellValue(r, i, j, o.mode)) ?? nanRgb;
      p.rect(x, y, colW - 1, rowH - 1, rgbToHex(rgb));
      const t = topAt(r, i, j, 1)[0];
      if (!t) continue;
      const hit = r.hasTarget[i] && t.id === r.targetIds[i];
      p.text(x + colW / 2, y + rowH / 2, formatToken(t.text, { maxLen: 8 }), { size: 11, weight: hit ? 700 : 400, anchor: "middle", fill: textColorFor(rgb) });
    }
    const tgt = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 9 }) : "\u2013";
    p.text(x + colW / 2, y0 + (r.k + 1) * rowH + footerH / 2, tgt, { size: 11, anchor: "middle", fill: th.muted });
    if (i === o.selected) p.rect(x - 1, titleH + 1, colW + 1, headerH + (r.k + 1) * rowH + footerH - 2, "none", th.accent, 2);
  }
  for (let j = 0; j <= r.k; j++) p.text(x0 - 8, y0 + j * rowH + rowH / 2, boundaryLabel(r.boundaries[j]), { size: 10.5, anchor: "end", fill: th.muted });
  p.text(16, titleH + headerH / 2, "block", { size: 10.5, fill: th.muted });
  p.text(16, y0 + (r.k + 1) * rowH + footerH / 2, "\u2192 target", { size: 10.5, fill: th.muted });
  drawLegendBar(
    p,
    scale,
    o.mode === "contribution" ? `contribution to ${r.targetName}` : "top-1 probability",
    x0,
    y0 + (r.k + 1) * rowH + footerH + 12,
    220,
    th,
  );
  return p;
}

/**
 * A one-pixel-per-cell image of a result's contributions (T rows × k columns).
 * @param {import("./result.js").Result} r @param {import("./colorscale.js").Scale} scale @param {string} nan
 */
function contributionBitmap(r, scale, nan) {
  const c = document.createElement("canvas");
  c.width = Math.max(1, r.k);
  c.height = Math.max(1, r.T);
  let cx = null;
  try {
    cx = c.getContext("2d");
  } catch {
    cx = null;
  }
  if (!cx) return c;
  const img = cx.createImageData(c.width, c.height);
  const nanRgb = hexToRgb(nan);
  for (let i = 0; i < r.T; i++) {
    for (let j = 0; j < r.k; j++) {
      const o = (i * r.k + j) * 4;
      const rgb = scale.rgb(contribution(r, i, j)) ?? nanRgb;
      img.data[o] = rgb[0];
      img.data[o + 1] = rgb[1];
      img.data[o + 2] = rgb[2];
      img.data[o + 3] = 255;
    }
  }
  cx.putImageData(img, 0, 0);
  return c;
}

/**
 * The compare view as a figure: the pinned curves on shared axes, their key, and every
 * result's heatmap on the shared colour scale.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("./comparison.js").Comparison} cmp
 * @param {{theme: "light"|"dark", pins: Array<[number, number]>, y: "delta"|"p", selected?: number}} o
 */
export function compareFigure(make, cmp, o) {
  const th = figureTheme(o.theme);
  const r0 = cmp.results[0];
  const lines = titleLines(r0, cmp.multi ? "comparison" : "pinned tokens");
  if (cmp.multi) {
    lines.length = 1;
    cmp.results.forEach((r, rr) => {
      lines.push(
        `${resultLetter(rr, true)}: ${formatToken(cmp.labels[rr] || promptText(r), { maxLen: 70 })} \u00b7 prompt \u201c${formatToken(promptText(r), { maxLen: 60 })}\u201d \u00b7 ${targetText(r)} \u00b7 ${r.estimator}, m=${r.steps}`,
      );
    });
  }
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const W = 900;
  const chartH = 260;
  const pins = o.pins.length
    ? o.pins
    : o.selected !== undefined && o.selected >= 0 && r0.hasTarget[o.selected]
      ? [/** @type {[number, number]} */ ([0, o.selected])]
      : [];
  const keyH = 18 * Math.ceil(pins.length / 2) + 8;
  const panelH = 300;
  const H = titleH + chartH + keyH + 40 + panelH + 70;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  // chart
  const M = { left: 70, right: 24, top: titleH + 8, bottom: titleH + chartH - 36 };
  let maxDepth = 1;
  for (const r of cmp.results) maxDepth = Math.max(maxDepth, r.boundaries[r.k]);
  const series = pins.map(([rr, i]) => ({ rr, i, vals: curveValues(cmp.results[rr], i, o.y) }));
  let lo = 0,
    hi = 0;
  for (const c of series)
    for (const v of c.vals)
      if (Number.isFinite(v)) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
  if (hi - lo < 1e-9) {
    lo -= 0.05;
    hi += 0.05;
  }
  const pad = 0.06 * (hi - lo);
  const x = linearScale([0, maxDepth], [M.left, W - M.right]);
  const y = linearScale([lo - pad, hi + pad], [M.bottom, M.top]);
  const yt = niceTicks(lo - pad, hi + pad, 5);
  for (const t of yt.ticks) {
    p.line(M.left, y(t), W - M.right, y(t), t === 0 ? th.muted : th.grid, 1);
    p.text(M.left - 6, y(t), formatTick(t, yt.step), { size: 11, anchor: "end", fill: th.muted });
  }
  for (const t of niceTicks(0, maxDepth, 12).ticks) {
    if (!Number.isInteger(t)) continue;
    p.line(x(t), M.bottom, x(t), M.bottom + 4, th.muted, 1);
    p.text(x(t), M.bottom + 14, String(t), { size: 11, anchor: "middle", fill: th.muted });
  }
  p.text((M.left + W - M.right) / 2, M.bottom + 30, "block L (state after block L; 0 = embeddings)", { size: 11.5, anchor: "middle", fill: th.muted });
  p.text(16, M.top - 2, o.y === "p" ? r0.targetName : "cumulative \u0394p", { size: 11.5, fill: th.muted });
  const colors = PIN_COLORS[o.theme === "dark" ? "dark" : "light"];
  series.forEach((c, q) => {
    const r = cmp.results[c.rr];
    /** @type {Array<[number, number]>} */
    const pts = [];
    for (let j = 0; j <= r.k; j++) if (Number.isFinite(c.vals[j])) pts.push([x(r.boundaries[j]), y(c.vals[j])]);
    const color = o.pins.length ? colors[q % colors.length] : th.fg;
    p.polyline(pts, color, 2.2, o.pins.length ? undefined : "5 4");
    const end = pts[pts.length - 1];
    if (end) p.circle(end[0], end[1], 3.2, color);
  });
  // key
  let ky = titleH + chartH + 6;
  series.forEach((c, q) => {
    const kx = 70 + (q % 2) * 400;
    if (q > 0 && q % 2 === 0) ky += 18;
    const color = o.pins.length ? colors[q % colors.length] : th.fg;
    p.line(kx, ky, kx + 22, ky, color, 3);
    p.text(kx + 28, ky, pinText(cmp, c.rr, c.i, 14) + (o.pins.length ? "" : " (selected)"), { size: 11.5, fill: th.fg });
  });
  // panels on the shared scale
  const top = titleH + chartH + keyH + 28;
  const n = cmp.results.length;
  const pw = Math.floor((W - 32 - 16 * (n - 1)) / n);
  const scale = divergingScale(cmp.limit, o.theme);
  cmp.results.forEach((r, rr) => {
    const px = 16 + rr * (pw + 16);
    p.text(
      px,
      top,
      `${cmp.multi ? resultLetter(rr, true) + ": " : ""}${formatToken(cmp.labels[rr] || `${r.T} positions \u00d7 ${r.k} segments`, { maxLen: 50 })}`,
      { size: 12, weight: 600, fill: th.fg },
    );
    const labelW = Math.min(100, Math.floor(pw * 0.3)); // the rows' token labels, as text
    const rowH = (panelH - 20) / r.T;
    p.image(contributionBitmap(r, scale, th.nan), px + labelW, top + 12, pw - labelW, panelH - 20);
    const size = Math.min(11, Math.max(8, rowH - 2));
    for (const i of labelledRows(r.T, rowH))
      p.text(px + labelW - 4, top + 12 + (i + 0.5) * rowH, formatToken(r.tokens[i], { maxLen: 12 }), { size, anchor: "end", fill: th.fg });
    pins.forEach(([pr, pi], q) => {
      if (pr !== rr) return;
      p.rect(px + labelW - 2, top + 12 + pi * rowH, 2, Math.max(2, rowH), o.pins.length ? colors[q % colors.length] : th.fg);
    });
  });
  drawLegendBar(
    p,
    scale,
    `contribution to ${r0.targetName}${cmp.multi ? " (one scale for all results)" : ""}; rows: positions, columns: segments`,
    16,
    top + panelH + 6,
    260,
    th,
  );
  return p;
}

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

/** The detail block's heading: "detail of [i] 'tok' → 'target'". @param {import("./result.js").Result} r @param {number} i */
export function detailHeading(r, i) {
  const tgt = formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 24 });
  // under a fitted lens the heading says so, as the Python plots' titles do (" — shortcut lens")
  const lens = isLogitLens(r.lens) ? "" : ` \u2014 ${lensPhrase(r.lens)}`;
  return `detail of position ${i}: ${formatToken(r.tokens[i], { maxLen: 24 })} \u2192 ${tgt}${lens}`;
}

/**
 * The points of the detail figure's curve (b): the lens value after each boundary, at x =
 * the boundary's depth, in the figure's coordinates (NaN values left out).
 * @param {import("./result.js").Result} r @param {number} i
 * @param {(v: number) => number} x @param {(v: number) => number} y
 * @returns {Array<[number, number]>}
 */
export function detailCurvePoints(r, i, x, y) {
  /** @type {Array<[number, number]>} */
  const pts = [];
  for (let j = 0; j <= r.k; j++) {
    const v = r.lensProbs[i * (r.k + 1) + j];
    if (Number.isFinite(v)) pts.push([x(r.boundaries[j]), y(v)]);
  }
  return pts;
}

/**
 * The detail panel's charts of position i as a figure, W wide: (a) the contribution of each
 * segment (bars, the heatmap's colours) and (b) the lens value after each boundary (the
 * curve from the embeddings to the last block; its rise over a segment is the segment's
 * contribution). Token text as text only.
 * @param {Painter} p @param {import("./result.js").Result} r @param {number} i
 * @param {{theme: "light"|"dark", width: number}} o
 */
export function detailFigure(p, r, i, o) {
  const th = figureTheme(o.theme);
  const W = o.width;
  const left = 64,
    right = 24,
    chartH = 120;
  p.rect(0, 0, W, p.height, th.bg);
  p.line(16, 4, W - 16, 4, th.grid, 1);
  p.text(16, 22, detailHeading(r, i), { size: 14, weight: 650, fill: th.fg });
  const depth = r.boundaries[r.k] || 1;
  const x = linearScale([0, depth], [left, W - right]);
  const c = Array.from({ length: r.k }, (_, j) => contribution(r, i, j));
  // (a) bars
  const aTop = 54;
  p.text(16, aTop - 12, `(a) contribution of each segment to ${r.targetName}`, { size: 12, fill: th.muted });
  const finite = c.filter(Number.isFinite);
  const lo = Math.min(0, ...finite),
    hi = Math.max(0, ...finite);
  const { ticks: aTicks, step: aStep } = niceTicks(lo, hi === lo ? lo + 1 : hi, 3);
  const ya = linearScale([Math.min(lo, aTicks[0]), Math.max(hi, aTicks[aTicks.length - 1])], [aTop + chartH, aTop]);
  for (const t of aTicks) p.text(left - 6, ya(t), formatTick(t, aStep), { size: 10.5, anchor: "end", fill: th.muted });
  p.line(left, ya(0), W - right, ya(0), th.grid, 1);
  const scale = divergingScale(r.contribLimit, o.theme);
  for (let j = 0; j < r.k; j++) {
    if (!Number.isFinite(c[j])) continue;
    const x0 = x(r.boundaries[j]),
      x1 = x(r.boundaries[j + 1]);
    const y0 = ya(0),
      y1 = ya(c[j]);
    p.rect(x0 + 1, Math.min(y0, y1), Math.max(1, x1 - x0 - 2), Math.max(0.5, Math.abs(y1 - y0)), scale.css(c[j]) || th.nan, th.fg, 0.5);
  }
  // (b) the curve
  const bTop = aTop + chartH + 44;
  p.text(16, bTop - 12, `(b) ${r.targetName} after block L`, { size: 12, fill: th.muted });
  const lens = Array.from({ length: r.k + 1 }, (_, j) => r.lensProbs[i * (r.k + 1) + j]).filter(Number.isFinite);
  const { ticks: bTicks, step: bStep } = niceTicks(Math.min(0, ...lens), Math.max(1e-9, ...lens), 3);
  const yb = linearScale([Math.min(0, bTicks[0]), Math.max(...lens, bTicks[bTicks.length - 1])], [bTop + chartH, bTop]);
  for (const t of bTicks) p.text(left - 6, yb(t), formatTick(t, bStep), { size: 10.5, anchor: "end", fill: th.muted });
  p.line(left, yb(0), W - right, yb(0), th.grid, 1);
  const pts = detailCurvePoints(r, i, x, yb);
  p.polyline(pts, th.accent, 2);
  for (const [cx, cy] of pts) p.circle(cx, cy, 2.5, th.accent);
  // the x axis: boundary depths
  let widest = 0;
  for (const d of r.boundaries) widest = Math.max(widest, p.measure(boundaryLabel(d), { size: 10.5 }));
  const slot = (W - left - right) / Math.max(1, r.k);
  for (const j of thinLabels(r.k + 1, slot, widest + 6))
    p.text(x(r.boundaries[j]), bTop + chartH + 12, boundaryLabel(r.boundaries[j]), { size: 10.5, anchor: "middle", fill: th.muted });
  p.text(W - right, bTop + chartH + 28, "block \u2192", { size: 10.5, anchor: "end", fill: th.muted });
}

/** The detail figure's height. */
export const DETAIL_HEIGHT = 54 + 120 + 44 + 120 + 40;

/**
 * A figure with the detail panel's charts of the selected position below it (nothing added
 * when no position with a target is selected).
 * @param {(make: (w: number, h: number) => Painter) => Painter} draw the main figure
 * @param {import("./result.js").Result} r @param {{theme: "light"|"dark", selected: number}} o
 * @returns {(make: (w: number, h: number) => Painter) => Painter}
 */
export function withDetail(draw, r, o) {
  const i = o.selected;
  if (!(i >= 0 && i < r.T && r.hasTarget[i])) return draw;
  return (make) => {
    /** @type {ReturnType<typeof recordingPainter>|null} */
    let main = null;
    draw((w, hh) => (main = recordingPainter(w, hh)));
    const m = /** @type {ReturnType<typeof recordingPainter>} */ (/** @type {unknown} */ (main));
    const W = Math.max(m.width, 560);
    const p = make(W, m.height + DETAIL_HEIGHT);
    p.rect(0, 0, W, m.height + DETAIL_HEIGHT, figureTheme(o.theme).bg);
    m.replay(p, 0, 0);
    const detail = recordingPainter(W, DETAIL_HEIGHT);
    detailFigure(detail, r, i, { theme: o.theme, width: W });
    detail.replay(p, 0, m.height);
    return p;
  };
}

/**
 * The title block of a slide (the student view's picture, the detail panel's curve), in plain
 * words: [heading, prompt line, what the curve is about and the lens it is read through].
 * Token text goes through `formatToken`; `subject` is already formatted.
 * @param {import("./result.js").Result} r @param {string} view e.g. "lesson" @param {string} subject
 * @returns {string[]}
 */
export function slideTitleLines(r, view, subject) {
  const model = r.modelName || r.family || "model";
  return [`IG-Lens ${view} \u00b7 ${model}`, promptLine(r), `${subject} \u00b7 read through the ${lensPhrase(r.lens)}`];
}

/**
 * A slide's curve colours by series key: the pin palette (views use the same hues: lesson.css).
 * @param {string} key "answer" | "token" | "versus" | "curve" @param {"light"|"dark"} theme
 */
export function slideColor(key, theme) {
  const c = PIN_COLORS[theme === "dark" ? "dark" : "light"];
  return key === "versus" ? c[1] : key === "token" ? c[7] : c[0];
}

/**
 * Curves in percent over the result's boundaries in the box (x0, top, w, h): a y grid with
 * percent labels (0 … `yMax`), the block labels ("emb" for the embeddings), one polyline per
 * series (NaN values left out) with a dot at its end. Returns the coordinates it drew with.
 * @param {Painter} p @param {import("./result.js").Result} r
 * @param {Array<{key: string, probs: ArrayLike<number>}>} series
 * @param {{x0: number, top: number, w: number, h: number, yMax: number, theme: "light"|"dark"}} box
 */
function drawPercentCurves(p, r, series, box) {
  const th = figureTheme(box.theme);
  const b = r.boundaries;
  const x = linearScale([b[0] - 0.6, b[r.k] + 0.6], [box.x0, box.x0 + box.w]);
  const y = linearScale([0, box.yMax], [box.top + box.h, box.top]);
  const { ticks, step } = box.yMax === 100 ? { ticks: [0, 25, 50, 75, 100], step: 25 } : niceTicks(0, box.yMax, 4);
  for (const t of ticks) {
    p.line(box.x0, y(t), box.x0 + box.w, y(t), t === 0 ? th.muted : th.grid, 1);
    p.text(box.x0 - 6, y(t), `${formatTick(t, step)}%`, { size: 12, anchor: "end", fill: th.muted });
  }
  const labels = b.map(boundaryLabel);
  let widest = 0;
  for (const l of labels) widest = Math.max(widest, p.measure(l, { size: 12 }));
  // every step-th boundary from the embeddings on, and the last one when it has room
  const cell = box.w / Math.max(1, r.k + 1);
  const every = Math.max(1, Math.ceil((widest + 8) / cell));
  for (let L = 0; L <= r.k; L++) {
    if (L % every && (L < r.k || (r.k % every) * cell < widest + 8)) continue;
    p.text(x(b[L]), box.top + box.h + 14, labels[L], { size: 12, anchor: "middle", fill: th.muted });
  }
  p.text(box.x0 + box.w / 2, box.top + box.h + 34, "block (emb: the embeddings, before the first block)", { size: 12.5, anchor: "middle", fill: th.muted });
  for (const c of series) {
    /** @type {Array<[number, number]>} */
    const pts = [];
    for (let L = 0; L <= r.k; L++) if (Number.isFinite(c.probs[L])) pts.push([x(b[L]), y(100 * c.probs[L])]);
    const color = slideColor(c.key, box.theme);
    p.polyline(pts, color, c.key === "token" ? 2 : 3, c.key === "token" ? "6 4" : undefined); // dashed as in the view
    const end = pts[pts.length - 1];
    if (end) p.circle(end[0], end[1], 4, color);
  }
  return { x, y };
}

/** The percent axis's top for values `v`: 100 when they reach a quarter, else a nice bound. @param {number[]} v */
function percentTop(v) {
  const hi = Math.max(0, ...v.filter(Number.isFinite)) * 100;
  if (hi >= 25) return 100;
  const { ticks } = niceTicks(0, Math.max(hi, 0.1), 4);
  return Math.max(hi, ticks[ticks.length - 1]);
}

/** What the student view is about, for its title. @param {import("./result.js").Result} r @param {import("./lesson.js").Lesson} lesson */
export function lessonSubject(r, lesson) {
  const versus = lesson.series.find((c) => c.key === "versus");
  const vs = versus ? ` vs \u201c${formatToken(versus.label, { maxLen: 60 })}\u201d` : "";
  if (r.answer) return `answer: \u201c${formatToken(r.answer.text, { maxLen: 80 })}\u201d${vs}`;
  return `next token after \u201c${lesson.input}\u201d: ${lesson.target || "\u2013"}${vs}`;
}

/**
 * The student view as a slide: the title (prompt, answer, lens), the output's top guesses at the
 * lesson's position in percent, the curves of the answer's probability after each block on a
 * 0–100% axis (the view's series, in its order), their key, and the walk's sentences of the
 * notable blocks (the view's story). Token text as text only.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("./result.js").Result} r @param {import("./lesson.js").Lesson} lesson
 * @param {{theme: "light"|"dark", legend: (c: import("./lesson.js").LessonSeries) => string}} o `legend`: the view's key text of a series
 */
export function lessonFigure(make, r, lesson, o) {
  const th = figureTheme(o.theme);
  const lines = slideTitleLines(r, "lesson", lessonSubject(r, lesson));
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const W = 960,
    guessH = 30,
    chartH = 320,
    keyH = 22 * Math.max(1, lesson.series.length) + 8;
  const events = notableBlocks(lesson.walk);
  const storyH = events.length ? 34 + 20 * events.length : 0;
  const H = titleH + guessH + chartH + 56 + keyH + storyH;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const guesses = lesson.top.map((g) => `${g.text} ${fmtPercentPlain(g.p)}`).join("   ");
  p.text(16, titleH + guessH / 2, `The model's top guesses after \u201c${lesson.input}\u201d:  ${guesses}`, { size: 14, weight: 600, fill: th.fg });
  const top = titleH + guessH + 10;
  if (lesson.series.length) {
    drawPercentCurves(p, r, lesson.series, { x0: 64, top, w: W - 64 - 24, h: chartH - 10, yMax: 100, theme: o.theme });
  } else {
    p.text(W / 2, top + chartH / 2, "The lens values here are differences (a contrast): no probability to draw.", {
      size: 13,
      anchor: "middle",
      fill: th.muted,
    });
  }
  let ky = top + chartH + 44;
  for (const c of lesson.series) {
    p.line(64, ky, 90, ky, slideColor(c.key, o.theme), 3, c.key === "token" ? "6 4" : undefined);
    p.text(98, ky, o.legend(c), { size: 13, fill: th.fg });
    ky += 22;
  }
  if (events.length) p.text(16, ky + 8, "Block by block:", { size: 13.5, weight: 600, fill: th.fg });
  for (const [q, e] of events.entries()) p.text(32, ky + 34 + 20 * q, `\u2022 ${e.sentence}`, { size: 13, fill: th.fg });
  return p;
}

/** The detail curve's subject: "p(target) of ␣Ho at [41] ␣is". @param {import("./result.js").Result} r @param {number} i */
export function curveSubject(r, i) {
  const tgt = formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 40 });
  return `${r.targetName} of ${tgt} at [${i}] ${formatToken(r.tokens[i], { maxLen: 40 })}`;
}

/**
 * The detail panel's cumulative curve of position i as a slide: the title (prompt, token and
 * target, lens) and the lens probability of the target after each block, in percent (the
 * detail panel's chart (b)). Token text as text only.
 * @param {(w: number, h: number) => Painter} make
 * @param {import("./result.js").Result} r @param {number} i @param {{theme: "light"|"dark"}} o
 */
export function curveFigure(make, r, i, o) {
  const th = figureTheme(o.theme);
  const lines = slideTitleLines(r, "curve", curveSubject(r, i));
  const titleH = 18 + 22 + 18 * (lines.length - 1) + 4;
  const W = 960,
    chartH = 340;
  const H = titleH + chartH + 60;
  const p = make(W, H);
  p.rect(0, 0, W, H, th.bg);
  drawTitle(p, lines, th);
  const probs = Array.from({ length: r.k + 1 }, (_, L) => r.lensProbs[i * (r.k + 1) + L]);
  drawPercentCurves(p, r, [{ key: "curve", probs }], { x0: 64, top: titleH + 10, w: W - 64 - 24, h: chartH - 10, yMax: percentTop(probs), theme: o.theme });
  return p;
}
