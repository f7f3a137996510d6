/**
 * Synthetic IG-Lens results shaped exactly like the `result` trait of
 * docs/widget-protocol.md (ndarray payloads with DataView buffers, or base64 strings).
 * For tests and the dev harness; no Python needed.
 * @module testing/fixture
 */
import { encodeArray, decodeArray } from "../model/codec.js";

/** A small deterministic PRNG (mulberry32). @param {number} seed */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  " The",
  " capital",
  " of",
  " France",
  " is",
  " Paris",
  ".",
  "\n",
  " It",
  " has",
  " a",
  " population",
  " about",
  " million",
  " people",
  ",",
  " and",
  " the",
  " city",
  " river",
  " Seine",
  " runs",
  " through",
  " it",
  " famous",
  " for",
  " museums",
  " like",
  " Louvre",
  " art",
  " history",
  " food",
  " wine",
  " known",
  " as",
  " light",
  " Eiffel",
  " Tower",
  " built",
  " in",
  " 1889",
  " What",
  " Vietnam",
  "?",
  " Hanoi",
  " Answer",
  ":",
];

/**
 * @typedef {object} FixtureOptions
 * @property {number} [T] positions (default 12)
 * @property {number} [nBlocks] blocks (default 30)
 * @property {number} [every] boundary stride (default 1 → every block)
 * @property {boolean} [sublayer] boundaries "sublayer": [0, 0.5, 1, …, n] (each block's attention
 *   and MLP halves; labels "1.attn", "1.mlp", …)
 * @property {boolean} [legacyOnset] leave out `onset_segment` (a payload from before it existed)
 * @property {boolean|ComponentOptions} [components] add `result.components` (the head/MLP split)
 * @property {number} [K] top tokens per boundary (default 5; 0 = none)
 * @property {number} [steps] interpolation steps (>1 adds path_probs)
 * @property {number} [promptLength] (default T: no answer); `answer_start` is promptLength − 1
 *   when there is an answer (promptLength < T), else T
 * @property {string[]} [tokens] explicit token strings (length T)
 * @property {boolean} [lastHasNoTarget] target "next": the last position has none (NaN)
 * @property {boolean} [contrast] add contrast tokens (signed lens values)
 * @property {number} [threshold] nonmonotone_threshold (default 0.05)
 * @property {boolean} [base64] buffers as base64 strings (the static export form)
 * @property {number} [seed]
 * @property {string} [id] the result's id (default "r1")
 * @property {string} [lens] the result's `lens` ("logit", "shortcut", a saved lens's name …); left out
 *   by default (a payload from before lenses: the logit lens). Not "logit": `controls.lens` too
 * @property {string} [controlsLens] `controls.lens` when it is not `lens` (a saved lens's path)
 */

/**
 * @typedef {object} ComponentOptions
 * @property {number} [heads] attention heads H (default 4): names head:0 … head:H−1, mlp, rest
 * @property {"heads"|"attn"} [split] "attn": names ["attn", "mlp"] (heads not split)
 * @property {number[]} [positions] the positions split (default: every one)
 * @property {boolean} [nan] "rest" of block 1 is NaN (not applicable; default true with heads)
 * @property {boolean} [coordinate] a fitted lens's split: one more component, "coordinate" (last),
 *   in the MLP half's segment, its share at the segment's last block only (0 at the others)
 * @property {boolean} [base64]
 * @property {number} [seed]
 */

/**
 * Python's `segment_label`: "12", "11–15", "12.attn" (depth 11 → 11.5), "12.mlp" (11.5 → 12).
 * @param {number} lo @param {number} hi
 */
export function segmentLabel(lo, hi) {
  if (hi - lo === 0.5) return `${Math.ceil(hi)}.${Number.isInteger(hi) ? "mlp" : "attn"}`;
  return hi - lo === 1 ? String(hi) : `${lo + 1}\u2013${hi}`;
}

/**
 * `components_segments` of Python: (n, C) the segment j of each (block, component): a block's
 * attention parts lie in the segment that spans depth L − 1 → L − ½, its MLP in L − ½ → L.
 * @param {number[]} boundaries @param {string[]} names @param {number} n
 */
