/**
 * The heatmap's words: row labels, the summary of the selected row, the tooltip of a hovered
 * cell or row label, the note under the rows, and the jump box's search (text nodes only).
 * @module views/heatmap/text
 */
import { h, clear, keyValue } from "../../lib/dom.js";
import { tooltipHead } from "../tooltip.js";
import { formatToken } from "../../lib/tokens.js";
import { contribution, lensAt, topAt, idText, pFinal, segmentText, depthText } from "../../model/result.js";
import { thresholdPercent } from "../../lib/nonmonotone.js";
import { fmtProb, fmtSigned } from "../../lib/format.js";

/** @typedef {import("../../model/result.js").Result} Result */

/** @param {Result} r @param {number} i @param {number} maxLen */
const targetText = (r, i, maxLen) => formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen });

/** Each row's label, "token → target". @param {Result} r @returns {string[]} */
export function rowLabels(r) {
  const out = [];
  for (let i = 0; i < r.T; i++) out.push(`${formatToken(r.tokens[i], { maxLen: 10 })} \u2192 ${r.hasTarget[i] ? targetText(r, i, 10) : "\u2013"}`);
  return out;
}

/**
 * The selected row in words (i < 0: the hint), with a link up to the detail panel where it
 * sits above the heatmap.
 * @param {HTMLElement} summary @param {Result|null} r @param {number} i
 * @param {HTMLElement|null} panel the detail panel, when the layout is not wide
 */
export function fillSummary(summary, r, i, panel) {
  clear(summary);
  if (!r || i < 0) {
    summary.appendChild(h("span", { class: "iglens-muted", text: "Click a row to select its token." }));
    return;
  }
  const tgt = r.hasTarget[i] ? targetText(r, i, 20) : "(no target)";
  summary.append(
    h("span", { class: "iglens-muted", text: "selected " }),
    h("span", { class: "iglens-pos", text: `[${i}]` }),
    " ",
    h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 20 }) }),
    " \u2192 ",
    h("span", { class: "iglens-chip iglens-chip-target", text: tgt }),
  );
  if (r.hasTarget[i]) {
    summary.append(
      h("span", {
        class: "iglens-muted",
        text: ` \u00b7 \u0394p ${fmtSigned(r.deltaP[i])}` + (r.onset[i] >= 0 ? ` \u00b7 onset ${segmentText(r, r.onset[i])}` : ""),
      }),
    );
    if (r.nonmono.flags[i]) summary.append(h("span", { class: "iglens-flag-text", text: " \u00b7 non-monotone" }));
  }
  if (panel) {
    const go = h("button", { type: "button", class: "iglens-link", "data-action": "show-detail", text: "details \u2191" });
    go.addEventListener("click", () => panel.scrollIntoView({ block: "start", behavior: "smooth" }));
    summary.append(" ", go);
  }
}

/**
 * The tooltip of a hovered row label or cell.
 * @param {HTMLElement} tooltip @param {Result} r @param {import("../../lib/layout.js").Hit} hit
 */
export function fillTooltip(tooltip, r, hit) {
  clear(tooltip);
  const i = hit.pos;
  tooltip.appendChild(tooltipHead(r, i));
  if (r.hasContrast && r.contrastTokens && r.contrastTokens[i]) {
    tooltip.appendChild(
      h("div", { class: "iglens-tt-row" }, "vs ", h("span", { class: "iglens-chip", text: formatToken(r.contrastTokens[i], { maxLen: 20 }) })),
    );
  }
  if (!r.hasTarget[i]) {
    tooltip.appendChild(h("div", { class: "iglens-tt-muted", text: "No target at this position." }));
  } else if (hit.region === "rowLabel") {
    const onset = r.onset[i] >= 0 ? segmentText(r, r.onset[i]) : "\u2013";
    tooltip.appendChild(keyValue(`${r.targetName} at output`, fmtProb(pFinal(r, i))));
    tooltip.appendChild(keyValue("\u0394p", fmtSigned(r.deltaP[i])));
    tooltip.appendChild(keyValue("onset", onset));
  } else cellTooltip(tooltip, r, i, hit.seg);
}

/** The rows of a cell's tooltip. @param {HTMLElement} tooltip @param {Result} r @param {number} i @param {number} j */
function cellTooltip(tooltip, r, i, j) {
  const lo = r.boundaries[j];
  const hi = r.boundaries[j + 1];
  const v = contribution(r, i, j);
  tooltip.appendChild(keyValue(hi - lo > 1 ? "blocks" : "block", r.segmentLabels[j]));
  const cv = keyValue("contribution", fmtSigned(v));
  cv.classList.add(v >= 0 ? "iglens-pos-val" : "iglens-neg-val");
  tooltip.appendChild(cv);
  tooltip.appendChild(keyValue(`${r.targetName} after ${depthText(hi)}`, `${fmtProb(lensAt(r, i, j + 1))}  (was ${fmtProb(lensAt(r, i, j))})`));
  const top = topAt(r, i, j + 1, 5);
  if (!top.length) return;
  tooltip.appendChild(h("div", { class: "iglens-tt-sub", text: `lens top-${top.length} after ${depthText(hi)}` }));
  const list = h("ol", { class: "iglens-tt-top" });
  for (const t of top) {
    const isTarget = t.id === r.targetIds[i];
    list.appendChild(
      h(
        "li",
        { class: isTarget ? "iglens-tt-hit" : "" },
        h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 18 }) }),
        h("span", { class: "iglens-tt-p", text: fmtProb(t.p) }),
      ),
    );
  }
  tooltip.appendChild(list);
}

/** The note under the rows. @param {Result} r @param {boolean} scrolls rows scroll */
export function heatmapNote(r, scrolls) {
  const single = r.singleBlocks;
  return (
    `Rows: positions (token \u2192 target); columns: ${single ? "blocks" : r.halves ? "attention and MLP halves of blocks" : "segments"} 1\u2013${r.nBlocks}. ` +
    "Outlined cell: onset (where its colour shows). Orange mark left of the cells: a non-monotone token" +
    ` (a segment against \u0394p by more than ${thresholdPercent(r.nonmonotoneThreshold)} of its largest |contribution|). ` +
    "Hover a cell for the lens's top tokens; click to select (and to show that segment's head shares)." +
    (r.answerStart > 0 && r.answerStart < r.T ? " Rows under the purple line predict the generated answer (their targets are its tokens)." : "") +
    (scrolls ? " Scroll for more rows, or use the overview on the right." : "")
  );
}

/**
 * The row a jump names: a position number, or the next token (after `from`, wrapping) whose
 * text contains the query. -1 when none.
 * @param {Result|null} r @param {string} query @param {number} from the selected row (-1: none)
 */
export function findRow(r, query, from) {
  const q = query.trim();
  if (!r || !query) return -1;
  if (/^#?\d+$/.test(q)) {
    const i = Number(q.replace("#", ""));
    return i < r.T ? i : -1;
  }
  const needle = query.toLowerCase();
  const start = Math.max(-1, from);
  for (let d = 1; d <= r.T; d++) {
    const i = (start + d) % r.T;
    if (String(r.tokens[i]).toLowerCase().includes(needle)) return i;
  }
  return -1;
}
