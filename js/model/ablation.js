/**
 * The causal check (docs/widget-protocol.md, the `ablation` trait): for one token, the drop
 * of the lens value when each segment is zero-ablated in the real forward pass (its total
 * effect, at the answer position or at every position), its direct effect (later blocks
 * frozen: a readout of h_n without the segment's update) and, with a counterfactual prompt,
 * the normalised patching effects, set beside the IG-Lens contributions. Decoding,
 * validation, the fit with the result, the numbers of the caption (Spearman ρ of each series
 * against the contributions, the largest of each) and the command's fields. Pure: no DOM.
 * @module ablation
 */
import { isObject, answerTrait } from "./answer-trait.js";

/**
 * @typedef {object} Ablation a decoded `ablation` trait (the drops of one position)
 * @property {number} position
 * @property {string} mode "zero"
 * @property {Float64Array} drops (k) the drop of the lens value per segment (NaN: not finite / null)
 * @property {number} clean the lens value in the unablated model (NaN when absent)
 * @property {string[]} labels (k) segment labels, as the result names them
 * @property {string[]|null} parts (k) what each ablation removed: "block", "attn", "mlp" (null when absent)
 * @property {number|null} targetId the token whose probability was measured
 * @property {number|null} contrastId the contrast token (null: none)
 * @property {string|null} targetName what the drops are drops of ("p(target)")
 * @property {number} seconds how long Python took (NaN when absent)
 * @property {"target"|"all"|null} positions where the total effect's ablation acted (null: not said, read as "all")
 * @property {Float64Array|null} direct (k) the direct effect per segment (null when absent)
 * @property {Patching|null} patching the counterfactual patching effects (null: none asked)
 *
 * @typedef {object} Patching the normalised noising effects of a counterfactual prompt
 * @property {Float64Array} total (k) with the rest of the forward pass running
 * @property {Float64Array} direct (k) with the later blocks frozen
 * @property {string[]} tokens the corrupt prompt's tokens, cut at the answer position (untrusted text)
 * @property {string} prompt the corrupt prompt as given (untrusted text)
 * @property {string} contrast the corrupt prompt's answer token (untrusted text)
 * @property {number|null} contrastId
 * @property {number} cleanMetric logit(target) − logit(contrast) on the clean prompt (NaN when absent)
 * @property {number} corruptMetric the same on the corrupt prompt (NaN when absent)
 * @property {boolean} normalized whether the effects could be normalised (else NaN)
 * @property {string[]} warnings
 *
 * @typedef {object} AblationFit what a check must agree with: the result it belongs to
 * @property {number} T
 * @property {number} k
 * @property {string[]} segmentLabels
 * @property {ArrayLike<number>} targetIds
 *
 * @typedef {object} TraitAblation the `ablation` trait, read against the current result
 * @property {Ablation|null} ablation usable for the current result
 * @property {string|null} error why the trait could not be read (Python's errors come in answers)
 * @property {boolean} stale a check of another result (by its `result_id`): not shown
 *
 * @typedef {object} Comparison contributions against drops over the segments of one token
 * @property {number} rho Spearman's rank correlation (average ranks for ties; NaN with fewer than
 *   2 finite pairs or a constant series)
 * @property {number} n the number of segments with both values finite
 * @property {number} topContribution the segment with the largest signed contribution (-1: none)
 * @property {number} topDrop the segment with the largest signed drop (-1: none)
 * @property {boolean} agree both are the same segment
 */

/** Whether a trait value means "no check": null, undefined or `{}`. @param {unknown} raw */
export const isEmptyAblation = (raw) => raw === null || raw === undefined || (isObject(raw) && Object.keys(raw).length === 0);

/** An optional finite number (null / undefined → NaN). @param {unknown} v @param {string} name */
function num(v, name) {
  if (v === null || v === undefined) return NaN;
  if (typeof v !== "number") throw new TypeError(`${name} must be a number, got ${JSON.stringify(v) ?? typeof v}`);
  return v;
}

/** An optional integer id (null / undefined → null). @param {unknown} v @param {string} name */
function id(v, name) {
  if (v === null || v === undefined) return null;
  if (!Number.isInteger(v) || /** @type {number} */ (v) < 0) throw new RangeError(`${name} must be a token id (an integer >= 0), got ${JSON.stringify(v)}`);
  return /** @type {number} */ (v);
}

