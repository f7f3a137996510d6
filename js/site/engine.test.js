import { describe, expect, it } from "vitest";
import { Cancelled, TILE_ROWS, runQuestion } from "./engine.js";

const n = 4;
const d = 3;
const manifest = /** @type {any} */ ({ model: { n_blocks: n, d_model: d, top_k: 2 } });

class Tensor {
  /** @param {string} type @param {any} data @param {number[]} dims */
  constructor(type, data, dims) {
    Object.assign(this, { type, data, dims });
  }
}

/**
 * A fake onnxruntime: the body's state of token `id` at boundary b is [id, b / n, 0]; the
 * readout's top token is id + 1 and the target's probability b / n.
 * @param {(call: string) => void} [onCall]
 */
function fake(onCall = () => {}) {
  /** @type {number[]} */
  const tiles = [];
  const body = {
    inputMetadata: [{ name: "input_ids" }, { name: "past_keys", shape: [n, 1, 2, "past", 5] }],
    async run(/** @type {any} */ feeds) {
      onCall("body");
      const ids = Array.from(feeds.input_ids.data, Number);
      const t = ids.length;
      const states = new Float32Array((n + 1) * t * d);
      for (let b = 0; b <= n; b++) {
        ids.forEach((id, i) => states.set([id, b / n, 0], (b * t + i) * d));
      }
      const past = feeds.past_keys.dims[3];
      const cache = new Tensor("float32", new Float32Array(0), [n, 1, 2, past + t, 5]);
      return { states: { data: states }, keys: cache, values: cache };
    },
  };
  const readout = {
    async run(/** @type {any} */ feeds) {
      onCall("readout");
      const rows = feeds.target_ids.dims[0];
      tiles.push(rows);
      const s = feeds.states.data;
      const prob = Float32Array.from({ length: rows }, (_, r) => s[r * d + 1]);
      const top = BigInt64Array.from({ length: rows * 2 }, (_, i) => BigInt(Math.round(s[Math.floor(i / 2) * d]) + 1));
      return { target_prob: { data: prob }, top_ids: { data: top }, top_probs: { data: new Float32Array(rows * 2) } };
    },
  };
  return { ort: { Tensor }, model: { body, readout, backend: "wasm" }, tiles };
}

describe("site engine", () => {
  it("generates greedily through the cache up to the end token, then reads every boundary", async () => {
    /** @type {string[]} */
    const calls = [];
    const { ort, model, tiles } = fake((c) => calls.push(c));
    const out = await runQuestion(ort, model, manifest, [1, 2, 3], { maxNewTokens: 12, eosId: 6 });
    expect(out.inputIds).toEqual([1, 2, 3, 4, 5, 6]);
    expect(calls.filter((c) => c === "body").length).toBe(4); // the prompt, then 4, 5, 6
    // the prompt's targets are the model's top token; along the answer, the generated one
    expect(Array.from(out.targetIds)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(out.lensProbs.length).toBe(6 * (n + 1));
    expect(Array.from(out.lensProbs.slice(0, n + 1))).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(Math.max(...tiles)).toBeLessThanOrEqual(TILE_ROWS);
  });

  it("stops at the limit of new tokens", async () => {
    const { ort, model } = fake();
    const out = await runQuestion(ort, model, manifest, [1], { maxNewTokens: 3, eosId: 99 });
    expect(out.inputIds).toEqual([1, 2, 3, 4]);
  });

  it("stops between graph calls once cancelled", async () => {
    const controller = new AbortController();
    let bodies = 0;
    const { ort, model } = fake((c) => {
      if (c === "body" && ++bodies === 2) controller.abort();
    });
    const run = runQuestion(ort, model, manifest, [1, 2], { maxNewTokens: 12, eosId: 99, signal: controller.signal });
    await expect(run).rejects.toBeInstanceOf(Cancelled);
    expect(bodies).toBe(2);
  });
});
