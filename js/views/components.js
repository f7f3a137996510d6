/**
 * The detail panel's "heads" section: for the shown token and one segment, the block ×
 * component matrix of each (block, component)'s share of that segment's contribution
 * (attention heads, MLP, the rest of the attention write), coloured on the heatmap's
 * diverging scale, with the largest shares named in words and the check that the shares add
 * up to the segment's contribution.
 *
 * The segment is the token's onset segment unless the user picked another (a bar of the
 * detail chart, a heatmap cell of the token's row, or the select here): `ctx.segmentFocus`.
 * @module views/components
 */
import { h } from "../lib/dom.js";
import { formatToken, quoteToken } from "../lib/tokens.js";
import { divergingScale, textColorFor } from "../lib/colorscale.js";
import { contribution, contributionRow, idText, segmentText } from "../model/result.js";
import { segmentMatrix, shortName, cellName, COORDINATE } from "../model/component-split.js";
import { lensPhrase } from "../model/lens-name.js";
import { fmtSigned } from "../lib/format.js";
import { NAN_COLOR } from "../lib/palette.js";
import { kernelNote } from "./kernel.js";

/** Static pages without a split: how to get one. */
export const NO_SPLIT_HINT = "attribute with components=True to see head shares";

/**
 * The segment whose shares are shown for position i: the one the user picked for i, else the
 * onset segment, else the one with the largest |contribution|.
 * @param {import("./context.js").Context} ctx
 * @param {import("../model/result.js").Result} r @param {number} i
 */
export function focusedSegment(ctx, r, i) {
  const f = ctx.segmentFocus;
  if (f.index === i && Number.isInteger(f.j) && f.j >= 0 && f.j < r.k) return f.j;
  if (r.onset[i] >= 0 && r.onset[i] < r.k) return r.onset[i];
  const c = contributionRow(r, i);
  let best = 0;
  for (let j = 1; j < r.k; j++) if (Math.abs(c[j]) > Math.abs(c[best]) || !Number.isFinite(c[best])) best = j;
  return best;
}

/**
 * Build the section for position i.
 * @param {import("./context.js").Context} ctx
 * @param {import("../model/result.js").Result} r @param {number} i
 * @param {boolean} preview the position is only hovered (Python computes the selected one)
 * @returns {HTMLElement}
 */
export function buildComponents(ctx, r, i, preview) {
  const j = focusedSegment(ctx, r, i);
  const isOnset = r.onset[i] === j;
  const select = h("select", {
    name: "component_segment",
    class: "iglens-input iglens-components-select",
    "aria-label": "segment whose component shares are shown",
  });
  for (let q = 0; q < r.k; q++) {
    select.appendChild(h("option", { value: q, text: r.segmentLabels[q] + (r.onset[i] === q ? " (onset)" : "") }));
  }
  select.value = String(j);
  select.addEventListener("change", () => ctx.focusSegment(i, Number(select.value)));
  // keys typed in the select must not drive the strip/heatmap shortcuts
  select.addEventListener("keydown", (e) => e.stopPropagation());

  const head = h(
    "div",
    { class: "iglens-components-head" },
    h(
      "h3",
      { class: "iglens-components-title" },
      h("span", { text: "Heads and MLPs in " }),
      h("span", { class: "iglens-components-segment", "data-segment": j, text: segmentText(r, j) }),
      isOnset ? h("span", { class: "iglens-muted", text: " (onset)" }) : null,
    ),
    h("span", { class: "iglens-spacer" }),
    h(
      "label",
      { class: "iglens-components-pick", title: "Click a bar of chart (a) or a heatmap cell of this row to pick a segment" },
      h("span", { class: "iglens-muted", text: "segment" }),
      select,
    ),
  );
  const el = h("section", { class: "iglens-components", "aria-label": `Component shares of ${segmentText(r, j)}`, "data-segment": j }, head);

  const shares = ctx.components.sharesAt(i);
  if (!shares) {
    el.appendChild(status(ctx, r, i, preview));
    return el;
  }
  const M = segmentMatrix(shares, j);
  if (!M.blocks.length) {
    el.appendChild(h("p", { class: "iglens-components-status iglens-muted", text: `No component lies in ${segmentText(r, j)}.` }));
    return el;
  }
  el.appendChild(caption(r, i, M));
  el.appendChild(matrix(ctx, r, M));
  if (M.colNames.includes(COORDINATE)) el.appendChild(coordinateNote(r));
  el.appendChild(sumNote(r, i, j, M));
  return el;
}