/**
 * Decode the `ablation` trait's drops. Returns null for null, undefined or `{}`;
 * throws a TypeError (wrong type) or RangeError (wrong shape or value) naming the key.
 * @param {unknown} raw @param {string} [where] how messages name it
 * @returns {Ablation|null}
 */
export function decodeAblation(raw, where = "the ablation trait") {
  if (isEmptyAblation(raw)) return null;
  if (!isObject(raw)) throw new TypeError(`${where} must be an object {position, mode, drops, clean, labels, …}`);
  const position = raw.position;
  if (!Number.isInteger(position) || position < 0)
    throw new TypeError(`${where}.position must be a position (an integer >= 0), got ${JSON.stringify(position)}`);
  if (typeof raw.mode !== "string" || !raw.mode) throw new TypeError(`${where}.mode must name the ablation mode ("zero")`);
  const drops = raw.drops;
  if (!Array.isArray(drops) || drops.length === 0 || !drops.every((v) => v === null || typeof v === "number")) {
    throw new TypeError(`${where}.drops must be a non-empty list of numbers (null: not finite)`);
  }
  const k = drops.length;
  const labels = raw.labels;
  if (!Array.isArray(labels) || !labels.every((l) => typeof l === "string")) throw new TypeError(`${where}.labels must be a list of segment labels`);
  if (labels.length !== k) throw new RangeError(`${where}.labels has ${labels.length} entries, drops ${k}: one per segment`);
  let parts = null;
  if (raw.parts !== undefined && raw.parts !== null) {
    if (!Array.isArray(raw.parts) || !raw.parts.every((p) => typeof p === "string"))
      throw new TypeError(`${where}.parts must be a list of strings ("block", "attn", "mlp")`);
    if (raw.parts.length !== k) throw new RangeError(`${where}.parts has ${raw.parts.length} entries, drops ${k}: one per segment`);
    parts = raw.parts.slice();
  }
  if (raw.target_name !== undefined && raw.target_name !== null && typeof raw.target_name !== "string") {
    throw new TypeError(`${where}.target_name must be a string`);
  }
  const positions = raw.positions ?? null;
  if (positions !== null && positions !== "target" && positions !== "all") throw new TypeError(`${where}.positions must be "target" or "all"`);
  const direct = raw.direct === undefined || raw.direct === null ? null : series(raw.direct, k, `${where}.direct`);
  const patching = raw.patching === undefined || raw.patching === null ? null : decodePatching(raw.patching, k, `${where}.patching`);
  return {
    position,
    mode: raw.mode,
    drops: Float64Array.from(drops, (v) => (v === null ? NaN : v)),
    clean: num(raw.clean, `${where}.clean`),
    labels: labels.slice(),
    parts,
    targetId: id(raw.target_id, `${where}.target_id`),
    contrastId: id(raw.contrast_id, `${where}.contrast_id`),
    targetName: typeof raw.target_name === "string" && raw.target_name ? raw.target_name : null,
    seconds: num(raw.seconds, `${where}.seconds`),
    positions,
    direct,
    patching,
  };
}

/**
 * A list of k numbers (null: not finite) as a Float64Array (NaN for null).
 * @param {unknown} v @param {number} k @param {string} name
 */
function series(v, k, name) {
  if (!Array.isArray(v) || !v.every((x) => x === null || typeof x === "number")) throw new TypeError(`${name} must be a list of numbers (null: not finite)`);
  if (v.length !== k) throw new RangeError(`${name} has ${v.length} entries, drops ${k}: one per segment`);
  return Float64Array.from(v, (x) => (x === null ? NaN : x));
}

/** A list of strings. @param {unknown} v @param {string} name @returns {string[]} */
function strings(v, name) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw new TypeError(`${name} must be a list of strings`);
  return v.slice();
}

/**
 * Decode the trait's `patching` object.
 * @param {unknown} raw @param {number} k @param {string} where
 * @returns {Patching}
 */
function decodePatching(raw, k, where) {
  if (!isObject(raw)) throw new TypeError(`${where} must be an object {total, direct, tokens, contrast, …} or null`);
  const text = (/** @type {unknown} */ v, /** @type {string} */ name) => {
    if (v === undefined || v === null) return "";
    if (typeof v !== "string") throw new TypeError(`${where}.${name} must be a string`);
    return v;
  };
  return {
    total: series(raw.total, k, `${where}.total`),
    direct: series(raw.direct, k, `${where}.direct`),
    tokens: strings(raw.tokens, `${where}.tokens`),
    prompt: text(raw.prompt, "prompt"),
    contrast: text(raw.contrast, "contrast"),
    contrastId: id(raw.contrast_id, `${where}.contrast_id`),
    cleanMetric: num(raw.clean_metric, `${where}.clean_metric`),
    corruptMetric: num(raw.corrupt_metric, `${where}.corrupt_metric`),
    normalized: raw.normalized !== false,
    warnings: strings(raw.warnings, `${where}.warnings`),
  };
}

