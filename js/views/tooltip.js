// The head line of a heatmap or grid tooltip: "[i] token → target", token strings as text.
import { h } from "../lib/dom.js";
import { formatToken } from "../lib/tokens.js";
import { idText } from "../model/result.js";

/**
 * @param {import("../model/result.js").Result} r @param {number} i
 * @returns {HTMLElement}
 */
export function tooltipHead(r, i) {
  const target = r.hasTarget[i] ? formatToken(r.targetTokens[i] || idText(r, r.targetIds[i]), { maxLen: 20 }) : "(no target)";
  return h(
    "div",
    { class: "iglens-tt-head" },
    h("span", { class: "iglens-tt-pos", text: `[${i}]` }),
    " ",
    h("span", { class: "iglens-chip", text: formatToken(r.tokens[i], { maxLen: 20 }) }),
    " \u2192 ",
    h("span", { class: "iglens-chip iglens-chip-target", text: target }),
  );
}
