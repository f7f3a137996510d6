import { describe, it, expect } from "vitest";
import { decodeResult, segmentLabels, symmetricLimit, topAt, idText, contributionSum, pathRow } from "./result.js";
import { makeResult } from "./testing/fixture.js";
import { encodeArray } from "./codec.js";

describe("decodeResult", () => {
  it("reads shapes and provenance", () => {
    const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 6, nBlocks: 10, K: 4, steps: 3, promptLength: 4 })));
    expect([r.T, r.k, r.K, r.m]).toEqual([6, 10, 4, 3]);
    expect(r.boundaries).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(r.promptLength).toBe(4);
    expect(r.nBlocks).toBe(10);
    expect(pathRow(r, 1)?.length).toBe(10 * 4);
    expect(topAt(r, 0, 3, 5).length).toBe(4);
    expect(Math.abs(contributionSum(r, 2) - r.deltaP[2])).toBeLessThan(1e-6);
  });

  it("maps the protocol's onset (a block number) to its segment", () => {
    const raw = makeResult({ T: 3, nBlocks: 20, every: 5 });
    expect(raw.boundaries).toEqual([0, 5, 10, 15, 20]);
    raw.onset = encodeArray(new Int32Array([10, -1, 7]), [3]); // 7 is no segment end: ignored
    const r = /** @type {import("./result.js").Result} */ (decodeResult(raw));
    expect(Array.from(r.onset)).toEqual([1, -1, -1]);
    expect(Array.from(r.onsetBlock)).toEqual([10, -1, -1]);
    expect(r.segmentLabels[1]).toBe("6\u201310");
  });

  it("computes the onset when the payload has none", () => {
    const raw = makeResult({ T: 2, nBlocks: 4 });
    raw.contributions = encodeArray(new Float32Array([0.1, 0.5, -0.2, 0.1, 0, 0, 0.3, 0.2]), [2, 4]);
    // @ts-ignore
    delete raw.onset;
    const r = /** @type {import("./result.js").Result} */ (decodeResult(raw));
    expect(Array.from(r.onset)).toEqual([1, 2]);
    expect(Array.from(r.onsetBlock)).toEqual([2, 3]);
  });

  it("flags positions without a target and signed (contrast) values", () => {
    const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 4, lastHasNoTarget: true, contrast: true })));
    expect(r.hasTarget).toEqual([true, true, true, false]);
    expect(r.hasContrast).toBe(true);
    expect(r.signedProbs).toBe(true);
  });

  it("returns null for an empty result and throws on a malformed one", () => {
    expect(decodeResult(null)).toBeNull();
    expect(decodeResult({})).toBeNull();
    const bad = makeResult({ T: 2, nBlocks: 3 });
    bad.lens_probs = encodeArray(new Float32Array(6), [2, 3]);
    expect(() => decodeResult(bad)).toThrow(RangeError);
  });

  it("names unknown ids and uses no top-k when K = 0", () => {
    const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 2, K: 0 })));
    expect(r.K).toBe(0);
    expect(topAt(r, 0, 0)).toEqual([]);
    expect(idText(r, 999999)).toBe("<999999>");
  });
});

describe("helpers", () => {
  it("segmentLabels mirror the static views", () => {
    expect(segmentLabels([0, 1, 2])).toEqual(["1", "2"]);
    expect(segmentLabels([0, 10, 20, 30])).toEqual(["1\u201310", "11\u201320", "21\u201330"]);
  });

  it("symmetricLimit ignores NaN and falls back to 1", () => {
    expect(symmetricLimit([NaN, -0.3, 0.2])).toBe(0.3);
    expect(symmetricLimit([0, NaN])).toBe(1);
  });
});