/**
 * Why a check does not belong to a result (null when it does): its position, its segments
 * (number and labels) and the measured token must match.
 * @param {Ablation} a @param {AblationFit} r
 * @returns {string|null}
 */
export function ablationMismatch(a, r) {
  if (a.position >= r.T) return `position ${a.position}, the result has ${r.T} positions`;
  if (a.drops.length !== r.k) return `${a.drops.length} drops, the result has ${r.k} segments`;
  const j = a.labels.findIndex((label, q) => label !== r.segmentLabels[q]);
  if (j >= 0) return `segment ${j} is ${JSON.stringify(a.labels[j])}, the result's ${JSON.stringify(r.segmentLabels[j])}`;
  if (a.targetId !== null && a.targetId !== Number(r.targetIds[a.position])) {
    return `target id ${a.targetId}, the result's ${r.targetIds[a.position]} at position ${a.position}`;
  }
  return null;
}

/**
 * Read the `ablation` trait against the current result: `{}` / absent → nothing; a check of
 * another result (its `result_id` is not the result's `id`) → stale (not shown); a check of
 * this result that is not of the documented form, or does not fit the result, → the reason
 * (reported). Never throws.
 * @param {unknown} raw @param {(AblationFit & {id: string})|null} r
 * @returns {TraitAblation}
 */
export function readAblationTrait(raw, r) {
  /** @type {TraitAblation} */
  const none = { ablation: null, error: null, stale: false };
  const bad = (/** @type {string} */ why) => ({ ...none, error: `Could not read the ablation drops: ${why}` });
  const got = answerTrait(raw, r, "the ablation trait");
  if (got.kind === "empty") return none;
  if (got.kind === "not-object") return bad("the ablation trait must be an object {position, mode, drops, labels, result_id, …}");
  if (got.kind === "error") return bad(got.why);
  if (got.kind === "stale" || !r) return { ...none, stale: true };
  let a;
  try {
    a = decodeAblation(raw);
  } catch (err) {
    return bad(err instanceof Error ? err.message : String(err));
  }
  if (!a) return none;
  const why = ablationMismatch(a, r);
  if (why) return bad(`it does not fit the result: ${why}`);
  return { ...none, ablation: a };
}

/**
 * Ranks 1 … n with ties given their average rank.
 * @param {number[]} v
 */
export function ranks(v) {
  const order = v.map((x, q) => q).sort((a, b) => v[a] - v[b]);
  const out = new Array(v.length);
  for (let s = 0; s < order.length;) {
    let e = s;
    while (e + 1 < order.length && v[order[e + 1]] === v[order[s]]) e++;
    const rank = (s + e) / 2 + 1;
    for (let q = s; q <= e; q++) out[order[q]] = rank;
    s = e + 1;
  }
  return out;
}

/**
 * Spearman's ρ of the pairs where both are finite: the Pearson correlation of their ranks
 * (ties: average ranks). NaN with fewer than 2 pairs or when either side is constant.
 * @param {ArrayLike<number>} a @param {ArrayLike<number>} b
 */
