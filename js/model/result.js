/**
 * The `result` trait (docs/widget-protocol.md) decoded once into typed arrays plus the few
 * derived numbers the views need. Pure: no DOM.
 * @module result
 */
import { decodeArray, isPayload } from "./codec.js";
import { decodeComponents, componentsMismatch } from "./component-split.js";
import { tokenFlags } from "../lib/nonmonotone.js";
import { readAnswers } from "./answers.js";
import { checkPayload } from "./payload-schema.js";

/**
 * @typedef {import("./codec.js").TypedArray} TypedArray
 *
 * @typedef {object} Result
 * @property {string} id the result's id (the commands' `result_id`; "" in payloads without one)
 * @property {number} T positions
 * @property {number} k segments
 * @property {number} K top tokens kept per boundary (0 when none)
 * @property {number} m interpolation steps per segment in `pathProbs` (0 when none)
 * @property {string[]} tokens
 * @property {string[]} targetTokens
 * @property {string[]|null} contrastTokens
 * @property {Int32Array|TypedArray|null} inputIds
 * @property {TypedArray} targetIds
 * @property {Int32Array} onset  segment index j of the onset (-1 none): the protocol's `onset_segment`
 *   (older payloads without it: the segment that ends at block `onset`)
 * @property {Int32Array} onsetBlock  the protocol's `onset`: the block of the onset segment's end,
 *   ceil(boundaries[j+1]) (-1 none); not unique under sub-layer boundaries
 * @property {TypedArray} contributions (T·k)
 * @property {TypedArray} lensProbs (T·(k+1))
 * @property {TypedArray} deltaP (T)
 * @property {TypedArray|null} topIds (T·(k+1)·K)
 * @property {TypedArray|null} topProbs
 * @property {TypedArray|null} pathProbs (T·k·(m+1))
 * @property {Record<string, string>} tokenText
 * @property {number[]} boundaries (k+1) depths: ints, and L − 0.5 (after block L's attention, before
 *   its MLP) under sub-layer boundaries
 * @property {boolean} halves some boundary is a half depth (the "sublayer" spec)
 * @property {number} answerStart the first position whose target is a generated answer token (T when
 *   there is no answer): position i is "answer" iff i >= answerStart, in every view
 * @property {string} estimator
 * @property {number} steps
 * @property {string} lens the lens the states were read through: "logit" (the raw logit lens; also for a
 *   payload without `lens`) or a fitted lens's name ("shortcut", "tuned", "jacobian", a saved lens's
 *   name: untrusted text, shown through `model/lens-name.js`)
 * @property {string} modelName
 * @property {string} family
 * @property {number} nBlocks
 * @property {Controls} controls what the controls are prefilled with
 * @property {Record<string, any>|null} request the frozen request's JSON form (provenance; null when absent)
 * @property {string} targetName the lens value's name: "p(target)" or "p(target) − p(contrast)"
 * @property {string[]} segmentLabels one per segment ("12", "11–15", "12.attn", "12.mlp"), as Python names them
 * @property {boolean} singleBlocks every segment is one block
 * @property {number} maxSteps the most interpolation steps a request may ask for (Python's MAX_STEPS)
 * @property {number} nonmonotoneThreshold the non-monotone rule's threshold (a fraction of the largest |contribution|)
 * @property {boolean} hasContrast
 * @property {number} contribLimit max |contribution| over all cells (1 when all zero)
 * @property {number} deltaLimit max |Δp| (1 when all zero)
 * @property {boolean} signedProbs lens values can be negative (a contrast): p_final is signed
 * @property {boolean[]} hasTarget per position
 * @property {import("./component-split.js").Components|null} components the payload's `components` (null when absent)
 * @property {string|null} componentsError why `components` could not be read (the rest of the result stands)
 * @property {TypedArray|null} lensLogprobs (T·(k+1)) log p(target) at every boundary (`lens_logprobs`); null with a
 *   contrast, or when absent
 * @property {import("./answers.js").Ledger|null} answer the whole answer's ledgers (`answer`)
 * @property {import("./answers.js").Ledger|null} versus the `versus=` answer's ledgers (`versus`)
 * @property {import("./answers.js").AnswerComparison|null} answerComparison the differential ledger (the payload's
 *   `comparison` key; not the `comparison` trait of several results)
 * @property {string|null} answersError why the whole-answer parts could not be read (the rest of the result stands)
 * @property {import("../lib/nonmonotone.js").TokenFlags} nonmono the non-monotone positions (the rule of
 *   `lib/nonmonotone.js` with `nonmonotoneThreshold`, on the contributions and the result's path)
 *
 * @typedef {object} Controls the protocol's `controls`: the text of each control
 * @property {string} target
 * @property {string} contrast "" when there is none
 * @property {string} boundaries "all", "every:5" or "0,10,20,30"
 * @property {string} estimator
 * @property {number} steps
 * @property {string} lens the lens to send back to keep this one: `controls.lens` when Python gives it
 *   (a saved lens's path, say), else the result's `lens` ("logit" for the logit lens)
 */

