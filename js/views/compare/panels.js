/**
 * The compare view's panels: every result of a comparison as a fit-to-height heatmap (the
 * shared contribution bitmap, scaled up without smoothing) on one colour scale, its pins
 * marked; a click pins a row, hover reads it out. Each row is labelled with its token, as
 * text (a DOM column beside the canvas, thinned where rows are shorter than a line).
 * @module views/compare/panels
 */
import { h, listen, context2d } from "../../lib/dom.js";
import { clamp } from "../../lib/layout.js";
import { formatToken } from "../../lib/tokens.js";
import { fmtProb } from "../../lib/format.js";
import { resultLetter, labelledRows, LABEL_LINE } from "../../model/figure-data.js";
import { contributionBitmap } from "../../paint/bitmap.js";

/**
 * @typedef {object} PanelMarks what a panel marks besides its cells
 * @property {Array<[number, number]>} pinned @property {string[]} colors pin colours
 * @property {number} selected the selected position (outlined in the first result)
 * @property {boolean} dark
 */

/**
 * Paint one panel: cells, row labels (where rows are tall enough), pins, the selection.
 * @param {CanvasRenderingContext2D} c @param {import("../../model/result.js").Result} r @param {number} rr the result's index
 * @param {HTMLCanvasElement|null} bitmap @param {{rowH: number, gridH: number, labelW: number, cw: number}} g
 * @param {PanelMarks} m
 */
export function paintPanel(c, r, rr, bitmap, g, m) {
  const { rowH, gridH, labelW, cw } = g;
  c.imageSmoothingEnabled = false;
  if (bitmap) c.drawImage(bitmap, 0, 0, r.k, r.T, labelW, 0, cw - labelW, gridH);
  const fg = m.dark ? "#e6edf3" : "#1f2328";
  if (labelW > 8) {
    c.font = `${Math.min(12, rowH - 2)}px system-ui, sans-serif`;
    c.textBaseline = "middle";
    c.textAlign = "right";
    c.fillStyle = fg;
    for (let i = 0; i < r.T; i++) c.fillText(formatToken(r.tokens[i], { maxLen: 12 }), labelW - 6, (i + 0.5) * rowH);
  }
  m.pinned.forEach(([pr, pi], q) => {
    if (pr !== rr) return;
    c.fillStyle = m.colors[q % m.colors.length];
    c.fillRect(0, pi * rowH, labelW > 8 ? 4 : 6, Math.max(2, rowH));
    c.strokeStyle = m.colors[q % m.colors.length];
    c.lineWidth = 2;
    c.strokeRect(labelW + 1, pi * rowH, cw - labelW - 2, Math.max(2, rowH));
  });
  if (rr === 0 && m.selected >= 0) {
    c.strokeStyle = fg;
    c.setLineDash([3, 2]);
    c.lineWidth = 1;
    c.strokeRect(labelW + 0.5, m.selected * rowH - 0.5, cw - labelW - 1, Math.max(2, rowH) + 1);
    c.setLineDash([]);
  }
}

/**
 * The row labels of a panel: the token of each (labelled) row, inserted as text.
 * @param {import("../../model/result.js").Result} r @param {number} rowH @param {number} gridH @param {number} labelW
 * @returns {HTMLElement}
 */
function rowLabels(r, rowH, gridH, labelW) {
  const col = h("div", { class: "iglens-compare-rows", "data-rows": r.T });
  Object.assign(col.style, { position: "relative", flex: "none", width: `${labelW}px`, height: `${gridH}px`, overflow: "hidden" });
  const line = Math.max(rowH, LABEL_LINE);
  const size = Math.min(LABEL_LINE, Math.max(9, rowH - 2));
  for (const i of labelledRows(r.T, rowH)) {
    const label = h("span", {
      class: "iglens-compare-row-label",
      "data-row": i,
      text: formatToken(r.tokens[i], { maxLen: 12 }),
      title: `[${i}] ${formatToken(r.tokens[i], { maxLen: 40 })}`,
    });
    Object.assign(label.style, {
      position: "absolute",
      right: "6px",
      left: "0",
      top: `${Math.min(gridH - line, Math.max(0, (i + 0.5) * rowH - line / 2))}px`,
      height: `${line}px`,
      lineHeight: `${line}px`,
      fontSize: `${size}px`,
      textAlign: "right",
      whiteSpace: "pre",
      overflow: "hidden",
      textOverflow: "ellipsis",
      cursor: "pointer",
    });
    col.appendChild(label);
  }
  return col;
}

