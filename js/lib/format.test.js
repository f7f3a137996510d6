// Probabilities as a person reads them: no exponent form ("3.7e-33" at block 0).
import { describe, it, expect } from "vitest";
import { fmtProb } from "./format.js";

describe("fmtProb", () => {
  it("3 decimals from 0.001, '< 0.001' below", () => {
    expect(fmtProb(0.42)).toBe("0.420");
    expect(fmtProb(0.001)).toBe("0.001");
    expect(fmtProb(3.7e-33)).toBe("< 0.001");
    expect(fmtProb(0.00099)).toBe("< 0.001");
    expect(fmtProb(-0.25)).toBe("\u22120.250");
    expect(fmtProb(-2e-9)).toBe("> \u22120.001");
    expect(fmtProb(0)).toBe("0");
    expect(fmtProb(NaN)).toBe("\u2013");
  });
});