/** @param {unknown} v @param {string} name */
function arr(v, name) {
  if (v === null || v === undefined) return null;
  if (!isPayload(v)) throw new TypeError(`result.${name} is not an ndarray payload`);
  return decodeArray(v);
}

/** A plain object (not null, not an array). @param {unknown} v @returns {v is Record<string, any>} */
const isObject = (v) => !!v && typeof v === "object" && !Array.isArray(v);

/** @param {unknown} v @param {string} name @returns {string} */
function str(v, name) {
  if (typeof v !== "string") throw new TypeError(`result.${name} must be a string, got ${JSON.stringify(v) ?? typeof v}`);
  return v;
}

/** The protocol's `controls` (every field required). @param {unknown} v @returns {Controls} */
function decodeControls(v) {
  if (!isObject(v)) throw new TypeError("result.controls must be an object {target, contrast, boundaries, estimator, steps}");
  const steps = Number(v.steps);
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`result.controls.steps must be an integer >= 1, got ${JSON.stringify(v.steps)}`);
  return {
    target: str(v.target, "controls.target"),
    contrast: str(v.contrast, "controls.contrast"),
    boundaries: str(v.boundaries, "controls.boundaries"),
    estimator: str(v.estimator, "controls.estimator"),
    steps,
    lens: v.lens == null ? "" : str(v.lens, "controls.lens"),
  };
}

/**
 * The result's lens (`lens`: absent in payloads from before lenses, then the logit lens) and
 * its `controls`, whose `lens` is Python's `controls.lens` (present only for a fitted lens: a
 * kind, or a saved lens's path) or else the lens's name.
 * @param {Record<string, any>} raw
 */
function decodeLens(raw) {
  const lensName = raw.lens == null || raw.lens === "" ? "logit" : str(raw.lens, "lens");
  const controls = decodeControls(raw.controls);
  if (!controls.lens) controls.lens = lensName;
  return { lensName, controls };
}

/** max |x| over finite values; 1 when there is nothing nonzero (Python `symmetric_limit`). @param {ArrayLike<number>} values */
export function symmetricLimit(values) {
  let vmax = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v) && Math.abs(v) > vmax) vmax = Math.abs(v);
  }
  return vmax > 0 ? vmax : 1;
}

/**
 * Decode the `result` trait. Returns null for an empty/missing result.
 * @param {any} raw
 * @returns {Result|null}
 */
