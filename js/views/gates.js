/**
 * The block-gate game's panel (the `gates` command and trait; js/model/gates.js): a counterfactual
 * box ("What is the capital of Italy?"), the button that asks Python to play the game for the
 * shown token, its progress and Cancel, and — with the game of that token — one chart of the
 * three ledgers and one sentence each. Two faces: the detail panel's (bars per block in
 * probability units, research words) and the student view's (`plain`: each ledger as a curve
 * on the block axis in percent of its total, words a class can follow; folded under its title
 * until opened, and absent from a page with no kernel and no game, so the lesson still fits
 * one screen). Never "computed" or
 * "decides": readable, arrives, credit. Token texts and the counterfactual are inserted as
 * text only.
 * @module views/gates
 */
import { h, s, clear, uniqueId } from "../lib/dom.js";
import { linearScale } from "../lib/layout.js";
import { LEDGERS, readGatesTrait, gateFields, cumulativePercent, counterfactualText } from "../model/gates.js";
import { kernelNote, requestError } from "./kernel.js";
import { formatToken } from "../lib/tokens.js";

/** What the box asks for, per context (it survives re-renders and both faces share it). */
const typed = new WeakMap();
/** Whether the student view's fold is open, per context. */
const unfolded = new WeakMap();

const WORDS = {
  research: {
    title: "Causal check: the block-gate game",
    intro:
      "Type the same question about another subject (as many tokens long). Three exact ledgers of one probability: where the answer becomes readable (IG-Lens), where the answer-specific information arrives (patching), and each block's shared credit.",
    button: "Play the gate game",
  },
  plain: {
    title: "Which block? Compare with another question",
    intro:
      "Type the same question about something else (e.g. another country). The model runs both, and we see in which block the difference arrives, and how the blocks share the credit.",
    button: "Compare",
  },
};

/**
 * The running game: Python's `running`, or this view's own command not answered yet.
 * @param {import("./context.js").Context} ctx
 */
const gatesBusy = (ctx) => ctx.running()?.command === "gates" || !!ctx.commands.pending("gates");

/**
 * The error of this view's latest game when it was for position i of the shown result, until a
 * later request is sent (a message belongs to its request: js/views/kernel.js).
 * @param {import("./context.js").Context} ctx @param {string} resultId @param {number} i
 */
function gatesError(ctx, resultId, i) {
  return requestError(ctx.commands, "gates", (sent) => sent.fields.result_id === resultId && sent.fields.position === i);
}

/**
 * The panel. `show(r, i, width, dark)` draws it for position i; it redraws itself when the
 * `gates`, `running` or `progress` traits change or an answer arrives.
 * @param {import("./context.js").Context} ctx
 * @param {{plain?: boolean}} [options]
 */
