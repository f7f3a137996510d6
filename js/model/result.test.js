import { describe, it, expect } from "vitest";
import { decodeResult, symmetricLimit, topAt, idText, contributionSum, pathRow, segmentText, depthText, contribution } from "./result.js";
import { makeResult } from "../testing/fixture.js";
import { encodeArray } from "./codec.js";

describe("decodeResult", () => {
  it("reads shapes and provenance", () => {
    const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 6, nBlocks: 10, K: 4, steps: 3, promptLength: 4 })));
    expect([r.T, r.k, r.K, r.m]).toEqual([6, 10, 4, 3]);
    expect(r.boundaries).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(r.answerStart).toBe(3); // prompt_length − 1: position 3 predicts the answer's first token
    expect(r.controls).toEqual({ target: "predicted", contrast: "", boundaries: "all", estimator: "prediction_aware", steps: 3, lens: "logit" });
    expect(r.request?.boundaries).toBe("all");
    expect(r.targetName).toBe("p(target)");
    expect(r.nonmonotoneThreshold).toBe(0.05);
    expect(r.nBlocks).toBe(10);
    expect(pathRow(r, 1)?.length).toBe(10 * 4);
    expect(topAt(r, 0, 3, 5).length).toBe(4);
    expect(Math.abs(contributionSum(r, 2) - r.deltaP[2])).toBeLessThan(1e-6);
  });

  it("without onset_segment (an older payload), maps the protocol's onset (a block number) to its segment", () => {
    const raw = makeResult({ T: 3, nBlocks: 20, every: 5, legacyOnset: true });
    expect(raw.boundaries).toEqual([0, 5, 10, 15, 20]);
    expect("onset_segment" in raw).toBe(false);
    raw.onset = encodeArray(new Int32Array([10, -1, 7]), [3]); // 7 is no segment end: ignored
    const r = /** @type {import("./result.js").Result} */ (decodeResult(raw));
    expect(Array.from(r.onset)).toEqual([1, -1, -1]);
    expect(Array.from(r.onsetBlock)).toEqual([10, -1, -1]);
    expect(r.segmentLabels[1]).toBe("6\u201310");
  });

  it("onset_segment names the onset segment; onset stays its block (sub-layer boundaries, half depths)", () => {
    const raw = makeResult({ T: 3, nBlocks: 4, sublayer: true });
    expect(raw.boundaries).toEqual([0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]);
    expect(raw.segment_labels).toEqual(["1.attn", "1.mlp", "2.attn", "2.mlp", "3.attn", "3.mlp", "4.attn", "4.mlp"]);
    expect(raw.controls.boundaries).toBe("sublayer");
    raw.onset_segment = encodeArray(new Int32Array([2, -1, 3]), [3]); // 2.attn, none, 2.mlp
    raw.onset = encodeArray(new Int32Array([2, -1, 2]), [3]); // both halves of block 2: block 2
    const r = /** @type {import("./result.js").Result} */ (decodeResult(raw));
    expect([r.k, r.nBlocks, r.halves, r.singleBlocks]).toEqual([8, 4, true, false]);
    expect(r.boundaries).toEqual([0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]);
    expect(Array.from(r.onset)).toEqual([2, -1, 3]);
    expect(Array.from(r.onsetBlock)).toEqual([2, -1, 2]);
    expect(segmentText(r, 2)).toBe("block 2.attn");
    expect(segmentText(r, 3)).toBe("block 2.mlp");
    expect(depthText(1.5)).toBe("block 2.attn");
    expect(depthText(2)).toBe("block 2");
    expect(depthText(0)).toBe("embeddings");
    expect(Math.abs(contributionSum(r, 0) - r.deltaP[0])).toBeLessThan(1e-6);
    // the old mapping is only a fallback: block 2 ends segment 3 (2.mlp), never 2.attn
    delete raw.onset_segment;
    expect(Array.from(/** @type {any} */ (decodeResult(raw)).onset)).toEqual([3, -1, 3]);
  });

  it("the fixture's onset_segment is the argmax of each row, onset its block, for every boundary form", () => {
    for (const o of [{ every: 1 }, { every: 5 }, { sublayer: true }]) {
      const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 5, nBlocks: 10, ...o })));
      for (let i = 0; i < r.T; i++) {
        const j = r.onset[i];
        for (let q = 0; q < r.k; q++) expect(contribution(r, i, q)).toBeLessThanOrEqual(contribution(r, i, j));
        expect(r.onsetBlock[i]).toBe(Math.ceil(r.boundaries[j + 1]));
      }
    }
    const r = /** @type {import("./result.js").Result} */ (decodeResult(makeResult({ T: 2, nBlocks: 20, every: 5 })));
    expect(segmentText(r, 1)).toBe("blocks 6\u201310");
  });

  it("rejects an onset_segment of the wrong shape or range, and boundaries that do not increase", () => {
    const raw = makeResult({ T: 3, nBlocks: 4, sublayer: true });
    expect(() => decodeResult({ ...raw, onset_segment: encodeArray(new Int32Array([0, 8, 1]), [3]) })).toThrow(/onset_segment/);
    expect(() => decodeResult({ ...raw, onset_segment: encodeArray(new Int32Array([0, -2, 1]), [3]) })).toThrow(RangeError);
    expect(() => decodeResult({ ...raw, onset_segment: encodeArray(new Int32Array([0, 1]), [2]) })).toThrow(/onset_segment/);
    expect(() => decodeResult({ ...raw, onset_segment: [0, 1, 2] })).toThrow(/onset_segment/);
    const b = raw.boundaries.slice();
    [b[2], b[3]] = [b[3], b[2]];
    expect(() => decodeResult({ ...raw, boundaries: b })).toThrow(/boundaries/);
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
    expect(r.controls).toEqual({ target: "predicted", contrast: " Hanoi", boundaries: "every:2", estimator: "prediction_aware", steps: 1, lens: "logit" });
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
