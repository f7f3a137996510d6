/**
 * The site's model in the browser: the manifest's body and readout graphs on onnxruntime-web,
 * the tokenizer and chat template, greedy generation with the KV cache, and the readout of
 * every position's state at every boundary in row tiles (js/site/payload.js turns the
 * readings into the widget's payload). onnxruntime is passed in, so tests can fake it.
 * @module site/engine
 */

import { verifyFile } from "./verify.js";

/** Rows per readout call: a 64 × vocabulary float32 logit tile (12 MiB for 49,152 tokens). */
export const TILE_ROWS = 64;

/**
 * @typedef {object} Manifest the site's manifest.json (iglens_viz/export/site.py)
 * @property {{name: string, n_blocks: number, d_model: number, vocab_size: number, top_k: number, family?: string}} model
 * @property {Record<"body"|"readout", {file: string, external_data: string[]}>} graphs
 * @property {{tokenizer: string, chat: string}} tokenizer
 * @property {{max_abs_diff_block_probability: number}} tolerance
 * @property {Record<string, {bytes: number, sha256?: string}>} files
 * @property {{file: string, question: string, chat: boolean, max_new_tokens: number, positions: number}[]} [lessons]
 *
 * @typedef {{loaded: number, total: number, phase: string}} Progress
 */

/** A cancelled run: thrown between graph calls once the signal is aborted. */
export class Cancelled extends Error {
  constructor() {
    super("cancelled");
    this.name = "Cancelled";
  }
}

/**
 * Between graph calls: give the event loop a turn (the WebAssembly runs on the page's thread,
 * so without it no click, Cancel included, and no progress is drawn until the end), then stop
 * if cancelled.
 * @param {AbortSignal|undefined} signal
 */
async function check(signal) {
  await new Promise((resolve) => setTimeout(resolve, 0));
  if (signal?.aborted) throw new Cancelled();
}

/**
 * Fetch `url` as bytes, reporting bytes read.
 * @param {string} url @param {(bytes: number) => void} onBytes @param {AbortSignal} [signal]
 */