export function createGamePanel(ctx, options = {}) {
  const plain = !!options.plain;
  const words = plain ? WORDS.plain : WORDS.research;
  const el = plain ? h("details", { class: "iglens-gates iglens-gates-plain" }) : h("section", { class: "iglens-gates", "aria-label": words.title });
  el.addEventListener("toggle", () => {
    if (plain) unfolded.set(ctx, /** @type {HTMLDetailsElement} */ (el).open);
  });
  /** @type {{r: import("../model/result.js").Result, i: number, width: number, dark: boolean}|null} */
  let at = null;
  const redraw = () => at && draw(at.r, at.i, at.width, at.dark);
  const onModel = () => redraw();
  for (const name of ["change:gates", "change:running", "change:progress", "change:interactive"]) ctx.model.on(name, onModel);
  // any command: its answer, or a later request that takes this one's message away
  const offCommands = ctx.commands.listen(() => redraw());

  /** @param {import("../model/result.js").Result} r @param {number} i @param {number} width @param {boolean} dark */
  function draw(r, i, width, dark) {
    at = { r, i, width, dark };
    const focused = el.contains(document.activeElement)
      ? document.activeElement?.getAttribute("data-action") || document.activeElement?.getAttribute("name")
      : null;
    clear(el);
    el.setAttribute("data-position", String(i));
    const trait = readGatesTrait(ctx.model.get("gates"), r);
    const g = trait.gates && trait.gates.position === i ? trait.gates : null;
    const live = ctx.live();
    el.hidden = plain && !live && !g; // a page with no kernel and no game: nothing to show
    const title = h(plain ? "summary" : "h4", { class: "iglens-gates-title", text: words.title });
    el.append(title, h("p", { class: "iglens-muted iglens-gates-intro", text: words.intro }));
    // opened by the reader's own choice, else when a game for this position is there
    if (plain) /** @type {HTMLDetailsElement} */ (el).open = unfolded.has(ctx) ? !!unfolded.get(ctx) : !!g;
    if (live || !g) el.append(form(r, i, live));
    const err = gatesBusy(ctx) ? null : (gatesError(ctx, r.id, i) ?? trait.error);
    if (err) el.append(h("p", { class: "iglens-gates-error", role: "alert", text: err }));
    if (g) el.append(...result(g, width, dark));
    if (focused) /** @type {HTMLElement|null} */ (el.querySelector(`[data-action="${focused}"], [name="${focused}"]`))?.focus();
  }

  /** The box, the button, Cancel and the status. @param {import("../model/result.js").Result} r @param {number} i @param {boolean} live */
  function form(r, i, live) {
    const busy = live && gatesBusy(ctx);
    const statusId = uniqueId("gates-status");
    const input = h("input", {
      type: "text",
      name: "gates-counterfactual",
      class: "iglens-gates-input",
      placeholder: "the same question about another subject",
      spellcheck: "false",
      autocomplete: "off",
      "aria-label": "Counterfactual question: the same question about another subject, as many tokens long",
      "aria-describedby": statusId,
    });
    input.value = typed.get(ctx) ?? "";
    input.disabled = !live;
    const play = h("button", { type: "submit", class: "iglens-gates-play", "data-action": "gates", text: words.button });
    const cancel = h("button", { type: "button", class: "iglens-gates-cancel", "data-action": "gates-cancel", text: "Cancel" });
    const status = h("span", { class: "iglens-gates-status iglens-muted", id: statusId, role: "status" });
    cancel.hidden = !busy;
    if (!live) {
      play.disabled = true;
      status.textContent = kernelNote(ctx) || "needs a Python kernel with the model";
    } else if (busy) {
      play.setAttribute("aria-disabled", "true");
      play.classList.add("iglens-busy");
      const p = Number(ctx.model.get("progress"));
      status.textContent = Number.isFinite(p) && p >= 0 ? `playing\u2026 ${Math.round(100 * p)}%` : "playing\u2026";
    }
    const box = h("form", { class: "iglens-gates-form" }, input, play, cancel, status);
    box.addEventListener("input", () => typed.set(ctx, input.value));
    box.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!ctx.live() || gatesBusy(ctx) || ctx.running() || !input.value.trim()) return;
      ctx.command("gates", gateFields(r.id, i, input.value));
      redraw();
    });
    cancel.addEventListener("click", () => {
      const id = ctx.running()?.command === "gates" ? ctx.running()?.id : ctx.commands.pending("gates")?.id;
      if (id) ctx.command("cancel", { request_id: id });
      status.textContent = "cancelling\u2026";
    });
    // keys typed in the box are not the strip's, the heatmap's or the walk's
    box.addEventListener("keydown", (e) => e.stopPropagation());
    return box;
  }

  /** The chart, its legend, the sentences and what the game ran against. @param {import("../model/gates.js").Gates} g @param {number} width @param {boolean} dark */
  function result(g, width, dark) {
    const chart = plain ? curves(g, width, dark) : bars(g, width, dark);
    const legend = h(
      "div",
      { class: "iglens-chart-legend iglens-gates-legend" },
      ...g.ledgers.map((l) => {
        const style = LEDGERS.find((x) => x.key === l.key);
        const sw = h("span", { class: `iglens-gates-swatch${plain ? " iglens-gates-swatch-line" : ""}`, "aria-hidden": "true" });
        sw.style.setProperty("--iglens-gates-color", style ? (dark ? style.dark : style.color) : "currentColor");
        const total = plain ? "" : ` (Σ ${l.total >= 0 ? "+" : ""}${l.total.toFixed(3)})`;
        return h(
          "span",
          { class: "iglens-key", "data-ledger": l.key },
          sw,
          h("span", { text: `${style ? (plain ? style.plain : style.words) : l.key}${total}` }),
        );
      }),
    );
    const sentences = h(
      "ul",
      { class: "iglens-gates-sentences" },
      ...g.ledgers.map((l) => h("li", { "data-ledger": l.key, text: plain ? l.plain : l.sentence })),
    );
    const against = h(
      "p",
      { class: "iglens-caption iglens-gates-against" },
      h("span", { class: "iglens-muted", text: "against: " }),
      h("span", { class: "iglens-gates-counterfactual", text: counterfactualText(g) }),
      h("span", {
        class: "iglens-muted",
        text: ` \u00b7 ${g.target ? `p(${formatToken(g.target, { maxLen: 16 })}) ` : ""}${(100 * g.end).toFixed(1)}% here, ${(100 * g.start).toFixed(1)}% there \u00b7 m = ${g.steps}${Number.isFinite(g.seconds) ? ` \u00b7 ${g.seconds.toFixed(1)} s` : ""}`,
      }),
    );
    return [h("figure", { class: "iglens-figure iglens-gates-figure" }, chart), legend, sentences, against];
  }

  return {
    el,
    show: draw,
    destroy() {
      for (const name of ["change:gates", "change:running", "change:progress", "change:interactive"]) ctx.model.off(name, onModel);
      offCommands();
      at = null;
    },
  };
}