export function componentSegments(boundaries, names, n) {
  const seg = (/** @type {number} */ depth) => boundaries.filter((d) => d < depth).length - 1; // searchsorted − 1
  const out = new Int32Array(n * names.length);
  for (let b = 0; b < n; b++) {
    names.forEach((name, c) => {
      out[b * names.length + c] = seg(b + (name === "mlp" || name === "coordinate" ? 0.75 : 0.25));
    });
  }
  return out;
}

/**
 * A synthetic component split of a `result` dict (the protocol's `components`): each
 * segment's contribution spread over its (block, component) cells with random signed shares
 * that add up to it exactly (in float64; stored as float32).
 * @param {Record<string, any>} raw a result dict (makeResult's)
 * @param {ComponentOptions} [o]
 */
export function makeComponents(raw, o = {}) {
  const contributions = decodeArray(raw.contributions);
  const [T, k] = contributions.shape;
  const c = contributions.data;
  const boundaries = raw.boundaries.map(Number);
  const n = Number(raw.n_blocks);
  const names = o.split === "attn" ? ["attn", "mlp"] : [...Array.from({ length: o.heads ?? 4 }, (_, q) => `head:${q}`), "mlp", "rest"];
  if (o.coordinate) names.push("coordinate");
  const coordC = names.indexOf("coordinate");
  const C = names.length;
  const segments = componentSegments(boundaries, names, n);
  const positions = o.positions ?? Array.from({ length: T }, (_, t) => t);
  const rand = rng(o.seed ?? 3);
  const nanRest = (o.nan ?? true) && names.includes("rest");
  const restC = names.indexOf("rest");
  const shares = new Float32Array(positions.length * n * C);
  positions.forEach((t, p) => {
    for (let j = 0; j < k; j++) {
      /** @type {number[]} */
      const cells = [];
      for (let q = 0; q < n * C; q++) {
        if (segments[q] !== j) continue;
        if (nanRest && q === restC) {
          shares[p * n * C + q] = NaN;
          continue;
        } // block 1's rest
        // the coordinate change sits at the segment's last block (block b + 1 ends it): 0 elsewhere
        if (q % C === coordC && boundaries[j + 1] !== Math.floor(q / C) + 1) continue;
        cells.push(q);
      }
      const v = c[t * k + j];
      // positive weights summing to 1, plus a zero-sum signed wiggle
      const w = cells.map(() => 0.05 + rand() ** 2);
      const sw = w.reduce((a, b) => a + b, 0);
      const wiggle = cells.map(() => (rand() - 0.5) * 0.6);
      const mw = wiggle.reduce((a, b) => a + b, 0) / Math.max(1, cells.length);
      cells.forEach((q, u) => {
        const share = Number.isFinite(v) ? (v * w[u]) / sw + Math.abs(v) * (cells.length > 1 ? wiggle[u] - mw : 0) : NaN;
        shares[p * n * C + q] = share;
      });
    }
  });
  const enc = (/** @type {any} */ arr, /** @type {number[]} */ shape) => encodeArray(arr, shape, { base64: !!o.base64 });
  return {
    names,
    segments: enc(segments, [n, C]),
    positions: positions.slice(),
    shares: enc(shares, [positions.length, n, C]),
  };
}

/**
 * The `components` trait Python sends for some positions of a raw result: the split, its
 * `result_id` (the result's id) and `request_id`.
 * @param {Record<string, any>} raw @param {ComponentOptions & {requestId?: string}} [o]
 */
export function componentsTrait(raw, o = {}) {
  return { ...makeComponents(raw, o), result_id: raw.id ?? "", request_id: o.requestId ?? "q-1" };
}

/**
 * Build a synthetic `result` dict.
 * @param {FixtureOptions} [o]
 */