/**
 * This view's latest `components` command when it asked for position i of result r, else null.
 * @param {import("./context.js").Context} ctx @param {import("../model/result.js").Result} r @param {number} i
 */
function askedFor(ctx, r, i) {
  const sent = ctx.commands.latest("components");
  return sent && sent.fields.result_id === r.id && sent.fields.position === i ? sent : null;
}

/**
 * The lazy head split: ask Python for the shares of the selected token i (the `components`
 * command) when neither the result nor the trait has them, the kernel is live and this view
 * has not asked for (r, i) already.
 * @param {import("./context.js").Context} ctx @param {import("../model/result.js").Result} r
 * @param {number} i @param {boolean} preview
 */
export function autoRequestComponents(ctx, r, i, preview) {
  if (preview || i < 0 || !r.hasTarget[i] || !ctx.live() || ctx.components.sharesAt(i) || askedFor(ctx, r, i)) return;
  ctx.command("components", { result_id: r.id, position: i });
}

/**
 * Why there is nothing to show, in words.
 * @param {import("./context.js").Context} ctx
 * @param {import("../model/result.js").Result} r @param {number} i @param {boolean} preview
 */
function status(ctx, r, i, preview) {
  const p = (/** @type {string} */ cls, /** @type {string} */ text) => h("p", { class: `iglens-components-status ${cls}`, role: "status", text });
  const answered = askedFor(ctx, r, i)?.answer?.error?.message ?? null;
  const error = answered ?? ctx.componentsError;
  if (error) return p("iglens-components-error", error);
  const known = ctx.components.positions;
  if (ctx.model.get("interactive")) {
    const note = kernelNote(ctx);
    if (note) return p("iglens-muted iglens-kernel-note", note);
    if (askedFor(ctx, r, i)?.answer?.ok) return p("iglens-muted", `Python sent no head shares for position ${i}.`);
    return preview ? p("iglens-muted", "Click the token to compute its head shares.") : p("iglens-components-computing", "computing\u2026");
  }
  if (known.length) {
    const list = known.slice(0, 8).join(", ") + (known.length > 8 ? ", \u2026" : "");
    return p("iglens-muted", `No head shares for position ${i} (computed for ${list}).`);
  }
  return p("iglens-muted iglens-components-hint", NO_SPLIT_HINT);
}

/**
 * The token and the three largest shares by |share|.
 * @param {import("../model/result.js").Result} r @param {number} i
 * @param {import("../model/component-split.js").SegmentMatrix} M
 */
function caption(r, i, M) {
  const target = r.targetTokens[i] || idText(r, r.targetIds[i]);
  const top = M.ranked
    .slice(0, 3)
    .map((cell) => `${cellName(cell)} ${fmtSigned(cell.value)}`)
    .join(", ");
  return h(
    "p",
    { class: "iglens-caption iglens-components-caption" },
    h("span", { text: `Shares of the contribution to ${r.targetName} at [${i}] ` }),
    h("span", { class: "iglens-chip", title: quoteToken(r.tokens[i]), text: formatToken(r.tokens[i], { maxLen: 16 }) }),
    h("span", { text: " \u2192 " }),
    h("span", { class: "iglens-chip iglens-chip-target", title: quoteToken(target), text: formatToken(target, { maxLen: 16 }) }),
    h("span", { text: top ? ". Largest: " : ". No finite share." }),
    top ? h("span", { class: "iglens-components-top", text: top }) : null,
  );
}

/**
 * The block × component table: cells coloured on the heatmap's scale (same limit), NaN grey.
 * @param {import("./context.js").Context} ctx
 * @param {import("../model/result.js").Result} r
 * @param {import("../model/component-split.js").SegmentMatrix} M
 */