async function fetchBytes(url, onBytes, signal) {
  const response = await fetch(url, { signal });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  if (!response.body) return new Uint8Array(await response.arrayBuffer());
  const reader = response.body.getReader();
  /** @type {Uint8Array[]} */
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    onBytes(value.byteLength);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Fetch every graph and weight part once (parts shared by both graphs are fetched once), each
 * checked against the manifest's sha256 as it arrives (js/site/verify.js): a damaged part
 * stops the load before any session is created. `timing.verify_ms` gets the hashing's time.
 * @param {string} base the site's URL (ends with "/") @param {Manifest} manifest
 * @param {(p: Progress) => void} onProgress @param {AbortSignal} [signal]
 * @param {{verify_ms?: number}} [timing]
 */
export async function fetchModel(base, manifest, onProgress, signal, timing = {}) {
  let hashing = 0;
  const names = new Set();
  for (const g of Object.values(manifest.graphs)) {
    names.add(g.file);
    for (const part of g.external_data) names.add(partPath(g.file, part));
  }
  const total = [...names].reduce((s, name) => s + (manifest.files[name]?.bytes ?? 0), 0);
  let loaded = 0;
  /** @type {Map<string, Uint8Array>} */
  const bytes = new Map();
  for (const name of names) {
    const data = await fetchBytes(
      base + name,
      (b) => {
        loaded += b;
        onProgress({ loaded, total, phase: "download" });
      },
      signal,
    );
    const start = performance.now();
    await verifyFile(name, data, manifest);
    hashing += performance.now() - start;
    bytes.set(name, data);
  }
  timing.verify_ms = hashing;
  return bytes;
}

/** @param {string} graphFile @param {string} part */
const partPath = (graphFile, part) => graphFile.slice(0, graphFile.lastIndexOf("/") + 1) + part;

/**
 * @typedef {object} Loaded
 * @property {any} body the body's InferenceSession
 * @property {any} readout the readout's
 * @property {string} backend "webgpu" or "wasm"
 */

/**
 * Create both sessions on the first backend that loads them.
 * @param {any} ort onnxruntime-web @param {Manifest} manifest @param {Map<string, Uint8Array>} bytes
 * @param {string[]} backends in order of preference
 * @returns {Promise<Loaded>}
 */
export async function createSessions(ort, manifest, bytes, backends) {
  /** @type {unknown} */
  let lastError = null;
  for (const backend of backends) {
    try {
      /** @param {"body"|"readout"} name */
      const session = (name) => {
        const g = manifest.graphs[name];
        return ort.InferenceSession.create(bytes.get(g.file), {
          executionProviders: [backend],
          externalData: g.external_data.map((part) => ({ path: part, data: bytes.get(partPath(g.file, part)) })),
        });
      };
      return { body: await session("body"), readout: await session("readout"), backend };
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

/**
 * @typedef {object} Step one body call's output
 * @property {Float32Array} states (n+1)·t·d
 * @property {number} t new positions
 * @property {any} keys the extended cache (ort.Tensor)
 * @property {any} values
 */

/**
 * The model's run for one question: generation, then the readout everywhere.
 * @param {any} ort
 * @param {Loaded} model
 * @param {Manifest} manifest
 * @param {number[]} promptIds the templated prompt's ids
 * @param {{maxNewTokens: number, eosId: number, signal?: AbortSignal, onProgress?: (p: Progress) => void}} options
 */
export async function runQuestion(ort, model, manifest, promptIds, options) {
  const { n_blocks: n, d_model: d, top_k: K } = manifest.model;
  const { signal, onProgress = () => {} } = options;
  const ids = [...promptIds];
  const int64 = (/** @type {number[]} */ xs) => new ort.Tensor("int64", BigInt64Array.from(xs.map(BigInt)), [xs.length]);
  // the empty cache: (n, 1, H_kv, 0, d_head), the past's axis named in the graph
  const meta = (model.body.inputMetadata ?? []).find((/** @type {any} */ m) => m.name === "past_keys");
  const cacheShape = (meta?.shape ?? [n, 1, 0, 0, 0]).map((/** @type {unknown} */ x) => (typeof x === "number" ? x : 0));
  /** @param {number[]} tokens @param {Step|null} past @returns {Promise<Step>} */
  const body = async (tokens, past) => {
    await check(signal);
    const empty = () => new ort.Tensor("float32", new Float32Array(0), cacheShape);
    const feeds = {
      input_ids: new ort.Tensor("int64", BigInt64Array.from(tokens.map(BigInt)), [1, tokens.length]),
      past_keys: past ? past.keys : empty(),
      past_values: past ? past.values : empty(),
    };
    const out = await model.body.run(feeds);
    return { states: out.states.data, t: tokens.length, keys: out.keys, values: out.values };
  };
  /** @param {Float32Array} rows @param {number[]} targets */
  const readout = async (rows, targets) => {
    await check(signal);
    const out = await model.readout.run({
      states: new ort.Tensor("float32", rows, [targets.length, d]),
      target_ids: int64(targets),
    });
    return {
      prob: /** @type {Float32Array} */ (out.target_prob.data),
      topIds: Int32Array.from(out.top_ids.data, Number),
      topProbs: /** @type {Float32Array} */ (out.top_probs.data),
    };
  };
  const steps = [];
  let step = await body(ids, null);
  steps.push(step);
  onProgress({ loaded: 0, total: options.maxNewTokens, phase: "generate" });
  for (let g = 0; g < options.maxNewTokens; g++) {
    const last = step.states.subarray((n * step.t + step.t - 1) * d, (n * step.t + step.t) * d);
    const next = (await readout(last, [0])).topIds[0];
    ids.push(next);
    step = await body([next], step);
    steps.push(step);
    onProgress({ loaded: g + 1, total: options.maxNewTokens, phase: "generate" });
    if (next === options.eosId) break;
  }
  // every position's state at boundary b: its call's (b, offset) row
  /** @type {{step: Step, offset: number}[]} */
  const where = [];
  for (const s of steps) for (let i = 0; i < s.t; i++) where.push({ step: s, offset: i });
  const T = where.length;
  /** @param {number} p @param {number} b */
  const row = (p, b) => {
    const { step: s, offset } = where[p];
    return s.states.subarray((b * s.t + offset) * d, (b * s.t + offset + 1) * d);
  };
  /** @param {[number, number][]} cells @param {number[]} targets */
  const readTiles = async (cells, targets, /** @type {string} */ phase) => {
    const prob = new Float32Array(cells.length);
    const topIds = new Int32Array(cells.length * K);
    const topProbs = new Float32Array(cells.length * K);
    for (let start = 0; start < cells.length; start += TILE_ROWS) {
      const tile = cells.slice(start, start + TILE_ROWS);
      const rows = new Float32Array(tile.length * d);
      tile.forEach(([p, b], i) => rows.set(row(p, b), i * d));
      const out = await readout(rows, targets.slice(start, start + tile.length));
      prob.set(out.prob, start);
      topIds.set(out.topIds, start * K);
      topProbs.set(out.topProbs, start * K);
      onProgress({ loaded: start + tile.length, total: cells.length, phase });
    }
    return { prob, topIds, topProbs };
  };
  // the "predicted" target: the model's top-1 at each position, the generated token along the answer
  const finals = await readTiles(
    where.map((_, p) => [p, n]),
    where.map(() => 0),
    "predict",
  );
  const P = promptIds.length;
  const targetIds = Int32Array.from(where, (_, p) => (p >= P - 1 && p < T - 1 ? ids[p + 1] : finals.topIds[p * K]));
  /** @type {[number, number][]} */
  const cells = [];
  for (let p = 0; p < T; p++) for (let b = 0; b <= n; b++) cells.push([p, b]);
  const read = await readTiles(
    cells,
    cells.map(([p]) => targetIds[p]),
    "readout",
  );
  return { inputIds: ids, targetIds, lensProbs: read.prob, topIds: read.topIds, topProbs: read.topProbs };
}
