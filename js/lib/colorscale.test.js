import { describe, it, expect } from "vitest";
import {
  divergingScale,
  sequentialScale,
  ordinalScale,
  niceTicks,
  legendTicks,
  formatTick,
  textColorFor,
  hexToRgb,
  rgbToHex,
  rgbToLab,
  labToRgb,
  luminance,
  parseCssColor,
  cssGradient,
  RDBU_R,
} from "./colorscale.js";

const L = (/** @type {[number, number, number]} */ rgb) => rgbToLab(rgb)[0];

describe("diverging scale", () => {
  for (const theme of /** @type {const} */ (["light", "dark"])) {
    it(`is centred at 0 with symmetric limits (${theme})`, () => {
      const s = divergingScale(0.4, theme);
      expect(s.lo).toBe(-0.4);
      expect(s.hi).toBe(0.4);
      const last = s.lut.length / 3 - 1;
      expect(s.index(0)).toBe(last / 2); // exactly the middle entry
      expect(s.index(0.4)).toBe(last);
      expect(s.index(-0.4)).toBe(0);
      expect(s.index(9)).toBe(last); // clamped
      expect(s.index(NaN)).toBe(-1);
      expect(s.rgb(NaN)).toBeNull();
    });

    it(`is red for positive and blue for negative, symmetric in lightness (${theme})`, () => {
      const s = divergingScale(1, theme);
      const pos = /** @type {[number, number, number]} */ (s.rgb(0.8));
      const neg = /** @type {[number, number, number]} */ (s.rgb(-0.8));
      expect(pos[0]).toBeGreaterThan(pos[2]);
      expect(neg[2]).toBeGreaterThan(neg[0]);
      const mid = /** @type {[number, number, number]} */ (s.rgb(0));
      // |value| moves lightness monotonically away from the centre on both sides
      const away = (/** @type {number} */ v) => Math.abs(L(/** @type {any} */ (s.rgb(v))) - L(mid));
      for (const side of [1, -1]) {
        let prev = -1;
        for (const v of [0.1, 0.3, 0.5, 0.7, 0.9]) {
          const d = away(side * v);
          expect(d).toBeGreaterThan(prev - 1.5);
          prev = d;
        }
      }
    });
  }

  it("falls back to limit 1 for a zero or NaN vmax", () => {
    expect(divergingScale(0).hi).toBe(1);
    expect(divergingScale(NaN).lo).toBe(-1);
  });

  it("uses the ColorBrewer RdBu ends", () => {
    const s = divergingScale(1, "light");
    expect(s.css(1)).toBe(RDBU_R[RDBU_R.length - 1]);
    expect(s.css(-1)).toBe(RDBU_R[0]);
    expect(s.css(0)).toBe("#f7f7f7");
  });
});

describe("sequential and ordinal scales", () => {
  it("sequential gets darker with p on light, lighter on dark", () => {
    const light = sequentialScale("light");
    const dark = sequentialScale("dark");
    expect(L(/** @type {any} */ (light.rgb(0.9)))).toBeLessThan(L(/** @type {any} */ (light.rgb(0.1))));
    expect(L(/** @type {any} */ (dark.rgb(0.9)))).toBeGreaterThan(L(/** @type {any} */ (dark.rgb(0.1))));
  });

  it("ordinal spans viridis over n categories", () => {
    const s = ordinalScale(30);
    expect(s.css(0)).toBe("#440154");
    expect(s.css(29)).toBe("#fde725");
    expect(ordinalScale(1).index(0)).toBe(0);
  });
});

describe("ticks", () => {
  it("niceTicks uses 1-2-5 steps and includes 0", () => {
    expect(niceTicks(-0.4, 0.4, 4).ticks).toEqual([-0.4, -0.2, 0, 0.2, 0.4]);
    expect(niceTicks(0, 1, 5).ticks).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(-0.037, 0.037, 4).ticks).toEqual([-0.02, 0, 0.02]);
    expect(niceTicks(-0.037, 0.037, 8).ticks).toEqual([-0.03, -0.02, -0.01, 0, 0.01, 0.02, 0.03]);
    expect(niceTicks(1, 1).ticks).toEqual([1]);
    expect(niceTicks(-0.4326, 0.4326, 4).ticks).toEqual([-0.4, -0.2, 0, 0.2, 0.4]);
    for (const v of [0.011, 0.026, 0.049, 0.073, 0.131, 0.2999, 0.51, 0.74, 0.99, 3.3e-5]) {
      const t = niceTicks(-v, v, 4).ticks;
      expect(t.length).toBeGreaterThanOrEqual(3);
      expect(t.length).toBeLessThanOrEqual(9);
      expect(t).toContain(0);
    }
  });

  it("formatTick uses the minus sign and enough decimals", () => {
    expect(formatTick(-0.2, 0.2)).toBe("\u22120.2");
    expect(formatTick(0, 0.1)).toBe("0");
    expect(formatTick(0.05, 0.05)).toBe("0.05");
    expect(formatTick(2e-5, 1e-5)).toBe("2e-5");
    expect(formatTick(-2.5e-5, 5e-6)).toBe("\u22122.5e-5");
  });

  it("legendTicks places ticks along the bar", () => {
    const ticks = legendTicks(divergingScale(0.5), 4);
    const zero = ticks.find((t) => t.value === 0);
    expect(zero?.t).toBeCloseTo(0.5);
    expect(ticks[0].t).toBeGreaterThanOrEqual(0);
    expect(ticks[ticks.length - 1].t).toBeLessThanOrEqual(1);
  });
});

describe("colour utilities", () => {
  it("round-trips hex and Lab", () => {
    expect(rgbToHex(hexToRgb("#b2182b"))).toBe("#b2182b");
    expect(hexToRgb("#fff")).toEqual([255, 255, 255]);
    const back = labToRgb(rgbToLab([33, 102, 172]));
    expect(back.map(Math.round)).toEqual([33, 102, 172]);
  });

  it("textColorFor picks the more contrasting text", () => {
    expect(textColorFor([255, 255, 255])).toBe("#111111");
    expect(textColorFor([5, 48, 97])).toBe("#ffffff");
    expect(luminance([0, 0, 0])).toBe(0);
  });

  it("parses computed CSS colours", () => {
    expect(parseCssColor("rgb(17, 17, 17)")).toEqual({ rgb: [17, 17, 17], alpha: 1 });
    expect(parseCssColor("rgba(0, 0, 0, 0)")?.alpha).toBe(0);
    expect(parseCssColor("rgb(0 0 0 / 50%)")?.alpha).toBe(0.5);
    expect(parseCssColor("#ffffff")?.rgb).toEqual([255, 255, 255]);
    expect(parseCssColor("transparent")).toBeNull();
  });

  it("cssGradient lists 11 stops", () => {
    expect(cssGradient(divergingScale(1)).match(/#/g)?.length).toBe(11);
  });
});
