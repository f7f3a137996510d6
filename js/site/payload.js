/**
 * The widget's `result` payload (docs/widget-protocol.md) from what the site's graphs read:
 * the target's probability at every boundary of every position, the top tokens, the ids.
 * Pure: no DOM, no onnxruntime.
 *
 * With the prediction-aware estimator and one step, segment j's contribution is exactly the
 * first difference p(h_{j+1}) − p(h_j) of the lens's probability, so Σ_j contributions =
 * p_final − p_0 holds by construction; {@link completenessError} measures it in float32.
 * The whole-answer ledgers (`answer`) and `lens_logprobs` need gradients or the target's
 * logit, which the readout graph does not return: they are null here (both are nullable).
 * @module site/payload
 */

import { MAX_STEPS, NONMONOTONE_THRESHOLD } from "../model/protocol.js";

/**
 * @typedef {object} Reading what the page computed for one question
 * @property {string} question the user's text
 * @property {number[]} inputIds prompt and generated ids (T)
 * @property {number} promptLength P: positions of the templated prompt
 * @property {number[]|null} templatePositions the prompt positions that are the chat template's
 * @property {Int32Array} targetIds (T) each position's target
 * @property {Float32Array} lensProbs (T·(n+1)) p(target) at every boundary, position-major
 * @property {Int32Array} topIds (T·(n+1)·K)
 * @property {Float32Array} topProbs (T·(n+1)·K)
 * @property {number} nBlocks n
 * @property {number} topK K
 * @property {number} maxNewTokens the generation limit
 * @property {string} modelName
 * @property {string} family
 * @property {(id: number) => string} decode one id's text (untrusted)
 */

/**
 * @param {"float32"|"int32"} dtype @param {number[]} shape @param {Float32Array|Int32Array} data
 */
const array = (dtype, shape, data) => ({ dtype, shape, buffer: new DataView(data.buffer, data.byteOffset, data.byteLength) });

/**
 * Segment contributions (T·n, float32): the first differences of `lensProbs` along the boundaries.
 * @param {Float32Array} lensProbs (T·(n+1)) @param {number} n
 */
export function firstDifferences(lensProbs, n) {
  const T = lensProbs.length / (n + 1);
  const out = new Float32Array(T * n);
  for (let p = 0; p < T; p++) {
    for (let j = 0; j < n; j++) out[p * n + j] = lensProbs[p * (n + 1) + j + 1] - lensProbs[p * (n + 1) + j];
  }
  return out;
}

/**
 * max over positions of |Σ_j contributions − Δp| (float64 sum of the float32 values).
 * @param {Float32Array} contributions (T·n) @param {Float32Array} deltaP (T)
 */
export function completenessError(contributions, deltaP) {
  const n = contributions.length / deltaP.length;
  let worst = 0;
  for (let p = 0; p < deltaP.length; p++) {
    let sum = 0;
    for (let j = 0; j < n; j++) sum += contributions[p * n + j];
    worst = Math.max(worst, Math.abs(sum - deltaP[p]));
  }
  return worst;
}

/**
 * Per row, the index of the largest finite value (lowest on ties), -1 for none: the onset rule
 * (iglens_viz.core.stats.argmax_rows).
 * @param {Float32Array} values (rows·n) @param {number} n
 */
export function argmaxRows(values, n) {
  const rows = values.length / n;
  const out = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    let best = -1;
    for (let j = 0; j < n; j++) {
      const v = values[r * n + j];
      if (Number.isFinite(v) && (best < 0 || v > values[r * n + best])) best = j;
    }
    out[r] = best;
  }
  return out;
}

/**
 * The position a reader looks at first (iglens_viz.protocol.opening.payload_opening): the
 * first answer position whose target is not among the prompt's ids, else the first answer
 * position, else the last.
 * @param {number[]} inputIds @param {Int32Array} targetIds @param {number} answerStart @param {number} promptLength
 */
export function openingPosition(inputIds, targetIds, answerStart, promptLength) {
  const T = inputIds.length;
  const prompt = new Set(inputIds.slice(0, promptLength));
  for (let p = answerStart; p < T; p++) if (!prompt.has(targetIds[p])) return p;
  return answerStart < T ? answerStart : T - 1;
}

/**
 * The `result` payload of one question, and its completeness error.
 * @param {Reading} r
 * @returns {{payload: Record<string, any>, completeness: number, selected: number}}
 */
export function buildPayload(r) {
  const n = r.nBlocks;
  const T = r.inputIds.length;
  const contributions = firstDifferences(r.lensProbs, n);
  const deltaP = new Float32Array(T);
  for (let p = 0; p < T; p++) deltaP[p] = r.lensProbs[p * (n + 1) + n] - r.lensProbs[p * (n + 1)];
  const segment = argmaxRows(contributions, n);
  const onset = segment.map((j) => (j < 0 ? -1 : j + 1));
  /** @type {Record<string, string>} */
  const tokenText = {};
  const ids = [...new Set([...r.inputIds, ...r.targetIds, ...r.topIds])].filter((i) => i >= 0).sort((a, b) => a - b);
  for (const id of ids) tokenText[String(id)] = r.decode(id);
  const boundaries = Array.from({ length: n + 1 }, (_, i) => i);
  const answerStart = r.promptLength < T ? r.promptLength - 1 : T;
  const controls = { target: "predicted", contrast: "", boundaries: "all", estimator: "prediction_aware", steps: 1 };
  const payload = {
    id: `site-${Date.now().toString(36)}`,
    tokens: r.inputIds.map((i) => tokenText[String(i)]),
    target_tokens: Array.from(r.targetIds, (i) => (i < 0 ? "" : tokenText[String(i)])),
    input_ids: array("int32", [T], Int32Array.from(r.inputIds)),
    target_ids: array("int32", [T], r.targetIds),
    onset: array("int32", [T], onset),
    contributions: array("float32", [T, n], contributions),
    lens_probs: array("float32", [T, n + 1], r.lensProbs),
    delta_p: array("float32", [T], deltaP),
    top_ids: array("int32", [T, n + 1, r.topK], r.topIds),
    top_probs: array("float32", [T, n + 1, r.topK], r.topProbs),
    path_probs: null,
    token_text: tokenText,
    boundaries,
    onset_segment: array("int32", [T], segment),
    segment_labels: boundaries.slice(1).map(String),
    prompt_length: r.promptLength,
    answer_start: answerStart,
    target_name: "p(target)",
    nonmonotone_threshold: NONMONOTONE_THRESHOLD,
    max_steps: MAX_STEPS,
    estimator: "prediction_aware",
    steps: 1,
    lens: "logit",
    model_name: r.modelName,
    family: r.family,
    n_blocks: n,
    request: {
      prompt: r.question,
      target: "predicted",
      contrast: null,
      boundaries: "all",
      estimator: "prediction_aware",
      steps: 1,
      chat: true,
      max_new_tokens: r.maxNewTokens,
      components: false,
    },
    controls,
    contrast_tokens: null,
    components: null,
    lens_logprobs: null,
    answer: null,
    versus: null,
    comparison: null,
    template_positions: r.templatePositions,
  };
  const selected = openingPosition(r.inputIds, r.targetIds, answerStart, r.promptLength);
  return { payload, completeness: completenessError(contributions, deltaP), selected };
}
