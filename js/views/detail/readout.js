/**
 * Below and across the detail panel's charts: the crosshair and readout shared by the three
 * charts (and chart (a)'s click, which picks the segment of the heads section), and the list
 * of non-monotone segments and steps (text, so colour is never the only cue).
 * @module views/detail/readout
 */
import { h, s, clear, listen, uniqueId } from "../../lib/dom.js";
import { formatToken } from "../../lib/tokens.js";
import { ruleText, stepRuleText, flagged } from "../../lib/nonmonotone.js";
import { topAt, segmentText, depthText } from "../../model/result.js";
import { fmtProb, fmtSigned } from "../../lib/format.js";

/**
 * @param {import("../context.js").Context} ctx
 * @param {import("../../model/result.js").Result} r @param {number} i @param {import("./space.js").ChartSpace} S
 * @param {import("./space.js").ChartFrame} A @param {import("./space.js").ChartFrame} B
 * @param {import("./space.js").ChartFrame|null} C @param {ArrayLike<number>|null} drops
 */
export function crosshair(ctx, r, i, S, A, B, C, drops) {
  const { M, b, k, c, lens, segFlags, x } = S;
  /** @type {Array<() => void>} */
  const offs = [];
  const readout = h("div", { class: "iglens-readout", id: uniqueId("readout"), "aria-live": "off" });
  const defaultReadout = () => {
    clear(readout);
    readout.appendChild(h("span", { class: "iglens-muted", text: "Hover or Tab to a chart (\u2190 \u2192) for the values at each block." }));
  };
  defaultReadout();
  const guides = [A, B, C].filter(Boolean).map((F) => {
    const line = s("line", {
      class: "iglens-guide",
      x1: 0,
      x2: 0,
      y1: M.top,
      y2: Number(/** @type {any} */ (F).svg.getAttribute("height")) - M.bottom,
      visibility: "hidden",
    });
    /** @type {any} */ (F).svg.appendChild(line);
    return line;
  });
  /** @param {number} jb nearest boundary @param {number} js segment */
  const showAt = (/** @type {boolean} */ onBars, jb, js) => {
    const gx = onBars ? (x(b[js]) + x(b[js + 1])) / 2 : x(b[jb]);
    for (const line of guides) {
      line.setAttribute("x1", String(gx));
      line.setAttribute("x2", String(gx));
      line.setAttribute("visibility", "visible");
    }
    clear(readout);
    if (onBars) {
      readout.append(
        h("strong", { text: segmentText(r, js) }),
        h("span", { text: ` contribution ${fmtSigned(c[js])}` }),
        drops ? h("span", { class: "iglens-readout-drop", text: ` \u00b7 ablation drop ${fmtSigned(drops[js])}` }) : "",
        h("span", { class: "iglens-muted", text: ` \u00b7 ${r.targetName} ${fmtProb(lens[js])} \u2192 ${fmtProb(lens[js + 1])}` }),
        segFlags[js] ? h("span", { class: "iglens-flag-text", text: " \u00b7 against \u0394p" }) : "",
      );
    } else {
      const t = topAt(r, i, jb, 1)[0];
      readout.append(
        h("strong", { text: b[jb] === 0 ? "embeddings (L = 0)" : `after ${depthText(b[jb])}` }),
        h("span", { text: ` ${r.targetName} ${fmtProb(lens[jb])}` }),
        t ? h("span", { class: "iglens-muted", text: " \u00b7 top-1 " }) : "",
        t ? h("span", { class: "iglens-chip", text: formatToken(t.text, { maxLen: 14 }) }) : "",
        t ? h("span", { class: "iglens-muted", text: ` ${fmtProb(t.p)}` }) : "",
      );
    }
  };
  const onMove = (/** @type {MouseEvent} */ e) => {
    const svg = /** @type {SVGElement} */ (e.currentTarget);
    const rect = svg.getBoundingClientRect();
    const bx = x.invert(e.clientX - rect.left);
    // nearest boundary
    let jb = 0;
    for (let j = 1; j <= k; j++) if (Math.abs(b[j] - bx) < Math.abs(b[jb] - bx)) jb = j;
    // segment containing bx
    let js = 0;
    while (js < k - 1 && bx > b[js + 1]) js++;
    readout.setAttribute("aria-live", "off"); // the mouse: no announcements
    showAt(svg === A.svg, jb, js);
  };
  const onLeave = () => {
    for (const line of guides) line.setAttribute("visibility", "hidden");
    defaultReadout();
  };
  for (const F of [A, B, C]) {
    if (!F) continue;
    offs.push(listen(F.svg, "mousemove", onMove), listen(F.svg, "mouseleave", onLeave));
  }
  offs.push(...keyboardReadout(ctx, r, i, k, [A, B, C], readout, showAt, onLeave));
  // a click on chart (a) picks the segment whose head shares the section below shows
  A.svg.classList.add("iglens-chart-pick");
  offs.push(
    listen(A.svg, "click", (/** @type {MouseEvent} */ e) => {
      const rect = A.svg.getBoundingClientRect();
      const bx = x.invert(e.clientX - rect.left);
      let js = 0;
      while (js < k - 1 && bx > b[js + 1]) js++;
      ctx.focusSegment(i, js);
    }),
  );
  return { readout, offs };
}