export function decodeResult(raw) {
  if (!raw || typeof raw !== "object" || !raw.contributions) return null;
  if (raw.id !== undefined && typeof raw.id !== "string") throw new TypeError(`result.id must be a string, got ${JSON.stringify(raw.id)}`);
  checkPayload(raw); // every field's kind, every array's rank, dtype kind and sizes: Python's schema
  const contributions = /** @type {import("./codec.js").NDArray} */ (arr(raw.contributions, "contributions"));
  const [T, k] = contributions.shape;
  const lens = arr(raw.lens_probs, "lens_probs");
  const delta = arr(raw.delta_p, "delta_p");
  const targetIds = arr(raw.target_ids, "target_ids");
  const onsetArr = arr(raw.onset, "onset");
  if (!onsetArr || onsetArr.data.length !== T) throw new TypeError("result.onset must be an int32 (T,) payload (block numbers, -1 = none)");
  const top = arr(raw.top_ids, "top_ids");
  const topP = arr(raw.top_probs, "top_probs");
  const path = arr(raw.path_probs, "path_probs");
  const inputIds = arr(raw.input_ids, "input_ids");
  if (!lens || lens.shape[0] !== T || lens.shape[1] !== k + 1) throw new RangeError("result.lens_probs must be (T, k+1)");
  const boundaries = Array.isArray(raw.boundaries) && raw.boundaries.length === k + 1 ? raw.boundaries.map(Number) : Array.from({ length: k + 1 }, (_, j) => j);
  for (let j = 0; j <= k; j++) {
    if (!Number.isFinite(boundaries[j]) || (j > 0 && !(boundaries[j] > boundaries[j - 1]))) {
      throw new RangeError(`result.boundaries must be increasing depths, got ${JSON.stringify(raw.boundaries)}`);
    }
  }
  const lensProbs = lens.data;
  let deltaP = delta?.data;
  if (!deltaP) {
    deltaP = new Float32Array(T);
    for (let i = 0; i < T; i++) deltaP[i] = lensProbs[i * (k + 1) + k] - lensProbs[i * (k + 1)];
  }
  const c = contributions.data;
  // The onset rule lives in Python only. `onset_segment` names the segment j directly;
  // `onset` is its block, ceil(boundaries[j+1]) (under sub-layer boundaries both halves of a
  // block share it). Payloads without `onset_segment`: the segment that ends at that block
  // (a block that ends no segment counts as none).
  const onset = new Int32Array(T).fill(-1);
  const onsetBlock = new Int32Array(T).fill(-1);
  const onsetSeg = arr(raw.onset_segment, "onset_segment");
  if (onsetSeg) {
    if (onsetSeg.data.length !== T) throw new RangeError(`result.onset_segment must have shape (T=${T},), got ${JSON.stringify(onsetSeg.shape)}`);
    for (let i = 0; i < T; i++) {
      const j = onsetSeg.data[i];
      if (!Number.isInteger(j) || j < -1 || j >= k) throw new RangeError(`result.onset_segment must hold segment indices in [-1, ${k - 1}], got ${j}`);
      onset[i] = j;
      onsetBlock[i] = j >= 0 ? onsetArr.data[i] : -1;
    }
  } else {
    const segOfBlock = new Map(boundaries.slice(1).map((/** @type {number} */ blk, /** @type {number} */ j) => [blk, j]));
    for (let i = 0; i < T; i++) {
      const blk = onsetArr.data[i];
      const j = segOfBlock.get(blk);
      if (j !== undefined) {
        onset[i] = j;
        onsetBlock[i] = blk;
      }
    }
  }
  const answerStart = raw.answer_start;
  if (typeof answerStart !== "number" || !Number.isInteger(answerStart) || answerStart < 0 || answerStart > T) {
    throw new RangeError(`result.answer_start must be an integer in [0, T=${T}], got ${JSON.stringify(raw.answer_start)}`);
  }
  const threshold = raw.nonmonotone_threshold;
  if (typeof threshold !== "number" || !(threshold >= 0 && threshold <= 1)) {
    throw new RangeError(`result.nonmonotone_threshold must be a fraction in [0, 1], got ${JSON.stringify(raw.nonmonotone_threshold)}`);
  }
  const maxSteps = raw.max_steps;
  if (!Number.isInteger(maxSteps) || maxSteps < 1) {
    throw new RangeError(`result.max_steps must be an integer >= 1, got ${JSON.stringify(raw.max_steps)}`);
  }
  const labels = raw.segment_labels;
  if (!Array.isArray(labels) || labels.length !== k || !labels.every((l) => typeof l === "string")) {
    throw new TypeError(`result.segment_labels must be ${k} strings (one per segment)`);
  }
  const { lensName, controls } = decodeLens(raw);
  const targetName = str(raw.target_name, "target_name");
  if (!targetName) throw new TypeError("result.target_name must not be empty");
  if (raw.request != null && !isObject(raw.request)) throw new TypeError("result.request must be an object");
  const tids = targetIds?.data ?? new Int32Array(T).fill(0);
  const hasTarget = new Array(T);
  let signed = false;
  for (let i = 0; i < T; i++) hasTarget[i] = tids[i] >= 0 && Number.isFinite(deltaP[i]);
  for (let n = 0; n < lensProbs.length; n++)
    if (lensProbs[n] < 0) {
      signed = true;
      break;
    }
  const tokens = Array.isArray(raw.tokens) ? raw.tokens.map(String) : Array.from({ length: T }, () => "");
  const targetTokens = Array.isArray(raw.target_tokens) ? raw.target_tokens.map(String) : tokens.map(() => "");
  const contrastTokens = Array.isArray(raw.contrast_tokens) ? raw.contrast_tokens.map(String) : null;
  const K = top && top.shape.length === 3 ? top.shape[2] : 0;
  const m = path && path.shape.length === 3 ? path.shape[2] - 1 : 0;
  const nBlocks = Number(raw.n_blocks ?? Math.ceil(boundaries[boundaries.length - 1]));
  // The component split is optional: a malformed one is reported in its own section, the
  // rest of the result stands.
  let components = null;
  let componentsError = null;
  try {
    components = decodeComponents(raw.components, "result.components");
    const why = components && componentsMismatch(components, { T, k, nBlocks, boundaries });
    if (why) throw new RangeError(why);
  } catch (err) {
    components = null;
    componentsError = err instanceof Error ? err.message : String(err);
  }
  return {
    id: typeof raw.id === "string" ? raw.id : "",
    T,
    k,
    K,
    m,
    tokens,
    targetTokens,
    contrastTokens,
    inputIds: inputIds?.data ?? null,
    targetIds: tids,
    onset,
    onsetBlock,
    contributions: c,
    lensProbs,
    deltaP,
    topIds: K ? /** @type {any} */ (top).data : null,
    topProbs: K && topP ? topP.data : null,
    pathProbs: m > 0 ? /** @type {any} */ (path).data : null,
    tokenText: raw.token_text && typeof raw.token_text === "object" ? raw.token_text : {},
    boundaries,
    answerStart,
    estimator: String(raw.estimator ?? "prediction_aware"),
    steps: Number(raw.steps ?? (m || 1)),
    modelName: String(raw.model_name ?? ""),
    family: String(raw.family ?? ""),
    nBlocks,
    lens: lensName,
    controls,
    request: isObject(raw.request) ? { ...raw.request } : null,
    targetName,
    segmentLabels: labels.slice(),
    singleBlocks: boundaries.every((/** @type {number} */ blk, /** @type {number} */ j) => j === 0 || blk - boundaries[j - 1] === 1),
    halves: boundaries.some((/** @type {number} */ d) => !Number.isInteger(d)),
    nonmonotoneThreshold: threshold,
    maxSteps,
    hasContrast: !!contrastTokens,
    contribLimit: symmetricLimit(c),
    deltaLimit: symmetricLimit(deltaP),
    signedProbs: signed || !!contrastTokens,
    hasTarget,
    components,
    componentsError,
    ...readAnswers(raw, T, k), // optional too: a malformed part is reported in the answers panel
    nonmono: tokenFlags(c, deltaP, k, threshold, m > 0 ? /** @type {any} */ (path).data : null),
  };
}

