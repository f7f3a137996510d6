/**
 * The grid's words: the top-k list of the picked cell, the tooltip of a hovered cell, the
 * note under the grid (text nodes only).
 * @module views/grid/text
 */
import { h, clear, keyValue } from "../../lib/dom.js";
import { tooltipHead } from "../tooltip.js";
import { formatToken, quoteToken } from "../../lib/tokens.js";
import { contribution, topAt, lensAt, segmentText, depthText } from "../../model/result.js";
import { fmtProb, fmtSigned } from "../../lib/format.js";
import { isLogitLens, lensPhrase } from "../../model/lens-name.js";

/**
 * Fill `topk` with the lens's top tokens of cell (i = pos, j = row).
 * @param {HTMLElement} topk @param {import("../../model/result.js").Result|null} r
 * @param {{pos: number, row: number}} picked
 */
export function renderTopk(topk, r, picked) {
  clear(topk);
  const i = picked.pos;
  const j = picked.row;
  if (!r || i < 0 || i >= r.T || j < 0 || j > r.k) {
    topk.removeAttribute("data-position");
    topk.removeAttribute("data-boundary");
    topk.appendChild(h("span", { class: "iglens-muted", text: "Click a cell to list the lens's top tokens there." }));
    return;
  }
  topk.setAttribute("data-position", String(i));
  topk.setAttribute("data-boundary", String(j));
  const list = h("ol", { class: "iglens-grid-topk-list" });
  for (const t of topAt(r, i, j, r.K || 5)) {
    const isTarget = r.hasTarget[i] && t.id === r.targetIds[i];
    list.appendChild(
      h(
        "li",
        { class: "iglens-grid-topk-item" + (isTarget ? " iglens-tt-hit" : ""), "data-token-id": t.id, title: quoteToken(t.text) },
        h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 18 }) }),
        h("span", { class: "iglens-tt-p", text: fmtProb(t.p) }),
      ),
    );
  }
  const where = j === 0 ? "the embeddings" : `after ${depthText(r.boundaries[j])}`;
  topk.append(
    h(
      "div",
      { class: "iglens-grid-topk-head" },
      h("span", { class: "iglens-pos", text: `[${i}]` }),
      " ",
      h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 18 }) }),
      h("span", { text: ` lens top-${list.childElementCount} ${where}` }),
      r.hasTarget[i] ? h("span", { class: "iglens-muted", text: ` \u00b7 ${r.targetName} ${fmtProb(lensAt(r, i, j))}` }) : null,
      r.hasTarget[i] && j > 0
        ? h("span", { class: "iglens-muted", text: ` \u00b7 contribution of ${segmentText(r, j - 1)} ${fmtSigned(contribution(r, i, j - 1))}` })
        : null,
    ),
    list.childElementCount ? list : h("span", { class: "iglens-muted", text: "This result has no top tokens." }),
  );
}

/**
 * Fill the tooltip of a hovered cell (row -1: a column's header or footer).
 * @param {HTMLElement} tooltip @param {import("../../model/result.js").Result} r @param {{pos: number, row: number}} hit
 */
export function fillTooltip(tooltip, r, hit) {
  clear(tooltip);
  const i = hit.pos;
  tooltip.appendChild(tooltipHead(r, i));
  if (hit.row < 0) return;
  const j = hit.row;
  const t = topAt(r, i, j, 1)[0];
  tooltip.appendChild(
    keyValue(j === 0 ? "embeddings" : `after ${depthText(r.boundaries[j])}`, t ? `${formatToken(t.text, { maxLen: 16 })}  ${fmtProb(t.p)}` : "\u2013"),
  );
  if (r.hasTarget[i]) tooltip.appendChild(keyValue(r.targetName, fmtProb(lensAt(r, i, j))));
  if (r.hasTarget[i] && j > 0) tooltip.appendChild(keyValue(`contribution of ${segmentText(r, j - 1)}`, fmtSigned(contribution(r, i, j - 1))));
}

/**
 * The note under the grid.
 * @param {import("../../model/result.js").Result} r @param {import("./geometry.js").GridGeometry} g
 * @param {"probability"|"contribution"} mode
 */
export function gridNote(r, g, mode) {
  return (
    `Columns: positions (input token on top, its target below); rows: the residual stream after each ${r.halves ? "attention or MLP half" : "block"} (emb = embeddings), ${isLogitLens(r.lens) ? "" : `mapped by the ${lensPhrase(r.lens)} (fitted), then `}read through the final norm and head. ` +
    `Each cell shows the lens's top-1 token there${r.K ? "" : " (this result has no top tokens)"}; bold: it is the target. ` +
    (mode === "contribution" ? "Colour: IG-Lens contribution of the segment that ends at that row. " : "Colour: probability of the top-1 token. ") +
    "Click a cell for its top tokens." +
    (g.contentW > g.viewW ? " Scroll sideways for more positions." : "")
  );
}