/**
 * The charts' values by keyboard: each chart is a tab stop; \u2190 \u2192 (Home, End) step through
 * its segments (chart a) or boundaries (b, c), shown by the crosshair and said in the readout
 * (a live region while the keyboard drives it); Enter or Space on chart (a) picks the segment
 * for the heads section, as a click does. The position starts at the onset segment.
 * @param {import("../context.js").Context} ctx @param {import("../../model/result.js").Result} r
 * @param {number} i @param {number} k segments
 * @param {Array<import("./space.js").ChartFrame|null>} frames [A, B, C] @param {HTMLElement} readout
 * @param {(onBars: boolean, jb: number, js: number) => void} showAt @param {() => void} hide
 */
function keyboardReadout(ctx, r, i, k, frames, readout, showAt, hide) {
  const A = frames[0];
  const start = r.onset[i] >= 0 ? r.onset[i] : 0;
  /** @type {Array<() => void>} */
  const offs = [];
  for (const F of frames) {
    if (!F) continue;
    const onBars = F === A;
    const last = onBars ? k - 1 : k; // segments 0..k-1, boundaries 0..k
    let q = onBars ? start : Math.min(k, start + 1);
    const svg = F.svg;
    svg.setAttribute("tabindex", "0");
    // the chart keeps its name; on focus a screen reader also reads the value shown (the readout)
    svg.setAttribute("aria-describedby", readout.id);
    svg.setAttribute("aria-keyshortcuts", onBars ? "ArrowLeft ArrowRight Home End Enter" : "ArrowLeft ArrowRight Home End");
    const say = () => {
      readout.setAttribute("aria-live", "polite");
      showAt(onBars, q, q);
    };
    offs.push(
      listen(svg, "focus", say),
      listen(svg, "blur", hide),
      listen(svg, "keydown", (/** @type {KeyboardEvent} */ e) => {
        const next =
          e.key === "ArrowRight" || e.key === "ArrowDown"
            ? Math.min(last, q + 1)
            : e.key === "ArrowLeft" || e.key === "ArrowUp"
              ? Math.max(0, q - 1)
              : e.key === "Home"
                ? 0
                : e.key === "End"
                  ? last
                  : -1;
        if (onBars && (e.key === "Enter" || e.key === " ")) {
          e.preventDefault();
          ctx.focusSegment(i, q);
          return;
        }
        if (next < 0) return;
        e.preventDefault();
        e.stopPropagation();
        q = next;
        say();
      }),
    );
  }
  return offs;
}

/**
 * @param {import("../../model/result.js").Result} r @param {import("./space.js").ChartSpace} S
 */
export function flagList(r, S) {
  const { k, c, path, segFlags, stepFlags } = S;
  const segs = flagged(segFlags);
  const steps = [];
  if (stepFlags) for (let j = 0; j < k; j++) for (let q = 0; q < stepFlags[j].length; q++) if (stepFlags[j][q]) steps.push([j, q]);
  const flags = h("div", { class: "iglens-flags" });
  const thr = r.nonmonotoneThreshold;
  if (!segs.length && !steps.length) {
    flags.appendChild(
      h("span", {
        class: "iglens-muted iglens-flag-rule",
        text: `Monotone: no segment moves ${ruleText(thr)}` + (path ? `, and no step moves against its segment ${stepRuleText(thr)}.` : "."),
      }),
    );
  } else {
    if (segs.length) {
      flags.appendChild(
        h(
          "div",
          { class: "iglens-flag-line" },
          h("span", { class: "iglens-flag-swatch", "aria-hidden": "true" }),
          h("strong", { text: "Against \u0394p: " }),
          segs.map((j) => `${c[j] < 0 ? "\u25bc" : "\u25b2"} ${r.segmentLabels[j]} (${fmtSigned(c[j])})`).join(", "),
        ),
      );
    }
    if (steps.length) {
      const shown = steps
        .slice(0, 12)
        .map(([j, q]) => `${r.segmentLabels[j]} step ${q + 1}/${r.m}`)
        .join(", ");
      flags.appendChild(
        h(
          "div",
          { class: "iglens-flag-line" },
          h("span", { class: "iglens-flag-x", "aria-hidden": "true", text: "\u00d7" }),
          h("strong", { text: "Steps against their segment: " }),
          shown + (steps.length > 12 ? `, \u2026 (${steps.length} in all)` : ""),
        ),
      );
    }
    flags.appendChild(
      h("div", {
        class: "iglens-muted iglens-flag-rule",
        text: `Flagged: segments that move ${ruleText(thr)}` + (path ? `; steps that move against their segment ${stepRuleText(thr)}.` : "."),
      }),
    );
  }
  return flags;
}
