// @vitest-environment jsdom
import { describe, it, expect, beforeAll } from "vitest";
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { installFakeCanvas, mountWidget, fire } from "../testing/dom.js";
import { makeResult, makeState } from "../testing/fixture.js";

beforeAll(() => {
  installFakeCanvas();
});

const EVIL = "<img src=x onerror=alert(1)>";

describe("untrusted token text", () => {
  it("renders a token that looks like HTML as text, never as markup", () => {
    const tokens = [" The", EVIL, " is", "<script>alert(2)</script>", "\u202e evil", "\n"];
    const result = makeResult({ T: tokens.length, tokens, contrast: true, components: { heads: 2, positions: [0, 1] } });
    // the payload everywhere a string can come from: targets, top-k text, contrast
    result.target_tokens = result.target_tokens.map(() => EVIL);
    for (const id of Object.keys(result.token_text)) result.token_text[id] = EVIL;
    result.contrast_tokens = tokens.map(() => EVIL);
    result.model_name = `<b onmouseover=alert(3)>model</b>`;
    // strings Python names things with: the lens value, the segments, the controls' text
    result.target_name = EVIL;
    result.segment_labels = result.segment_labels.map(() => EVIL);
    result.controls = { ...result.controls, target: EVIL, contrast: EVIL, boundaries: EVIL };
    // the component split's names (column heads, the caption's top shares, cell titles)
    result.components.names = [EVIL, "<script>alert(4)</script>", "mlp", "rest"];
    const { el, model } = mountWidget({ state: { ...makeState(), result, interactive: true } });

    fire(/** @type {Element} */ (el.querySelector("[data-token-index='1']")), "click");
    const canvas = /** @type {Element} */ (el.querySelector("canvas.iglens-heatmap-canvas"));
    fire(canvas, "mousemove", { clientX: 200, clientY: 24 + 1 * 20 + 4 });
    // Python's error messages come in answer envelopes: the recompute's in the error line
    /** @type {HTMLFormElement} */ (el.querySelector(".iglens-controls-form")).requestSubmit();
    model.answer(/** @type {any} */ (model.last("recompute")), { error: { type: EVIL, message: EVIL } });

    expect(el.querySelectorAll("img").length).toBe(0);
    expect(el.querySelectorAll("script").length).toBe(0);
    expect(el.querySelectorAll("b[onmouseover]").length).toBe(0);
    expect(el.querySelectorAll("[onerror]").length).toBe(0);
    expect(document.querySelectorAll("img, b, iframe, object, script").length).toBe(0);
    el.querySelector(".iglens-help-toggle")?.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(document.querySelectorAll("img, b, iframe, object, script").length).toBe(0);
    const strip = /** @type {Element} */ (el.querySelector(".iglens-strip"));
    expect(strip.textContent).toContain(EVIL);
    expect(strip.textContent).toContain("<script>alert(2)</script>");
    expect(strip.textContent).toContain("\\u202e");
    const detail = /** @type {Element} */ (el.querySelector(".iglens-detail"));
    expect(detail.textContent).toContain(EVIL);
    expect(/** @type {Element} */ (el.querySelector("[data-view=components] thead")).textContent).toContain(EVIL);
    fire(/** @type {Element} */ (el.querySelector("[data-token-index='2']")), "click"); // no shares: the page asks Python
    model.answer(/** @type {any} */ (model.last("components")), { error: { type: EVIL, message: EVIL } });
    expect(/** @type {Element} */ (el.querySelector(".iglens-components-status")).textContent).toBe(EVIL);
    expect(document.querySelectorAll("img, b, iframe, object, script").length).toBe(0);
    expect(/** @type {Element} */ (el.querySelector(".iglens-tooltip")).textContent).toContain("<img src=x");
    expect(/** @type {Element} */ (el.querySelector(".iglens-error")).textContent).toBe(EVIL);
    expect(/** @type {Element} */ (el.querySelector(".iglens-heatmap-legend .iglens-legend-title")).textContent).toBe(`contribution to ${EVIL}`);
    expect(/** @type {Element} */ (el.querySelector(".iglens-meta")).textContent).toContain(`target: ${EVIL} vs ${EVIL}`);
    expect(/** @type {HTMLInputElement} */ (el.querySelector("[name=boundaries_custom]")).value).toBe(EVIL);
  });

  it("the front-end source never parses strings as HTML", () => {
    const here = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
    /** @param {string} dir @returns {string[]} */
    const walk = (dir) =>
      readdirSync(dir).flatMap((name) => {
        const p = path.join(dir, name);
        if (name === "node_modules" || name === "dev") return [];
        return statSync(p).isDirectory() ? walk(p) : p.endsWith(".js") && !p.endsWith(".test.js") ? [p] : [];
      });
    const offenders = [];
    for (const file of walk(here)) {
      const src = readFileSync(file, "utf8")
        .replace(/\/\*[\s\S]*?\*\//g, "")
        .replace(/^\s*\/\/.*$/gm, "");
      for (const bad of ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser", "eval(", "new Function"]) {
        if (src.includes(bad)) offenders.push(`${path.relative(here, file)}: ${bad}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
