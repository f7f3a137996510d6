import { describe, it, expect } from "vitest";
import { decodeResult, symmetricLimit, topAt, idText, contributionSum, pathRow } from "./result.js";
import { makeResult } from "./testing/fixture.js";
import { encodeArray } from "./codec.js";

describe("decodeResult", () => {
  it("reads shapes and provenance", () => {
    const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 6, nBlocks: 10, K: 4, steps: 3, promptLength: 4 })));
    expect([r.T, r.k, r.K, r.m]).toEqual([6, 10, 4, 3]);
    expect(r.boundaries).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(r.answerStart).toBe(3); // prompt_length − 1: position 3 predicts the answer's first token
    expect(r.controls).toEqual({ target: "predicted", contrast: "", boundaries: "all", estimator: "prediction_aware", steps: 3 });
    expect(r.request?.boundaries).toBe("all");
    expect(r.targetName).toBe("p(target)");
    expect(r.nonmonotoneThreshold).toBe(0.05);
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

  it("never recomputes the onset: a payload without one is an error (the rule lives in Python)", () => {
    const raw = makeResult({ T: 2, nBlocks: 4 });
    // @ts-ignore
    delete raw.onset;
    expect(() => decodeResult(raw)).toThrow(/onset/);
  });

  it("answer_start is the one definition of the answer (T: no answer)", () => {
    expect(decodeResult(makeResult({ T: 6 }))?.answerStart).toBe(6);
    const raw = makeResult({ T: 6, promptLength: 4 });
    expect(raw.prompt_length).toBe(4);
    raw.answer_start = 2; // whatever Python says, not prompt_length
    expect(decodeResult(raw)?.answerStart).toBe(2);
    for (const bad of [undefined, 7, -1, 2.5, "3"]) {
      expect(() => decodeResult({ ...raw, answer_start: bad })).toThrow(/answer_start/);
    }
  });

  it("segment labels come from the payload", () => {
    const raw = makeResult({ T: 2, nBlocks: 20, every: 5 });
    expect(decodeResult(raw)?.segmentLabels).toEqual(["1\u20135", "6\u201310", "11\u201315", "16\u201320"]);
    raw.segment_labels = ["early", "mid", "late", "out"];
    expect(decodeResult(raw)?.segmentLabels).toEqual(["early", "mid", "late", "out"]);
    expect(() => decodeResult({ ...raw, segment_labels: ["a", "b"] })).toThrow(/segment_labels/);
    expect(() => decodeResult({ ...raw, segment_labels: undefined })).toThrow(/segment_labels/);
  });

  it("reads target_name, nonmonotone_threshold, controls and request, and rejects bad ones", () => {
    const raw = makeResult({ T: 3, nBlocks: 4, contrast: true, every: 2 });
    const r = /** @type {import("./result.js").Result} */ (decodeResult(raw));
    expect(r.targetName).toBe("p(target) \u2212 p(contrast)");
    expect(r.controls).toEqual({ target: "predicted", contrast: " Hanoi", boundaries: "every:2", estimator: "prediction_aware", steps: 1 });
    expect(decodeResult({ ...raw, nonmonotone_threshold: 0.3 })?.nonmonotoneThreshold).toBe(0.3);
    expect(decodeResult({ ...raw, request: null })?.request).toBeNull();
    expect(() => decodeResult({ ...raw, target_name: undefined })).toThrow(/target_name/);
    expect(() => decodeResult({ ...raw, target_name: "" })).toThrow(/target_name/);
    for (const bad of [undefined, 1.5, -0.1, "0.05"]) {
      expect(() => decodeResult({ ...raw, nonmonotone_threshold: bad })).toThrow(/nonmonotone_threshold/);
    }
    expect(() => decodeResult({ ...raw, controls: undefined })).toThrow(/controls/);
    expect(() => decodeResult({ ...raw, controls: { ...raw.controls, steps: 0 } })).toThrow(/controls.steps/);
    expect(() => decodeResult({ ...raw, controls: { ...raw.controls, contrast: null } })).toThrow(/controls.contrast/);
    expect(() => decodeResult({ ...raw, request: "x" })).toThrow(/request/);
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
  it("symmetricLimit ignores NaN and falls back to 1", () => {
    expect(symmetricLimit([NaN, -0.3, 0.2])).toBe(0.3);
    expect(symmetricLimit([0, NaN])).toBe(1);
  });
});