/**
 * One result's panel: a figure with its title, its provenance, its row labels and the canvas.
 * @param {import("../../model/comparison.js").Comparison} cmp @param {number} rr @param {number} pw panel width
 * @param {import("../../lib/colorscale.js").Scale} scale @param {import("../../lib/colorscale.js").RGB} nan
 * @param {PanelMarks} m
 * @param {{click: (i: number) => void, move: (i: number) => void, leave: () => void}} on row events
 * @returns {{fig: HTMLElement, canvas: HTMLCanvasElement, offs: Array<() => void>}}
 */
export function comparePanel(cmp, rr, pw, scale, nan, m, on) {
  const r = cmp.results[rr];
  const rowH = clamp(360 / Math.max(1, r.T), 0.5, 16);
  const gridH = Math.round(rowH * r.T);
  const labelW = Math.min(110, Math.floor(pw * 0.35)); // the labels' column, beside the canvas
  const gutter = 6; // the canvas's own margin: the pin marks
  const cw = pw - labelW;
  const canvas = /** @type {HTMLCanvasElement} */ (
    h("canvas", {
      class: "iglens-compare-canvas",
      "data-result": rr,
      role: "img",
      "aria-label": `${cmp.labels[rr] || "result"}: ${r.T} positions by ${r.k} segments; click a row to pin it`,
    })
  );
  const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  canvas.width = Math.round(cw * dpr);
  canvas.height = Math.round(gridH * dpr);
  canvas.style.width = `${cw}px`;
  canvas.style.height = `${gridH}px`;
  const c = context2d(canvas);
  if (c) {
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    paintPanel(c, r, rr, contributionBitmap(r, scale, nan), { rowH, gridH, labelW: gutter, cw }, m);
  }
  const rowAt = (/** @type {MouseEvent} */ e) => {
    const rect = canvas.getBoundingClientRect();
    const i = Math.floor((e.clientY - rect.top) / rowH);
    return i >= 0 && i < r.T ? i : -1;
  };
  const labels = rowLabels(r, rowH, gridH, labelW);
  const labelRow = (/** @type {Event} */ e) => {
    const t = e.target instanceof Element ? e.target.closest("[data-row]") : null;
    return t ? Number(t.getAttribute("data-row")) : -1;
  };
  const offs = [
    listen(canvas, "click", (e) => on.click(rowAt(e))),
    listen(labels, "click", (e) => {
      const i = labelRow(e);
      if (i >= 0) on.click(i);
    }),
    listen(canvas, "mousemove", (e) => on.move(rowAt(e))),
    listen(canvas, "mouseleave", () => on.leave()),
  ];
  const head = h(
    "figcaption",
    { class: "iglens-compare-panel-title" },
    cmp.multi ? h("strong", { text: `${resultLetter(rr, true)} ` }) : null,
    h("span", { text: cmp.labels[rr] || `${r.T} positions` }),
  );
  const meta = h("div", {
    class: "iglens-muted iglens-compare-panel-meta",
    text: `${r.modelName || r.family || "model"} \u00b7 target: ${r.controls.target}${r.hasContrast && r.controls.contrast ? ` vs ${r.controls.contrast}` : ""} \u00b7 ${r.estimator}, m=${r.steps} \u00b7 max |contribution| ${fmtProb(r.contribLimit)}`,
  });
  const body = h("div", { class: "iglens-compare-panel-body" }, labels, canvas);
  Object.assign(body.style, { display: "flex", alignItems: "flex-start" });
  const fig = h(
    "figure",
    { class: "iglens-compare-panel", "data-result": rr, "data-limit": String(cmp.limit), "data-own-limit": String(r.contribLimit) },
    head,
    meta,
    body,
  );
  fig.style.width = `${pw}px`;
  return { fig, canvas, offs };
}