function matrix(ctx, r, M) {
  const theme = ctx.theme === "dark" ? "dark" : "light";
  const scale = divergingScale(r.contribLimit, theme);
  const wide = M.cols.length <= 4; // few columns: the values fit in the cells
  const table = h(
    "table",
    { class: "iglens-components-matrix" + (wide ? " iglens-components-wide" : ""), "data-view": "components", "data-segment": M.j },
    h("caption", { class: "iglens-sr-only", text: `Share of each block and component in ${segmentText(r, M.j)}; rows are blocks, columns components` }),
  );
  const headRow = h("tr", {}, h("th", { scope: "col", class: "iglens-components-corner", text: "block" }));
  M.colNames.forEach((name) => headRow.appendChild(h("th", { scope: "col", title: name, text: shortName(name) })));
  table.appendChild(h("thead", {}, headRow));
  const body = h("tbody");
  M.blocks.forEach((block, q) => {
    const tr = h("tr", {}, h("th", { scope: "row", text: `L${block}` }));
    for (const cell of M.cells[q]) {
      if (!cell) {
        // that (block, component) belongs to another segment
        tr.appendChild(h("td", { class: "iglens-comp-out", "aria-hidden": "true" }));
        continue;
      }
      const finite = Number.isFinite(cell.value);
      const words = `${cellName(cell)} (${cell.name}): ${finite ? fmtSigned(cell.value) : "not applicable"}`;
      const td = h(
        "td",
        {
          class: "iglens-comp-cell" + (finite ? "" : " iglens-comp-nan"),
          "data-block": cell.block,
          "data-component": cell.name,
          "data-share": String(cell.value),
          title: words,
          "aria-label": words,
        },
        h("span", { class: wide ? "iglens-comp-value" : "iglens-sr-only", text: finite ? fmtSigned(cell.value) : "\u2013" }),
      );
      const rgb = scale.rgb(cell.value);
      td.style.backgroundColor = rgb ? `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})` : NAN_COLOR[theme];
      if (rgb && wide) td.style.color = textColorFor(rgb);
      tr.appendChild(td);
    }
    body.appendChild(tr);
  });
  table.appendChild(body);
  return h("div", { class: "iglens-components-scroll", tabindex: 0, role: "region", "aria-label": `component shares of ${segmentText(r, M.j)}` }, table);
}

/**
 * What the `coord` column is (a fitted lens's split only).
 * @param {import("../model/result.js").Result} r
 */
function coordinateNote(r) {
  return h(
    "p",
    { class: "iglens-caption iglens-muted iglens-components-coordinate" },
    h("strong", { text: "coord" }),
    h("span", {
      text: ` (coordinate): the change of the ${lensPhrase(r.lens)}'s coordinates along the segment (its translator at the segment's end against its start, applied to the state), at the segment's last block; not a head's or an MLP's write.`,
    }),
  );
}

/**
 * The check in numbers: Σ shares against the segment's contribution.
 * @param {import("../model/result.js").Result} r @param {number} i @param {number} j
 * @param {import("../model/component-split.js").SegmentMatrix} M
 */
function sumNote(r, i, j, M) {
  const c = contribution(r, i, j);
  const ok = Number.isFinite(c) && Math.abs(M.sum - c) <= 1e-4 * Math.max(1, Math.abs(c));
  return h(
    "div",
    { class: "iglens-components-sum" + (ok ? " iglens-ok" : " iglens-warn") },
    h("span", { class: "iglens-check", "aria-hidden": "true", text: ok ? "\u2713" : "\u2260" }),
    h("span", { class: "iglens-components-sum-text", text: `\u03a3 shares = ${fmtSigned(M.sum)}, contribution of ${segmentText(r, j)} = ${fmtSigned(c)}` }),
    h("span", {
      class: "iglens-muted",
      text: ok ? " \u00b7 the shares add up to the segment's contribution" : " \u00b7 the shares do not add up to the contribution",
    }),
  );
}
