/**
 * The token strip: the positions, coloured by the chosen statistic; those whose targets are
 * the generated answer's tokens (i >= answerStart) come after a divider. Click selects, hover
 * previews, arrow keys move the selection, Escape clears. Roving tabindex: only one token is
 * in the tab order.
 * @module views/strip
 */
import { h, clear, listen, onResize, showWholeLines, uniqueId } from "../../lib/dom.js";
import { COLOR_BY } from "../../model/protocol.js";
import { formatTokenParts, formatToken, quoteToken } from "../../lib/tokens.js";
import { divergingScale, sequentialScale, ordinalScale, oppositionScale, luminance } from "../../lib/colorscale.js";
import { ruleText, stepRuleText } from "../../lib/nonmonotone.js";
import { pFinal, idText, segmentText } from "../../model/result.js";
import { fmtProb, fmtSigned } from "../../lib/format.js";
import { createLegend, drawLegend } from "../legend.js";
import { stripSpan } from "./span.js";
import { stripMarks } from "./marks.js";

/** The token-strip colourings (iglens_viz.protocol.state.COLOR_BY). */
export { COLOR_BY };

/**
 * The colour-by choices' labels; the lens value is named by the result (`target_name`).
 * @param {import("../../model/result.js").Result|null} r
 * @returns {Record<(typeof COLOR_BY)[number], string>}
 */
export function colorLabels(r) {
  return {
    p_final: `${r ? r.targetName : "lens value"} at output`,
    delta_p: "\u0394p (net change)",
    onset: r && r.halves ? "onset sub-layer" : "onset block",
    nonmonotone: "non-monotone (move against \u0394p)",
  };
}

/**
 * The colour scale and per-position value for a `color_by` statistic.
 * @param {import("../../model/result.js").Result} r
 * @param {string} colorBy
 * @param {"light"|"dark"} theme
 */
export function stripScale(r, colorBy, theme) {
  if (colorBy === "delta_p") {
    return { scale: divergingScale(r.deltaLimit, theme), value: (/** @type {number} */ i) => r.deltaP[i], title: "\u0394p" };
  }
  if (colorBy === "nonmonotone") {
    // the largest segment against Δp, as a share of the token's largest |contribution| (0: monotone)
    return {
      scale: oppositionScale(theme),
      value: (/** @type {number} */ i) => (r.hasTarget[i] ? r.nonmono.score[i] : NaN),
      title: "against \u0394p, \u00f7 largest |contribution|",
    };
  }
  if (colorBy === "onset") {
    return { scale: ordinalScale(r.k), value: (/** @type {number} */ i) => (r.onset[i] >= 0 && r.hasTarget[i] ? r.onset[i] : NaN), title: "onset" };
  }
  if (r.signedProbs) {
    let lim = 0;
    for (let i = 0; i < r.T; i++) {
      const v = Math.abs(pFinal(r, i));
      if (Number.isFinite(v) && v > lim) lim = v;
    }
    return { scale: divergingScale(lim || 1, theme), value: (/** @type {number} */ i) => pFinal(r, i), title: r.targetName };
  }
  return { scale: sequentialScale(theme, 0, 1), value: (/** @type {number} */ i) => pFinal(r, i), title: r.targetName };
}

/**
 * A short, plain description of one position (for title attributes and aria labels).
 * @param {import("../../model/result.js").Result} r @param {number} i
 */
export function describePosition(r, i) {
  const tok = quoteToken(r.tokens[i]);
  if (!r.hasTarget[i]) return `[${i}] ${tok}: no target`;
  const tgt = quoteToken(r.targetTokens[i] || idText(r, r.targetIds[i]));
  const onset = r.onset[i] >= 0 ? `, onset ${segmentText(r, r.onset[i])}` : "";
  return (
    `[${i}] ${tok} \u2192 ${tgt}: ${r.targetName} = ${fmtProb(pFinal(r, i))}, \u0394p = ${fmtSigned(r.deltaP[i])}${onset}` +
    (r.nonmono.flags[i] ? " \u00b7 non-monotone" : "")
  );
}