export function spearman(a, b) {
  const xs = [],
    ys = [];
  for (let q = 0; q < Math.min(a.length, b.length); q++) {
    if (Number.isFinite(a[q]) && Number.isFinite(b[q])) {
      xs.push(a[q]);
      ys.push(b[q]);
    }
  }
  if (xs.length < 2) return NaN;
  const rx = ranks(xs),
    ry = ranks(ys);
  const mean = (xs.length + 1) / 2;
  let sxy = 0,
    sxx = 0,
    syy = 0;
  for (let q = 0; q < rx.length; q++) {
    const dx = rx[q] - mean,
      dy = ry[q] - mean;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : NaN;
}

/** The index of the largest finite value (the first on ties), -1 when none. @param {ArrayLike<number>} v */
export function argmax(v) {
  let best = -1;
  for (let q = 0; q < v.length; q++) if (Number.isFinite(v[q]) && (best < 0 || v[q] > v[best])) best = q;
  return best;
}

/**
 * Contributions against drops over the segments of one token.
 * @param {ArrayLike<number>} contributions @param {ArrayLike<number>} drops
 * @returns {Comparison}
 */
export function compareAblation(contributions, drops) {
  let n = 0;
  for (let q = 0; q < Math.min(contributions.length, drops.length); q++) if (Number.isFinite(contributions[q]) && Number.isFinite(drops[q])) n++;
  const topContribution = argmax(contributions);
  const topDrop = argmax(drops);
  return { rho: spearman(contributions, drops), n, topContribution, topDrop, agree: topContribution >= 0 && topContribution === topDrop };
}

/** ρ as text: "+0.62", "−0.10", "n/a". @param {number} rho */
export function rhoText(rho) {
  if (!Number.isFinite(rho)) return "n/a";
  return (rho < 0 ? "\u2212" : "+") + Math.abs(rho).toFixed(2);
}

/**
 * @typedef {object} CausalSummary every series of a check against the contributions
 * @property {Comparison} total the total effect (the ablation drop)
 * @property {Comparison|null} direct the direct effect (null when the check has none)
 * @property {Comparison|null} patchTotal the patching effect, total (null: no counterfactual)
 * @property {Comparison|null} patchDirect the patching effect, direct
 */

/**
 * Each series of a check against the contributions of its position.
 * @param {ArrayLike<number>} contributions @param {Ablation} a
 * @returns {CausalSummary}
 */
export function causalSummary(contributions, a) {
  const vs = (/** @type {ArrayLike<number>|null|undefined} */ v) => (v ? compareAblation(contributions, v) : null);
  return {
    total: compareAblation(contributions, a.drops),
    direct: vs(a.direct),
    patchTotal: vs(a.patching?.total),
    patchDirect: vs(a.patching?.direct),
  };
}

/** The general sentence under the chart, for a check with nothing finite to compare: readable is not computed. */
export const READABLE_NOT_COMPUTED =
  "IG-Lens shows where the answer becomes readable at the output; ablation and patching show what the model computes with each block, so the two can differ without either being wrong.";

/**
 * The plain sentence under the caption: what the check compares and what its outcome means.
 * Agreement: the block where the probability becomes readable (the largest contribution) is
 * also the one whose removal hurts it most (the largest drop). Disagreement is not an error:
 * readable in the lens is not the same as computed there.
 * @param {Comparison} cmp the total effect against the contributions (`compareAblation`)
 * @param {string} [unit] what one ablation removes: "block", "segment" or "sub-layer"
 */
export function agreementSentence(cmp, unit = "block") {
  if (cmp.topContribution < 0 || cmp.topDrop < 0) return READABLE_NOT_COMPUTED;
  const compares = `The check compares where the probability becomes readable (the largest contribution) with where removing a ${unit} hurts it most (the largest drop)`;
  return cmp.agree
    ? `${compares}: here they agree, so the ${unit} that makes the answer readable is also one the model needs to compute it.`
    : `${compares}: here they disagree, which is not an error — readable in the lens is not the same as computed there: a ${unit} can compute what only a later ${unit} makes readable.`;
}

/**
 * @typedef {object} CheckChoice what the causal check's controls ask for
 * @property {"target"|"all"} positions
 * @property {string} counterfactual the corrupt prompt as typed ("" for none)
 * @property {string} contrast its answer token as typed ("" for the model's top-1)
 */

/** The controls' defaults: the answer position only, no counterfactual. @returns {CheckChoice} */
export const defaultChoice = () => ({ positions: "target", counterfactual: "", contrast: "" });

/**
 * The `ablation` command's fields for a choice: the prompt and contrast as typed (a prompt
 * of only spaces is none; the contrast goes only with a prompt).
 * @param {string} resultId @param {number} position @param {CheckChoice} choice
 */
export function checkFields(resultId, position, choice) {
  const prompt = choice.counterfactual.trim() ? choice.counterfactual : null;
  return {
    result_id: resultId,
    position,
    positions: choice.positions === "all" ? "all" : "target",
    counterfactual: prompt,
    contrast: prompt && choice.contrast !== "" ? choice.contrast : null,
  };
}

/** Where the total effect's ablation acted, in words. @param {"target"|"all"|null} positions */
export const positionsText = (positions) => (positions === "target" ? "at the answer position" : "at every position");
