import { describe, expect, it } from "vitest";
import { argmaxRows, buildPayload, completenessError, firstDifferences, openingPosition } from "./payload.js";
import { decodeResult } from "../model/result.js";
import { PAYLOAD_SCHEMAS } from "../model/protocol.js";

/** A reading of 4 positions (3 prompt, 1 generated) through n = 3 blocks, K = 2. */
function reading() {
  const n = 3;
  const T = 4;
  const lensProbs = new Float32Array(T * (n + 1));
  for (let p = 0; p < T; p++) for (let b = 0; b <= n; b++) lensProbs[p * (n + 1) + b] = Math.fround(((p + 1) * (b * b + 0.1)) / 40);
  const topIds = new Int32Array(T * (n + 1) * 2).map((_, i) => (i % 5) + 10);
  const topProbs = new Float32Array(T * (n + 1) * 2).fill(0.25);
  return {
    question: "Hi <b>there</b>?",
    inputIds: [1, 2, 3, 4],
    promptLength: 3,
    templatePositions: [0, 2],
    targetIds: Int32Array.from([7, 8, 4, 2]),
    lensProbs,
    topIds,
    topProbs,
    nBlocks: n,
    topK: 2,
    maxNewTokens: 12,
    modelName: "tiny",
    family: "",
    decode: (/** @type {number} */ id) => `<tok ${id}>`,
  };
}

describe("site payload", () => {
  it("takes contributions as first differences, so their sum is Δp", () => {
    const probs = Float32Array.from([0, 0.25, 0.5, 0.125]);
    expect(Array.from(firstDifferences(probs, 3))).toEqual([0.25, 0.25, -0.375]);
    expect(completenessError(firstDifferences(probs, 3), Float32Array.from([0.125]))).toBe(0);
  });

  it("names the onset as the lowest index of the largest finite contribution", () => {
    expect(Array.from(argmaxRows(Float32Array.from([1, 3, 3, NaN, NaN, NaN]), 3))).toEqual([1, -1]);
  });

  it("opens on the first answer position whose target is new to the prompt", () => {
    expect(openingPosition([1, 2, 3, 4], Int32Array.from([0, 0, 2, 9]), 2, 3)).toBe(3);
    expect(openingPosition([1, 2, 3], Int32Array.from([0, 0, 0]), 3, 3)).toBe(2);
  });

  it("builds a payload with every protocol field that decodeResult reads", () => {
    const { payload, completeness, selected } = buildPayload(reading());
    expect(Object.keys(payload).sort()).toEqual(PAYLOAD_SCHEMAS.result.map((f) => f.name).sort());
    expect(completeness).toBeLessThan(1e-6);
    expect(selected).toBe(2);
    const result = decodeResult(payload);
    expect(result).not.toBeNull();
    const r = /** @type {NonNullable<typeof result>} */ (result);
    expect(r.T).toBe(4);
    expect(r.k).toBe(3);
    expect(r.answerStart).toBe(2);
    expect(r.tokens).toEqual(["<tok 1>", "<tok 2>", "<tok 3>", "<tok 4>"]);
    expect(r.contributions.length).toBe(12);
  });
});