/** The strip's elements. @param {import("../context.js").Context} ctx */
function stripDom(ctx) {
  const select = h("select", { class: "iglens-colorby", name: "color_by", "aria-label": "Colour tokens by" });
  for (const key of COLOR_BY) select.appendChild(h("option", { value: key, text: colorLabels(ctx.result)[key] }));
  const legend = createLegend("iglens-strip-legend");
  const list = h("div", {
    class: "iglens-strip",
    role: "listbox",
    "aria-label": "Tokens: click to select, arrow keys to move, shift-click, drag or Shift+arrow keys for a span, Escape to clear",
    "aria-orientation": "horizontal",
  });
  // where the answer starts, said in words (the divider between the chips is only drawn)
  const answerNote = h("span", { class: "iglens-sr-only", id: uniqueId("answer-note") });
  const spanStatus = h("span", { class: "iglens-sr-only iglens-span-status", role: "status" });
  const foldBox = h("input", { type: "checkbox", name: "hide_template" });
  const foldSwitch = h(
    "label",
    { class: "iglens-template-switch", title: "fold the chat template's tokens into one chip", hidden: true },
    foldBox,
    h("span", { text: "hide template" }),
  );
  list.setAttribute("aria-describedby", answerNote.id);
  const el = h(
    "section",
    { class: "iglens-strip-section", "aria-label": "Token strip" },
    h(
      "div",
      { class: "iglens-section-head" },
      h("h2", { class: "iglens-section-title", text: "Tokens" }),
      h("span", {
        class: "iglens-hint",
        text: "click to select \u00b7 shift-click or drag: a span \u00b7 hover to preview \u00b7 \u2190 \u2192 (\u21e7 extends) Esc",
      }),
      h("span", { class: "iglens-spacer" }),
      foldSwitch,
      h("label", { class: "iglens-colorby-label" }, h("span", { text: "colour by" }), select),
      legend,
    ),
    list,
    answerNote,
    spanStatus,
  );
  // the non-monotone tokens of the whole prompt, listed (click to jump), with the rule stated
  const nmSummary = h("summary", { class: "iglens-nonmono-summary" });
  const nmRule = h("p", { class: "iglens-muted iglens-nonmono-rule" });
  const nmItems = h("div", { class: "iglens-nonmono-items", role: "group", "aria-label": "Non-monotone tokens: click to jump" });
  const nmList = h("details", { class: "iglens-nonmono-list" }, nmSummary, nmRule, nmItems);
  el.appendChild(nmList);
  return { el, select, legend, list, answerNote, spanStatus, nmSummary, nmRule, nmItems, nmList, foldBox, foldSwitch };
}

/**
 * The token chips of a result (and the answer divider, line breaks after newlines).
 * @param {import("../../model/result.js").Result} r @returns {{frag: DocumentFragment, items: HTMLElement[]}}
 */
function tokenChips(r) {
  /** @type {HTMLElement[]} */
  const items = [];
  const frag = document.createDocumentFragment();
  for (let i = 0; i < r.T; i++) {
    if (i === r.answerStart && i > 0) {
      frag.appendChild(h("span", { class: "iglens-break", "aria-hidden": "true" }));
      frag.appendChild(
        h(
          "span",
          // not a separator: a listbox holds options only (the listbox's description says where the answer starts)
          { class: "iglens-answer-divider", "aria-hidden": "true" },
          h("span", { text: "answer" }),
        ),
      );
    }
    const tok = r.tokens[i];
    const chip = h("span", {
      class:
        "iglens-token" +
        (i >= r.answerStart ? " iglens-token-answer" : "") +
        (r.hasTarget[i] ? "" : " iglens-token-none") +
        (r.nonmono.flags[i] ? " iglens-token-nonmono" : ""),
      "data-token-index": i,
      role: "option",
      tabindex: -1,
      "aria-selected": "false",
      "data-nonmonotone": r.nonmono.flags[i] ? "" : null,
      title: describePosition(r, i),
    });
    for (const part of formatTokenParts(tok, { maxLen: 32 })) {
      if (part.mark) chip.appendChild(h("span", { class: "iglens-ws", text: part.text }));
      else chip.appendChild(document.createTextNode(part.text));
    }
    items.push(chip);
    frag.appendChild(chip);
    if (typeof tok === "string" && tok.endsWith("\n")) frag.appendChild(h("span", { class: "iglens-break", "aria-hidden": "true" }));
  }
  return { frag, items };
}

/**
 * The jump list of non-monotone tokens.
 * @param {ReturnType<typeof stripDom>} d @param {import("../../model/result.js").Result} r
 */
