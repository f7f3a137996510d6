import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { againstSegments, againstSteps, flagged, DEFAULT_THRESHOLD } from "./nonmonotone.js";

const golden = JSON.parse(readFileSync(new URL("./testing/golden.json", import.meta.url), "utf8"));
const nan = (/** @type {(number|null)[]} */ a) => a.map((x) => (x === null ? NaN : x));

describe("againstSegments mirrors trajectory.against_segments", () => {
  it("default threshold is 0.05", () => expect(DEFAULT_THRESHOLD).toBe(0.05));

  it("flags a fall after a rise", () => {
    expect(againstSegments([0.5, -0.2, 0.1], 0.4)).toEqual([false, true, false]);
    expect(againstSegments([-0.5, 0.2, -0.1], -0.4)).toEqual([false, true, false]);
  });

  it("ignores tiny opposite segments (strict threshold) and Δp = 0 / NaN", () => {
    expect(againstSegments([1, -0.05, -0.051], 0.899)).toEqual([false, false, true]);
    expect(againstSegments([0.5, -0.5], 0)).toEqual([false, false]);
    expect(againstSegments([0.5, -0.2], NaN)).toEqual([false, false]);
    expect(againstSegments([0, 0, 0], 0)).toEqual([false, false, false]);
    expect(againstSegments([NaN, -0.3, 0.5], 0.2)).toEqual([false, true, false]);
  });

  it(`agrees with Python on ${golden.against_segments.length} golden cases`, () => {
    for (const c of golden.against_segments) {
      expect(againstSegments(nan(c.contributions), c.delta_p === null ? NaN : c.delta_p, c.threshold)).toEqual(c.expected);
    }
  });

  it("validates the threshold", () => {
    expect(() => againstSegments([1], 1, 1.5)).toThrow(RangeError);
    expect(() => againstSegments([1], 1, -0.1)).toThrow(RangeError);
  });
});

describe("againstSteps mirrors trajectory.against_steps", () => {
  it("flags a step that moves against its segment", () => {
    // one segment 0 → 1 in 3 steps: up, down, up
    expect(againstSteps([0, 0.8, 0.6, 1], 1)).toEqual([[false, true, false]]);
  });

  it("flags nothing in a flat segment", () => {
    expect(againstSteps([0.2, 0.3, 0.2], 1)).toEqual([[false, false]]);
  });

  it(`agrees with Python on ${golden.against_steps.length} golden cases`, () => {
    for (const c of golden.against_steps) {
      expect(againstSteps(nan(c.path), c.k, c.threshold)).toEqual(c.expected);
    }
  });

  it("needs m >= 1", () => {
    expect(() => againstSteps([0.1, 0.2], 2)).toThrow(RangeError);
  });

  it("flagged lists indices", () => {
    expect(flagged([false, true, true, false])).toEqual([1, 2]);
  });
});
