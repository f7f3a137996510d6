import { describe, it, expect } from "vitest";
import { readPathTrait } from "./path.js";
import { tokenFlags, againstSegments } from "../lib/nonmonotone.js";

/** A minimal result for the fit checks. */
const r = /** @type {any} */ ({ id: "r1", T: 3, k: 2, segmentLabels: ["1", "2"], targetIds: Int32Array.from([7, 8, 9]) });
const good = {
  position: 1,
  steps: 2,
  path: [
    [0.1, 0.2, 0.3],
    [0.3, null, 0.5],
  ],
  terms: null,
  labels: ["1", "2"],
  target_id: 8,
  estimator: "prediction_aware",
  seconds: 0.004,
  result_id: "r1",
  request_id: "q-1",
};

describe("readPathTrait", () => {
  it("reads a path that fits the result", () => {
    const { path, error } = readPathTrait(good, r);
    expect(error).toBeNull();
    expect(path?.position).toBe(1);
    expect(path?.m).toBe(2);
    expect(Array.from(path?.flat ?? [])).toEqual([0.1, 0.2, 0.3, 0.3, NaN, 0.5]);
    expect(path?.terms).toBeNull();
  });

  it("reads Riemann terms (k × m)", () => {
    const { path } = readPathTrait(
      {
        ...good,
        terms: [
          [0.05, 0.05],
          [0.1, 0.1],
        ],
      },
      r,
    );
    expect(Array.from(path?.terms ?? [])).toEqual([0.05, 0.05, 0.1, 0.1]);
  });

  it("ignores a path of another result (by its result_id), reports malformed ones and misfits", () => {
    expect(readPathTrait({}, r)).toEqual({ path: null, error: null });
    expect(readPathTrait({ ...good, result_id: "r0" }, r)).toEqual({ path: null, error: null });
    expect(readPathTrait({ ...good, result_id: undefined }, r)).toEqual({ path: null, error: null });
    expect(readPathTrait({ ...good, result_id: 1 }, r).error).toMatch(/result_id must be a string/);
    expect(readPathTrait({ ...good, request_id: 1 }, r).error).toMatch(/request_id must be a string/);
    // of this result but not fitting it: reported
    expect(readPathTrait({ ...good, labels: ["1", "3"] }, r).error).toMatch(/segment labels/);
    expect(readPathTrait({ ...good, target_id: 5 }, r).error).toMatch(/target id 5/);
    expect(readPathTrait({ ...good, position: 3 }, r).error).toMatch(/position 3/);
    expect(readPathTrait({ ...good, path: [[0.1, 0.2]] }, r).error).toMatch(/one row per segment/);
    expect(
      readPathTrait(
        {
          ...good,
          path: [
            [0.1, 0.2, "x"],
            [0, 0, 0],
          ],
        },
        r,
      ).error,
    ).toMatch(/not a number/);
    expect(readPathTrait({ ...good, terms: [[1], [2]] }, r).error).toMatch(/terms\[0\]/);
    // Python's errors come in answers, not in the trait: an {error} value is not a path
    expect(readPathTrait({ error: "no IGLens", position: 2, result_id: "r1" }, r).error).toMatch(/^Could not read the interior path: steps/);
  });
});

describe("tokenFlags", () => {
  it("flags the positions againstSegments flags, and scores the largest opposing move", () => {
    const c = [0.5, -0.2, 0.1, /* */ 0.3, 0.2, 0.1, /* */ NaN, NaN, NaN];
    const dp = [0.4, 0.6, NaN];
    const out = tokenFlags(c, dp, 3, 0.05);
    expect(Array.from(out.flags)).toEqual([1, 0, 0]);
    expect(out.positions).toEqual([0]);
    expect(out.score[0]).toBeCloseTo(0.2 / 0.5, 12);
    expect(out.score[1]).toBe(0);
    expect(out.score[2]).toBeNaN();
    for (let i = 0; i < 2; i++) expect(!!out.flags[i]).toBe(againstSegments(c.slice(3 * i, 3 * i + 3), dp[i], 0.05).some(Boolean));
  });

  it("with a path, a step against its segment flags the position too", () => {
    // k = 1, m = 2: the segment rises 0 → 1 but dips in the middle
    const out = tokenFlags([1], [1], 1, 0.05, [0, -0.3, 1]);
    expect(Array.from(out.flags)).toEqual([1]);
    expect(out.score[0]).toBe(0);
    expect(Array.from(tokenFlags([1], [1], 1, 0.05, [0, 0.5, 1]).flags)).toEqual([0]);
  });
});