function buildNonmono(d, r) {
  const { nmSummary, nmRule, nmItems, nmList } = d;
  clear(nmItems);
  const pos = r.nonmono.positions;
  nmSummary.textContent = `Non-monotone tokens: ${pos.length} of ${r.T}` + (pos.length ? " \u2014 click to list and jump" : "");
  nmList.setAttribute("data-count", String(pos.length));
  nmRule.textContent =
    `A token is non-monotone when a segment moves ${ruleText(r.nonmonotoneThreshold)}` +
    (r.pathProbs ? `, or an interpolation step moves against its segment ${stepRuleText(r.nonmonotoneThreshold)}` : "") +
    ". Marked with an orange corner here and an orange mark in the heatmap's row labels.";
  nmItems.setAttribute("data-built", "false");
  if (nmList.open) fillNonmono(nmItems, r);
}

/**
 * The list's buttons, built when the list is first opened (long prompts open fast).
 * @param {HTMLElement} nmItems @param {import("../../model/result.js").Result} r
 */
function fillNonmono(nmItems, r) {
  if (nmItems.getAttribute("data-built") === "true") return;
  nmItems.setAttribute("data-built", "true");
  const pos = r.nonmono.positions;
  const cap = 300;
  for (const i of pos.slice(0, cap)) {
    const tgt = r.targetTokens[i] || idText(r, r.targetIds[i]);
    nmItems.appendChild(
      h(
        "button",
        { type: "button", class: "iglens-jump-item", "data-jump": i, title: describePosition(r, i) },
        h("span", { class: "iglens-pos", text: `[${i}]` }),
        " ",
        formatToken(r.tokens[i], { maxLen: 14 }),
        " \u2192 ",
        formatToken(tgt, { maxLen: 14 }),
      ),
    );
  }
  if (pos.length > cap) nmItems.appendChild(h("span", { class: "iglens-muted", text: `\u2026 and ${pos.length - cap} more` }));
}

/**
 * The token a key moves the selection to (null: not a moving key; Escape is handled apart).
 * @param {string} key @param {number} cur the selected (or focused) token, -1 for none
 * @param {number} T tokens @param {number} focused the token with the keyboard focus, -1 for none
 * @returns {number|null}
 */
function keyTarget(key, cur, T, focused) {
  if (key === "ArrowRight" || key === "ArrowDown") return cur < 0 ? 0 : Math.min(T - 1, cur + 1);
  if (key === "ArrowLeft" || key === "ArrowUp") return cur < 0 ? 0 : Math.max(0, cur - 1);
  if (key === "Home") return 0;
  if (key === "End") return T - 1;
  if (key === "Enter" || key === " ") return focused >= 0 ? focused : cur;
  return null;
}

/**
 * Black or white text on a chip of colour `rgb`, whichever contrasts more: pure black, so
 * that the worse of the two is still √21 ≈ 4.58:1 (WCAG AA for small text).
 * @param {[number, number, number]|number[]} rgb
 */
export function chipText(rgb) {
  const L = luminance(/** @type {[number, number, number]} */ (rgb));
  return (L + 0.05) / 0.05 >= 1.05 / (L + 0.05) ? "#000000" : "#ffffff";
}

/**
 * Colour the chips by a quantity; returns its scale and legend title.
 * @param {HTMLElement[]} items @param {import("../../model/result.js").Result} r
 * @param {(typeof COLOR_BY)[number]} by @param {"light"|"dark"} theme
 */
function colourChips(items, r, by, theme) {
  const { scale, value, title } = stripScale(r, by, theme);
  for (let i = 0; i < items.length; i++) {
    const rgb = scale.rgb(value(i));
    const st = items[i].style;
    if (rgb) {
      st.backgroundColor = `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`;
      st.color = chipText(rgb);
    } else {
      st.backgroundColor = "";
      st.color = "";
    }
  }
  return { scale, title };
}

/**
 * @param {import("../context.js").Context} ctx
 */
