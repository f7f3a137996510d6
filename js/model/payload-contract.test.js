// @vitest-environment jsdom
// The contract between the Python payload and the front end: js/testing/payload.json is made
// by js/testing/make_payload.py (a tiny random Llama, the same functions the widget calls);
// here the real codec decodes it and the real app renders it. A payload change on the Python
// side that the JS cannot read fails here; tests/protocol/test_payload_contract.py fails when the
// committed file is not regenerated after one.
import { describe, it, expect, beforeAll, afterEach } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, fire } from "../testing/dom.js";
import { decodeResult, contributionSum } from "./result.js";
import { readComponentsTrait } from "./component-split.js";
import { readAblationTrait } from "./ablation.js";
import { readPathTrait } from "./path.js";
import { readGatesTrait, cumulativePercent, counterfactualText } from "./gates.js";
import { formatToken } from "../lib/tokens.js";
import { completenessText } from "../lib/format.js";
import { render } from "../views/app.js";
import { createModel } from "../standalone.js";
import { readAnswer } from "./commands.js";

/** @type {{state: Record<string, any>, ablation: Record<string, any>, path: Record<string, any>, gates: Record<string, any>, answers: Record<string, any>[], expected: Record<string, any>}} */
const golden = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));
const want = golden.expected;

beforeAll(() => {
  installFakeCanvas();
});
afterEach(() => {
  document.body.replaceChildren();
});

const decoded = () => /** @type {import("./result.js").Result} */ (decodeResult(structuredClone(golden.state.result)));

function mountGolden() {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const model = createModel(structuredClone(golden.state));
  render({ model, el });
  return { el, model };
}

