// The legend's numeric ticks never overlap: a contrast target's scale (limits ±0.45) showed
// "−0.4−0.2 0 0.2 0.4" on the 150 px bar.
import { describe, it, expect } from "vitest";
import { divergingScale, legendTicks } from "../lib/colorscale.js";
import { fitTicks, labelWidth } from "./legend.js";

describe("legend ticks", () => {
  it("a ±0.45 scale keeps 0 and the ends, not five crowded labels", () => {
    const marks = legendTicks(divergingScale(0.45, "light"), 3);
    expect(marks.map((m) => m.label)).toEqual(["\u22120.4", "\u22120.2", "0", "0.2", "0.4"]);
    expect(fitTicks(marks, 150, 5.8).map((m) => m.label)).toEqual(["\u22120.4", "0", "0.4"]);
  });

  it("ticks that fit are all kept", () => {
    const marks = legendTicks(divergingScale(1, "light"), 3);
    expect(fitTicks(marks, 150, 5.8)).toEqual(marks);
  });

  it("the kept labels never touch, whatever the limit", () => {
    for (const limit of [0.013, 0.07, 0.3, 0.45, 0.9, 2.5, 17]) {
      const kept = fitTicks(legendTicks(divergingScale(limit, "light"), 3), 150, 5.8);
      let right = -Infinity;
      kept.forEach((m, q) => {
        const w = labelWidth(m.label, 5.8);
        const x = m.t * 150;
        const left = q === 0 ? x : q === kept.length - 1 ? x - w : x - w / 2;
        expect(left).toBeGreaterThanOrEqual(right);
        right = left + w;
      });
    }
  });
});