export function makeResult(o = {}) {
  const T = o.T ?? 12;
  const n = o.nBlocks ?? 30;
  const every = o.every ?? 1;
  const K = o.K ?? 5;
  const m = o.steps && o.steps > 1 ? o.steps : 0;
  const rand = rng(o.seed ?? 7);
  const boundaries = [];
  if (o.sublayer) for (let L = 0; L < n; L++) boundaries.push(L, L + 0.5);
  else for (let L = 0; L < n; L += every) boundaries.push(L);
  boundaries.push(n);
  const k = boundaries.length - 1;
  const tokens = o.tokens ?? Array.from({ length: T }, (_, i) => WORDS[i % WORDS.length]);
  if (tokens.length !== T) throw new Error("tokens must have T entries");
  const vocab = [...new Set([...WORDS, ...tokens])];
  const idOf = new Map(vocab.map((w, q) => [w, q + 100]));
  /** @type {Record<string, string>} */
  const tokenText = {};
  for (const [w, id] of idOf) tokenText[String(id)] = w;

  const inputIds = new Int32Array(T);
  const targetIds = new Int32Array(T);
  const onset = new Int32Array(T);
  const onsetSegment = new Int32Array(T);
  const contributions = new Float32Array(T * k);
  const lens = new Float32Array(T * (k + 1));
  const delta = new Float32Array(T);
  const topIds = new Int32Array(T * (k + 1) * K);
  const topProbs = new Float32Array(T * (k + 1) * K);
  const path = m ? new Float32Array(T * k * (m + 1)) : null;
  const targetTokens = [];
  const contrastTokens = o.contrast ? [] : null;

  for (let i = 0; i < T; i++) {
    inputIds[i] = /** @type {number} */ (idOf.get(tokens[i]));
    const none = o.lastHasNoTarget && i === T - 1;
    const tgt = i + 1 < T ? tokens[i + 1] : " Paris";
    const tid = /** @type {number} */ (idOf.get(tgt) ?? idOf.get(" Paris"));
    targetIds[i] = none ? -1 : tid;
    targetTokens.push(none ? "" : tokenText[String(tid)]);
    if (contrastTokens) contrastTokens.push(" Hanoi");
    // a sigmoid rise around a centre block, a dip (non-monotone) on some positions
    const centre = n * (0.35 + 0.5 * rand());
    const width = 0.6 + 2.5 * rand();
    const pEnd = 0.04 + 0.92 * rand() ** 0.7;
    const dipAt = rand() < 0.6 ? Math.floor(n * (0.55 + 0.35 * rand())) : -1;
    const dip = 0.15 + 0.35 * rand();
    const f = (/** @type {number} */ L) => {
      let p = 1e-4 + (pEnd - 1e-4) / (1 + Math.exp(-(L - centre) / width));
      if (dipAt >= 0 && L >= dipAt && L < dipAt + 2 && L < n) p *= 1 - dip;
      if (contrastTokens) p -= 0.25 * pEnd * Math.exp(-(((L - centre * 0.7) / 3) ** 2));
      return L === 0 ? 1e-4 : p;
    };
    for (let j = 0; j <= k; j++) lens[i * (k + 1) + j] = none ? NaN : f(boundaries[j]);
    for (let j = 0; j < k; j++) {
      contributions[i * k + j] = none ? NaN : lens[i * (k + 1) + j + 1] - lens[i * (k + 1) + j];
    }
    let best = -1,
      bestV = -Infinity,
      sum = 0;
    for (let j = 0; j < k; j++) {
      const v = contributions[i * k + j];
      sum += v;
      if (v > bestV) {
        bestV = v;
        best = j;
      }
    }
    onset[i] = none ? -1 : Math.ceil(boundaries[best + 1]); // a block number, like AttributionResult.onset
    onsetSegment[i] = none ? -1 : best;
    delta[i] = none ? NaN : lens[i * (k + 1) + k] - lens[i * (k + 1)];
    // top-K at each boundary: the target once it dominates, else filler tokens
    for (let j = 0; j <= k; j++) {
      const p = lens[i * (k + 1) + j];
      const base = (i * (k + 1) + j) * K;
      const filler = [" the", ",", " and", " of", " a", " in", "\n", " is"].map((w) => idOf.get(w) ?? idOf.get(" the"));
      const early = 0.05 + 0.3 * (1 - j / (k + 1));
      const cands = [{ id: tid, p: none ? 0.01 : Math.max(0, p) }];
      const phase = Math.floor((j + (i % 3) * 2) / 7); // the lens's favourite filler changes every few blocks
      for (let q = 0; q < 6; q++) cands.push({ id: /** @type {number} */ (filler[(q + phase + i) % filler.length]), p: early / (q + 1.5) });
      const seen = new Set();
      const uniq = cands.filter((c) => (seen.has(c.id) ? false : (seen.add(c.id), true)));
      uniq.sort((a, b) => b.p - a.p);
      for (let q = 0; q < K; q++) {
        topIds[base + q] = uniq[q] ? uniq[q].id : -1;
        topProbs[base + q] = uniq[q] ? uniq[q].p : 0;
      }
    }
    if (path) {
      for (let j = 0; j < k; j++) {
        const a = lens[i * (k + 1) + j];
        const b = lens[i * (k + 1) + j + 1];
        const wig = (rand() - 0.5) * 0.6 * Math.abs(b - a);
        for (let q = 0; q <= m; q++) {
          const t = q / m;
          path[(i * k + j) * (m + 1) + q] = none ? NaN : a + (b - a) * t + (q > 0 && q < m ? wig * Math.sin(Math.PI * t) * 2 : 0);
        }
      }
    }
    void sum;
  }
  const enc = (/** @type {any} */ arr, /** @type {number[]} */ shape) => encodeArray(arr, shape, { base64: !!o.base64 });
  const promptLength = o.promptLength ?? T;
  const target = o.lastHasNoTarget ? "next" : "predicted";
  const contrast = o.contrast ? " Hanoi" : "";
  const boundarySpec = o.sublayer ? "sublayer" : every === 1 ? "all" : `every:${every}`;
  // segment labels as Python names them (iglens_viz.core.boundaries.segment_labels)
  const segmentLabels = boundaries.slice(1).map((hi, j) => segmentLabel(boundaries[j], hi));
  /** @type {Record<string, any>} */
  const result = {
    tokens,
    target_tokens: targetTokens,
    input_ids: enc(inputIds, [T]),
    target_ids: enc(targetIds, [T]),
    onset: enc(onset, [T]),
    id: o.id ?? "r1",
    onset_segment: enc(onsetSegment, [T]),
    contributions: enc(contributions, [T, k]),
    lens_probs: enc(lens, [T, k + 1]),
    delta_p: enc(delta, [T]),
    top_ids: enc(topIds, [T, k + 1, K]),
    top_probs: enc(topProbs, [T, k + 1, K]),
    path_probs: path ? enc(path, [T, k, m + 1]) : null,
    token_text: tokenText,
    boundaries,
    prompt_length: promptLength,
    answer_start: promptLength < T ? promptLength - 1 : T,
    estimator: "prediction_aware",
    steps: m || 1,
    model_name: "synthetic-30L",
    family: "llama",
    n_blocks: n,
    controls: { target, contrast, boundaries: boundarySpec, estimator: "prediction_aware", steps: m || 1 },
    request: {
      prompt: tokens.join(""),
      target,
      contrast: contrast || null,
      boundaries: boundarySpec,
      estimator: "prediction_aware",
      steps: m || 1,
      chat: false,
      max_new_tokens: 0,
    },
    target_name: o.contrast ? "p(target) \u2212 p(contrast)" : "p(target)",
    segment_labels: segmentLabels,
    nonmonotone_threshold: o.threshold ?? 0.05,
    max_steps: 1000,
    contrast_tokens: contrastTokens,
    components: null,
  };
  if (o.legacyOnset) delete result.onset_segment;
  if (o.lens !== undefined) {
    result.lens = o.lens;
    if (o.lens !== "logit") result.controls.lens = o.controlsLens ?? o.lens;
  }
  if (o.components) {
    result.components = makeComponents(result, { base64: o.base64, ...(o.components === true ? {} : o.components) });
  }
  return result;
}

/**
 * Full widget state (traits) around a result.
 * @param {FixtureOptions & {selected?: number, interactive?: boolean, componentsTrait?: Record<string, any>}} [o]
 */
export function makeState(o = {}) {
  return {
    result: makeResult(o),
    selected: o.selected ?? -1,
    hovered: -1,
    color_by: "p_final",
    interactive: o.interactive ?? true,
    running: {},
    components: o.componentsTrait ?? {},
  };
}