export function createStrip(ctx) {
  const d = stripDom(ctx);
  const { el, select, legend, list, nmItems, nmList } = d;

  /** @type {HTMLElement[]} */
  let items = [];
  let prevSel = -1;
  let prevHover = -1;
  let focusIndex = 0;
  function build() {
    clear(list);
    items = [];
    prevSel = -1;
    prevHover = -1;
    const r = ctx.result;
    if (!r) return;
    const labels = colorLabels(r);
    for (const option of select.options) option.textContent = labels[/** @type {(typeof COLOR_BY)[number]} */ (option.value)];
    const chips = tokenChips(r);
    const frag = chips.frag;
    items = chips.items;
    list.appendChild(frag);
    marks.update();
    d.answerNote.textContent = r.answerStart > 0 && r.answerStart < r.T ? `Positions ${r.answerStart} to ${r.T - 1} predict the generated answer.` : "";
    buildNonmono(d, r);
    focusIndex = Math.max(0, ctx.selected());
    if (items[focusIndex]) items[focusIndex].tabIndex = 0;
    recolor();
    updateSelection(false);
    span.update();
  }

  /** Scroll the strip (not the page) to `chip`, else the selected token: whole lines only (no half tokens). @param {HTMLElement|null} [chip] */
  function scrollToSelected(chip) {
    showWholeLines(list, chip ?? items[ctx.selected()] ?? null);
  }

  function recolor() {
    const r = ctx.result;
    if (!r) {
      clear(legend);
      return;
    }
    const by = COLOR_BY.includes(ctx.model.get("color_by")) ? ctx.model.get("color_by") : "p_final";
    if (select.value !== by) select.value = by;
    const { scale, title } = colourChips(items, r, by, ctx.theme);
    drawLegend(legend, scale, title, by === "onset" ? r.segmentLabels : null);
  }

  /** @param {boolean} scroll */
  function updateSelection(scroll) {
    const sel = ctx.selected();
    const hov = ctx.hovered();
    if (prevSel !== sel) {
      const old = items[prevSel];
      if (old) {
        old.classList.remove("iglens-selected");
        old.setAttribute("aria-selected", "false");
      }
      const cur = items[sel];
      if (cur) {
        cur.classList.add("iglens-selected");
        cur.setAttribute("aria-selected", "true");
        setFocusIndex(sel);
        if (scroll) scrollToSelected(cur);
      }
      prevSel = sel;
    }
    if (prevHover !== hov) {
      items[prevHover]?.classList.remove("iglens-hovered");
      items[hov]?.classList.add("iglens-hovered");
      prevHover = hov;
    }
  }

  /** @param {number} i */
  function setFocusIndex(i) {
    if (!items[i] || i === focusIndex) return;
    if (items[focusIndex]) items[focusIndex].tabIndex = -1;
    items[i].tabIndex = 0;
    focusIndex = i;
  }

  /** @param {EventTarget|null} t */
  const indexOf = (t) => {
    const chip = /** @type {HTMLElement|null} */ (t instanceof Element ? t.closest("[data-token-index]") : null);
    return chip && list.contains(chip) ? Number(chip.dataset.tokenIndex) : -1;
  };
  const marks = stripMarks(ctx, d, () => items, describePosition, scrollToSelected);
  const span = stripSpan(ctx, { list, status: d.spanStatus, chips: () => items, indexOf, setFocusIndex, show: scrollToSelected });

  const offs = [
    onResize(list, scrollToSelected), // new lines: another width, lesson or presentation mode
    listen(select, "change", () => ctx.setTrait("color_by", select.value)),
    listen(nmList, "toggle", () => {
      if (nmList.open && ctx.result) fillNonmono(nmItems, ctx.result);
    }),
    listen(nmItems, "click", (e) => {
      const b = e.target instanceof Element ? e.target.closest("[data-jump]") : null;
      if (b) ctx.select(Number(b.getAttribute("data-jump")));
    }),
    listen(list, "click", (e) => {
      if (marks.click(e)) return;
      const i = indexOf(e.target);
      if (span.click(e, i) || i < 0) return;
      ctx.select(i); // a real click has focused the chip already (mousedown)
      ctx.setSpan(null);
    }),
    listen(list, "mouseover", (e) => {
      const i = indexOf(e.target);
      if (i >= 0) ctx.hover(i);
    }),
    listen(list, "mouseleave", () => ctx.hover(-1)),
    listen(list, "keydown", (e) => {
      const r = ctx.result;
      if (!r) return;
      const cur = ctx.selected() >= 0 ? ctx.selected() : indexOf(e.target) >= 0 ? indexOf(e.target) : -1;
      const next = marks.skip(keyTarget(e.key, cur, r.T, indexOf(e.target)), cur);
      if (span.key(e, cur)) return; // Escape clears the span first; Shift+←/→ extend it
      if (e.key === "Escape") {
        ctx.select(-1);
        e.preventDefault();
        e.stopPropagation();
        return;
      }
      if (next === null || next < 0) return;
      e.preventDefault();
      ctx.select(next);
      ctx.setSpan(null);
      items[next]?.focus({ preventScroll: true });
      if (items[next]) scrollToSelected(items[next]);
    }),
  ];

  build();
  return {
    el,
    list,
    build,
    recolor,
    updateSelection,
    updateSpan: () => span.update(),
    scrollToSelected,
    destroy() {
      offs.forEach((off) => off());
      marks.destroy();
      span.destroy();
    },
  };
}