describe("the Python payload (js/testing/payload.json)", () => {
  it("decodes with the real codec into the values Python computed", () => {
    const r = decoded();
    const i = want.position;
    expect(r.tokens).toEqual(want.tokens);
    expect(r.targetTokens).toEqual(want.target_tokens);
    expect(r.segmentLabels).toEqual(want.segment_labels);
    expect(r.nBlocks).toBe(want.n_blocks);
    expect(r.k).toBe(want.contributions.length);
    for (let j = 0; j < r.k; j++) expect(r.contributions[i * r.k + j]).toBe(want.contributions[j]); // float32, exactly
    expect(r.deltaP[i]).toBe(want.delta_p);
    expect(contributionSum(r, i)).toBeCloseTo(want.sum, 12);
    // completeness: Σ contributions = Δp (the prediction-aware estimator is exact)
    expect(Math.abs(contributionSum(r, i) - r.deltaP[i])).toBeLessThan(1e-6);
  });

  it("the answers (components, ablation, path) fit the result", () => {
    const r = decoded();
    const comp = readComponentsTrait(structuredClone(golden.state.components), r);
    expect(comp.error ?? null).toBeNull();
    const abl = readAblationTrait(structuredClone(golden.ablation), r);
    expect(abl.error).toBeNull();
    expect(abl.ablation).not.toBeNull();
    expect(Array.from(/** @type {any} */ (abl.ablation).drops)).toEqual(golden.ablation.drops);
    const path = readPathTrait(structuredClone(golden.path), r);
    expect(path.error).toBeNull();
    expect(path.path).not.toBeNull();
  });

  it("reads Python's answer envelopes, and the answers name the shown result and their request", () => {
    const answers = golden.answers.map((a) => readAnswer(structuredClone(a)));
    const resultId = golden.state.result.id;
    expect(typeof resultId).toBe("string");
    expect(answers.map((a) => a && [a.requestId, a.command, a.ok, a.resultId])).toEqual([
      ["t-1", "hello", true, resultId],
      ["t-2", "components", true, resultId],
      ["t-3", "ablation", true, resultId],
      ["t-4", "path", true, resultId],
      ["t-5", "path", false, resultId],
      ["t-6", "gates", true, resultId],
    ]);
    expect(answers[4]?.error?.type).toBe("InvalidRequestError");
    expect(answers[4]?.error?.message).toContain("position");
    for (const [trait, request] of /** @type {const} */ ([
      [golden.state.components, "t-2"],
      [golden.ablation, "t-3"],
      [golden.path, "t-4"],
      [golden.gates, "t-6"],
    ])) {
      expect(trait.result_id).toBe(resultId);
      expect(trait.request_id).toBe(request);
    }
  });

  it("renders: token texts, the selected token's bars and completeness line, the model name as text", () => {
    const { el } = mountGolden();
    const r = decoded();
    const i = want.position;
    const items = /** @type {HTMLElement[]} */ ([...el.querySelectorAll(".iglens-strip [data-token-index]")]);
    expect(items.map((t) => t.textContent)).toEqual(want.tokens.map((/** @type {string} */ t) => formatToken(t, { maxLen: 32 })));
    const detail = /** @type {HTMLElement} */ (el.querySelector(".iglens-detail"));
    expect(detail.getAttribute("data-selected-index")).toBe(String(i));
    expect(detail.textContent).toContain(want.target_tokens[i]);
    expect(el.querySelectorAll(".iglens-detail .iglens-bar").length).toBe(want.contributions.length);
    const line = /** @type {HTMLElement} */ (el.querySelector(".iglens-completeness"));
    expect(line.textContent).toContain(completenessText(contributionSum(r, i), r.deltaP[i]));
    expect(line.classList.contains("iglens-ok")).toBe(true);
    expect(el.textContent).toContain("tiny-llama <b>"); // a string, never markup
    expect(el.querySelector("b")).toBeNull();
  });

  it("renders the answers: component matrix, ablation drops, interior path", () => {
    const { el, model } = mountGolden();
    expect(el.querySelector("[data-view=components]")).not.toBeNull();
    expect(el.querySelectorAll("[data-view=components] [data-component]").length).toBeGreaterThan(0);
    model.set("ablation", structuredClone(golden.ablation));
    const drops = [...el.querySelectorAll("[data-series=ablation] [data-drop]")].map((b) => Number(b.getAttribute("data-drop")));
    expect(drops).toEqual(golden.ablation.drops);
    model.set("path", structuredClone(golden.path));
    expect(el.querySelector("[data-series=lazy-path]")?.getAttribute("data-steps")).toBe(String(golden.path.steps));
    const lines = [...el.querySelectorAll(".iglens-path")];
    expect(lines.length).toBe(golden.path.path.length);
    expect(lines[0].getAttribute("data-values")?.split(" ").map(Number)).toEqual(golden.path.path[0]);
    void fire;
  });

  it("reads and draws the gate game: three ledgers, their sentences, the counterfactual as text", () => {
    const r = decoded();
    const g = golden.gates;
    const read = readGatesTrait(structuredClone(g), r);
    expect(read.error).toBeNull();
    const gates = /** @type {import("./gates.js").Gates} */ (read.gates);
    expect(gates.position).toBe(want.position);
    expect(gates.ledgers.map((l) => l.key)).toEqual(["readable", "arrives", "shared"]);
    expect(Array.from(gates.ledgers[0].values)).toEqual(g.readable);
    expect(Array.from(gates.ledgers[1].values)).toEqual(g.entries.reverse);
    expect(Array.from(gates.ledgers[2].values)).toEqual(g.entries.diagonal);
    // every ledger of the game sums to its total; IG-Lens's to Δp (float64 sums in JS)
    expect(gates.ledgers[2].total).toBeCloseTo(g.total, 12);
    expect(gates.ledgers[1].total).toBeCloseTo(g.total, 12);
    const { el, model } = mountGolden();
    model.set("gates", structuredClone(g));
    const panel = /** @type {HTMLElement} */ (el.querySelector(".iglens-detail .iglens-gates"));
    expect(panel.getAttribute("data-position")).toBe(String(want.position));
    for (const [key, values] of /** @type {const} */ ([
      ["readable", g.readable],
      ["arrives", g.entries.reverse],
      ["shared", g.entries.diagonal],
    ])) {
      const bars = [...panel.querySelectorAll(`[data-ledger=${key}] .iglens-gates-bar`)].map((b) => Number(b.getAttribute("data-value")));
      expect(bars).toEqual(values);
      expect(panel.querySelector(`li[data-ledger=${key}]`)?.textContent).toBe(g.sentences[key]);
    }
    expect(panel.querySelector(".iglens-gates-counterfactual")?.textContent).toBe(counterfactualText(gates));
    // the student view: each ledger's running total in percent, plain words
    model.set("view", "lesson");
    const lesson = /** @type {HTMLElement} */ (el.querySelector(".iglens-lesson .iglens-gates"));
    const curve = lesson.querySelector("[data-ledger=shared].iglens-gates-curve");
    const last = curve?.getAttribute("points")?.split(" ").length;
    expect(last).toBe(g.labels.length + 1);
    expect(cumulativePercent(gates.ledgers[2])[g.labels.length]).toBeCloseTo(100, 9);
    expect(lesson.querySelector("li[data-ledger=shared]")?.textContent).toBe(g.plain_sentences.shared);
  });

  it("shows a game for its result and position only", () => {
    const r = decoded();
    const other = { ...structuredClone(golden.gates), result_id: "another" };
    expect(readGatesTrait(other, r)).toEqual({ gates: null, error: null });
    const bad = { ...structuredClone(golden.gates), labels: "1,2" };
    expect(readGatesTrait(bad, r).error).toContain("gates.labels must be a list of strings");
    const { el, model } = mountGolden();
    model.set("gates", { ...structuredClone(golden.gates), position: want.position - 1 });
    expect(el.querySelector(".iglens-detail .iglens-gates-figure")).toBeNull();
  });
});