/** Chart frame: an SVG of the given size with its title. @param {number} W @param {number} H @param {string} title */
function frame(W, H, title) {
  return s(
    "svg",
    { class: "iglens-gates-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title },
    s("title", { text: title }),
  );
}

/**
 * The detail panel's chart: per block, one bar per ledger in probability units.
 * @param {import("../model/gates.js").Gates} g @param {number} width @param {boolean} dark
 */
export function bars(g, width, dark) {
  const W = Math.max(260, width);
  const H = 150;
  const M = { left: 44, right: 8, top: 8, bottom: 22 };
  const k = g.labels.length;
  let lo = 0,
    hi = 0;
  for (const l of g.ledgers) for (const v of l.values) if (Number.isFinite(v)) ((lo = Math.min(lo, v)), (hi = Math.max(hi, v)));
  if (lo === hi) hi = 1e-9;
  const y = linearScale([lo, hi], [H - M.bottom, M.top]);
  const slot = (W - M.left - M.right) / k;
  const svg = frame(W, H, "the three ledgers per block, in probability units");
  svg.append(s("line", { class: "iglens-axis", x1: M.left, x2: W - M.right, y1: y(0), y2: y(0) }));
  for (const v of [lo, hi]) svg.append(s("text", { class: "iglens-tick", x: M.left - 4, y: y(v) + 3, "text-anchor": "end", text: v.toFixed(2) }));
  const every = Math.max(1, Math.ceil(k / Math.floor((W - M.left) / 28)));
  for (let j = 0; j < k; j++) {
    if (j % every === every - 1 || j === k - 1)
      svg.append(s("text", { class: "iglens-tick", x: M.left + (j + 0.5) * slot, y: H - 6, "text-anchor": "middle", text: g.labels[j] }));
  }
  const w = (0.84 * slot) / g.ledgers.length;
  for (const [q, l] of g.ledgers.entries()) {
    const style = LEDGERS.find((x) => x.key === l.key);
    const series = s("g", { class: "iglens-gates-series", "data-ledger": l.key, fill: style ? (dark ? style.dark : style.color) : "currentColor" });
    for (let j = 0; j < k; j++) {
      const v = l.values[j];
      if (!Number.isFinite(v)) continue;
      const x0 = M.left + j * slot + 0.08 * slot + q * w;
      series.append(
        s(
          "rect",
          {
            class: "iglens-gates-bar",
            "data-gate": g.labels[j],
            "data-value": String(v),
            x: x0,
            width: Math.max(0.5, w),
            y: Math.min(y(v), y(0)),
            height: Math.max(0.5, Math.abs(y(v) - y(0))),
          },
          s("title", { text: `block ${g.labels[j]}: ${v >= 0 ? "+" : ""}${v.toFixed(4)}` }),
        ),
      );
    }
    svg.append(series);
  }
  return svg;
}

/**
 * The student view's chart: each ledger's running total in percent of its total after each
 * block (0 at the embeddings, 100 after the last block).
 * @param {import("../model/gates.js").Gates} g @param {number} width @param {boolean} dark
 */
export function curves(g, width, dark) {
  const W = Math.max(260, width);
  const H = 160;
  const M = { left: 40, right: 10, top: 10, bottom: 22 };
  const k = g.labels.length;
  const lines = g.ledgers.map((l) => ({ l, c: cumulativePercent(l) }));
  let lo = 0,
    hi = 100;
  for (const { c } of lines) for (const v of c) if (Number.isFinite(v)) ((lo = Math.min(lo, v)), (hi = Math.max(hi, v)));
  const x = linearScale([0, k], [M.left, W - M.right]);
  const y = linearScale([lo, hi], [H - M.bottom, M.top]);
  const svg = frame(W, H, "each ledger's running total after each block, in percent");
  for (const v of [0, 100]) {
    svg.append(s("line", { class: "iglens-grid", x1: M.left, x2: W - M.right, y1: y(v), y2: y(v) }));
    svg.append(s("text", { class: "iglens-tick", x: M.left - 4, y: y(v) + 3, "text-anchor": "end", text: `${v}%` }));
  }
  for (const L of [0, k])
    svg.append(s("text", { class: "iglens-tick", x: x(L), y: H - 6, "text-anchor": L ? "end" : "start", text: L ? `block ${k}` : "embeddings" }));
  for (const { l, c } of lines) {
    const style = LEDGERS.find((q) => q.key === l.key);
    const points = [...c].map((v, L) => (Number.isFinite(v) ? `${x(L).toFixed(1)},${y(v).toFixed(1)}` : "")).filter(Boolean);
    svg.append(
      s("polyline", {
        class: "iglens-gates-curve",
        "data-ledger": l.key,
        fill: "none",
        stroke: style ? (dark ? style.dark : style.color) : "currentColor",
        "stroke-width": 2,
        points: points.join(" "),
      }),
    );
  }
  return svg;
}