/**
 * A segment in words: "block 12", "blocks 11–15", "block 12.attn" (its payload label after
 * "block" or "blocks").
 * @param {Result} r @param {number} j
 */
export function segmentText(r, j) {
  const width = r.boundaries[j + 1] - r.boundaries[j];
  return `${width > 1 ? "blocks" : "block"} ${r.segmentLabels[j]}`;
}

/**
 * A depth (a boundary) in words: "embeddings" (0), "block 12" (the state after block 12),
 * "block 12.attn" (depth 11.5: after block 12's attention, before its MLP).
 * @param {number} d
 */
export function depthText(d) {
  if (d === 0) return "embeddings";
  return Number.isInteger(d) ? `block ${d}` : `block ${Math.ceil(d)}.attn`;
}

/** Text of a token id via `token_text` (`<id>` when unknown). @param {Result} r @param {number} id */
export function idText(r, id) {
  const t = r.tokenText[String(id)];
  return t === undefined ? `<${id}>` : t;
}

/** Contribution of segment j at position i. @param {Result} r @param {number} i @param {number} j */
export const contribution = (r, i, j) => r.contributions[i * r.k + j];

/** Lens value of the target at boundary j (0..k). @param {Result} r @param {number} i @param {number} j */
export const lensAt = (r, i, j) => r.lensProbs[i * (r.k + 1) + j];

/** Final lens value of the target (f(h_n)). @param {Result} r @param {number} i */
export const pFinal = (r, i) => r.lensProbs[i * (r.k + 1) + r.k];

/** One row of contributions (a view). @param {Result} r @param {number} i */
export const contributionRow = (r, i) => r.contributions.subarray(i * r.k, (i + 1) * r.k);

/** One row of lens values (k+1). @param {Result} r @param {number} i */
export const lensRow = (r, i) => r.lensProbs.subarray(i * (r.k + 1), (i + 1) * (r.k + 1));

/** Path of position i, flat (k·(m+1)), or null. @param {Result} r @param {number} i */
export function pathRow(r, i) {
  if (!r.pathProbs) return null;
  const n = r.k * (r.m + 1);
  return r.pathProbs.subarray(i * n, (i + 1) * n);
}

/**
 * Top-n lens tokens at boundary j of position i: [{id, text, p}].
 * @param {Result} r @param {number} i @param {number} j @param {number} [n]
 */
export function topAt(r, i, j, n = 5) {
  if (!r.K || !r.topIds) return [];
  const base = (i * (r.k + 1) + j) * r.K;
  const out = [];
  for (let q = 0; q < Math.min(n, r.K); q++) {
    const id = r.topIds[base + q];
    if (id < 0) continue;
    out.push({ id, text: idText(r, id), p: r.topProbs ? r.topProbs[base + q] : NaN });
  }
  return out;
}

/**
 * Sum of the contributions of position i (float64 accumulation).
 * @param {Result} r @param {number} i
 */
export function contributionSum(r, i) {
  let s = 0;
  for (let j = 0; j < r.k; j++) s += r.contributions[i * r.k + j];
  return s;
}
