/**
 * The compare view's words: the list of pins (each with its unpin button) and the readout of
 * a hovered panel row (text nodes only).
 * @module views/compare/text
 */
import { h, clear, listen } from "../../lib/dom.js";
import { quoteToken } from "../../lib/tokens.js";
import { idText, segmentText } from "../../model/result.js";
import { fmtSigned } from "../../lib/format.js";
import { pinText } from "../../model/figure-data.js";

/**
 * Fill `pins` with one chip per pin.
 * @param {HTMLElement} pins @param {import("../../model/comparison.js").Comparison} cmp
 * @param {Array<[number, number]>} pinned @param {string[]} colors
 * @param {(rr: number, i: number) => void} unpin
 * @returns {Array<() => void>} the unpin buttons' listeners
 */
export function renderPins(pins, cmp, pinned, colors, unpin) {
  clear(pins);
  /** @type {Array<() => void>} */
  const offs = [];
  // a list only when there are pins (an empty list is an error for screen readers)
  if (pinned.length) pins.setAttribute("role", "list");
  else pins.removeAttribute("role");
  if (!pinned.length) {
    pins.appendChild(
      h("span", {
        class: "iglens-muted",
        text: cmp.results.length
          ? "No pins yet: the dashed curve is the selected token. Pin tokens (the button, or a click on a row below) to overlay their curves."
          : "",
      }),
    );
    return offs;
  }
  pinned.forEach(([rr, i], q) => {
    const r = cmp.results[rr];
    const sw = h("span", { class: "iglens-compare-swatch", "aria-hidden": "true" });
    sw.style.background = colors[q % colors.length];
    const remove = h("button", {
      type: "button",
      class: "iglens-compare-unpin",
      "data-action": "unpin",
      "aria-label": `Unpin ${pinText(cmp, rr, i, 40)}`,
      text: "\u00d7",
    });
    offs.push(listen(remove, "click", () => unpin(rr, i)));
    pins.appendChild(
      h(
        "span",
        {
          class: "iglens-compare-pin",
          role: "listitem",
          "data-result": rr,
          "data-position": i,
          title: `${cmp.labels[rr] ? cmp.labels[rr] + ": " : ""}${quoteToken(r.tokens[i])} \u2192 ${quoteToken(r.targetTokens[i] || idText(r, r.targetIds[i]))}, \u0394p ${fmtSigned(r.deltaP[i])}`,
        },
        sw,
        h("span", { text: pinText(cmp, rr, i) }),
        remove,
      ),
    );
  });
  return offs;
}

/**
 * The readout of row i of result rr (rr or i < 0: the hint).
 * @param {HTMLElement} readout @param {import("../../model/comparison.js").Comparison} cmp
 * @param {number} rr @param {number} i
 */
export function renderReadout(readout, cmp, rr, i) {
  clear(readout);
  if (rr < 0 || i < 0) {
    readout.appendChild(h("span", { class: "iglens-muted", text: "Hover a row for its numbers; click to pin it." }));
    return;
  }
  const r = cmp.results[rr];
  readout.append(h("strong", { text: pinText(cmp, rr, i, 18) }));
  if (r.hasTarget[i]) {
    readout.append(
      h("span", { text: ` \u00b7 \u0394p ${fmtSigned(r.deltaP[i])}` }),
      h("span", { class: "iglens-muted", text: r.onset[i] >= 0 ? ` \u00b7 onset ${segmentText(r, r.onset[i])}` : "" }),
    );
  } else readout.append(h("span", { class: "iglens-muted", text: " \u00b7 no target" }));
}
