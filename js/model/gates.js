/**
 * The block-gate game of one token (docs/widget-protocol.md, the `gates` trait; docs/method.md
 * section 6): three exact ledgers of one probability — where the answer becomes readable
 * (IG-Lens), where the answer-specific information arrives (the reverse staircase: patching)
 * and each block's shared credit (the diagonal). Decoding and validation of the trait, the
 * command's fields, and the numbers the views draw. Pure: no DOM.
 * @module gates
 */
import { isObject, answerTrait } from "./answer-trait.js";

/**
 * @typedef {object} Ledger one ledger of the game, as the views show it
 * @property {"readable"|"arrives"|"shared"} key
 * @property {Float64Array} values (k) per block, probability units (NaN: null)
 * @property {number} total their sum (IG-Lens's: Δp; the game's: p(clean) − p(counterfactual))
 * @property {string} sentence Python's sentence (research words)
 * @property {string} plain Python's sentence for a class
 *
 * @typedef {object} Gates a decoded `gates` trait
 * @property {number} position
 * @property {string} target the target token's text (untrusted)
 * @property {string[]} labels (k) the gates' labels
 * @property {Ledger[]} ledgers readable, arrives, shared (those present)
 * @property {number} start G(0): the counterfactual's probability of the target
 * @property {number} end G(1): the clean run's
 * @property {number} steps the diagonal's steps
 * @property {string} prompt the counterfactual as typed (untrusted)
 * @property {string} answerOpening its answer up to the position, the subject swapped (untrusted; "" in the prompt)
 * @property {string[]} corruptTokens the counterfactual sequence's tokens (untrusted)
 * @property {number} seconds
 * @property {string} resultId
 * @property {string} requestId
 *
 * @typedef {object} TraitGates the `gates` trait, read against the current result
 * @property {Gates|null} gates usable for the current result
 * @property {string|null} error why the trait could not be read (Python's errors come in answers)
 */

/** Each ledger's trait field, words and colours (Python: iglens_viz/views/causal.py GATE_LEDGER_STYLE). */
export const LEDGERS = /** @type {const} */ ([
  { key: "readable", words: "becomes readable (IG-Lens)", plain: "becomes readable", color: "#7f7f7f", dark: "#b0b0b0" },
  { key: "arrives", words: "arrives (patching)", plain: "arrives", color: "#d9822b", dark: "#f0a35e" },
  { key: "shared", words: "shared credit", plain: "credit", color: "#3b6fb6", dark: "#7fa8e6" },
]);

/** @param {unknown} v */
const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : NaN);

/** @param {unknown} raw @param {string} where @returns {Float64Array|string} */
function floats(raw, where) {
  if (!Array.isArray(raw)) return `${where} must be a list of numbers`;
  const out = new Float64Array(raw.length);
  for (const [j, v] of raw.entries()) {
    if (v !== null && typeof v !== "number") return `${where}[${j}] must be a number or null`;
    out[j] = num(v);
  }
  return out;
}

/** @param {unknown} raw @param {string} where @returns {string[]|string} */
function strings(raw, where) {
  if (!Array.isArray(raw) || raw.some((s) => typeof s !== "string")) return `${where} must be a list of strings`;
  return /** @type {string[]} */ (raw);
}

/**
 * Read the `gates` trait: null for `{}`, a message for a value that is not of the documented
 * form, and nothing for a game of another result (by its `result_id`).
 * @param {unknown} trait @param {{id: string}|null} result
 * @returns {TraitGates}
 */
export function readGatesTrait(trait, result) {
  const fail = (/** @type {string} */ error) => ({ gates: null, error: `Could not read the gate game: ${error}` });
  const got = answerTrait(trait, result, "gates");
  if (got.kind === "error") return fail(got.why);
  if (got.kind !== "mine") return { gates: null, error: null }; // nothing, or another result's
  const { raw, ids } = got;
  if (!Number.isInteger(raw.position) || raw.position < 0) return fail("gates.position must be an integer >= 0");
  const labels = strings(raw.labels, "gates.labels");
  if (typeof labels === "string") return fail(labels);
  const entries = isObject(raw.entries) ? raw.entries : {};
  const sentences = isObject(raw.sentences) ? raw.sentences : {};
  const plain = isObject(raw.plain_sentences) ? raw.plain_sentences : {};
  const fields = { readable: raw.readable, arrives: entries.reverse, shared: entries.diagonal };
  /** @type {Ledger[]} */
  const ledgers = [];
  for (const { key } of LEDGERS) {
    if (fields[key] === undefined || fields[key] === null) continue;
    const values = floats(fields[key], `gates.${key}`);
    if (typeof values === "string") return fail(values);
    if (values.length !== labels.length) return fail(`gates.${key} has ${values.length} values for ${labels.length} gates`);
    const total = values.reduce((a, v) => a + (Number.isFinite(v) ? v : 0), 0);
    ledgers.push({ key, values, total, sentence: String(sentences[key] ?? ""), plain: String(plain[key] ?? "") });
  }
  const corrupt = raw.corrupt_tokens === undefined ? [] : strings(raw.corrupt_tokens, "gates.corrupt_tokens");
  if (typeof corrupt === "string") return fail(corrupt);
  return {
    error: null,
    gates: {
      position: raw.position,
      target: String(raw.target ?? ""),
      labels,
      ledgers,
      start: num(raw.start),
      end: num(raw.end),
      steps: Number.isInteger(raw.steps) ? raw.steps : 0,
      prompt: String(raw.prompt ?? ""),
      answerOpening: String(raw.answer_opening ?? ""),
      corruptTokens: corrupt,
      seconds: num(raw.seconds),
      resultId: ids.resultId,
      requestId: ids.requestId,
    },
  };
}

/**
 * The `gates` command's fields. @param {string} resultId @param {number} position @param {string} counterfactual
 * @returns {{result_id: string, position: number, counterfactual: string}}
 */
export function gateFields(resultId, position, counterfactual) {
  return { result_id: resultId, position, counterfactual: counterfactual.trim() };
}

/**
 * A ledger as a cumulative curve in percent of its total at the block boundaries 0 … k:
 * 0 at the embeddings, 100 after the last block (NaN throughout when the total is 0).
 * @param {Ledger} ledger @returns {Float64Array}
 */
export function cumulativePercent(ledger) {
  const out = new Float64Array(ledger.values.length + 1);
  let sum = 0;
  for (const [j, v] of ledger.values.entries()) {
    sum += Number.isFinite(v) ? v : 0;
    out[j + 1] = ledger.total ? (100 * sum) / ledger.total : NaN;
  }
  if (!ledger.total) out[0] = NaN;
  return out;
}

/**
 * What the game ran against, as one line (untrusted: insert as text): the question as typed,
 * then its answer's opening up to the gated position.
 * @param {Gates} g
 */
export const counterfactualText = (g) => (g.answerOpening ? `\u201c${g.prompt}\u201d, then \u201c${g.answerOpening}\u201d` : `\u201c${g.prompt}\u201d`);
