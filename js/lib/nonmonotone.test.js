import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { againstSegments, againstSteps, flagged, ruleText, stepRuleText, thresholdPercent } from "./nonmonotone.js";

const golden = JSON.parse(readFileSync(new URL("../testing/golden.json", import.meta.url), "utf8"));
const nan = (/** @type {(number|null)[]} */ a) => a.map((x) => (x === null ? NaN : x));

describe("againstSegments mirrors trajectory.against_segments", () => {
  it("has no default threshold: the caller passes the result's", () => {
    expect(() => againstSegments([0.5, -0.2], 0.3)).toThrow(RangeError);
    expect(() => againstSteps([0, 0.8, 0.6, 1], 1)).toThrow(RangeError);
  });

  it("flags a fall after a rise", () => {
    expect(againstSegments([0.5, -0.2, 0.1], 0.4, 0.05)).toEqual([false, true, false]);
    expect(againstSegments([-0.5, 0.2, -0.1], -0.4, 0.05)).toEqual([false, true, false]);
  });

  it("the threshold decides what is flagged", () => {
    expect(againstSegments([0.5, -0.1, 0.4], 0.8, 0.05)).toEqual([false, true, false]);
    expect(againstSegments([0.5, -0.1, 0.4], 0.8, 0.25)).toEqual([false, false, false]);
  });

  it("ignores tiny opposite segments (strict threshold) and Δp = 0 / NaN", () => {
    expect(againstSegments([1, -0.05, -0.051], 0.899, 0.05)).toEqual([false, false, true]);
    expect(againstSegments([0.5, -0.5], 0, 0.05)).toEqual([false, false]);
    expect(againstSegments([0.5, -0.2], NaN, 0.05)).toEqual([false, false]);
    expect(againstSegments([0, 0, 0], 0, 0.05)).toEqual([false, false, false]);
    expect(againstSegments([NaN, -0.3, 0.5], 0.2, 0.05)).toEqual([false, true, false]);
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
    expect(againstSteps([0, 0.8, 0.6, 1], 1, 0.05)).toEqual([[false, true, false]]);
  });

  it("flags nothing in a flat segment", () => {
    expect(againstSteps([0.2, 0.3, 0.2], 1, 0.05)).toEqual([[false, false]]);
  });

  it(`agrees with Python on ${golden.against_steps.length} golden cases`, () => {
    for (const c of golden.against_steps) {
      expect(againstSteps(nan(c.path), c.k, c.threshold)).toEqual(c.expected);
    }
  });

  it("needs m >= 1", () => {
    expect(() => againstSteps([0.1, 0.2], 2, 0.05)).toThrow(RangeError);
  });

  it("flagged lists indices", () => {
    expect(flagged([false, true, true, false])).toEqual([1, 2]);
  });
});

describe("the rule in words", () => {
  it("states the threshold as a percentage", () => {
    expect(thresholdPercent(0.05)).toBe("5%");
    expect(thresholdPercent(0.025)).toBe("2.5%");
    expect(ruleText(0.05)).toBe("against \u0394p by more than 5% of the largest |contribution|");
    expect(stepRuleText(0.3)).toBe("by more than 30% of the largest |step|");
  });
});
