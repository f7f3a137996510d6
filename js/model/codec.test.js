import { describe, it, expect } from "vitest";
import { decodeArray, base64ToDataView, toBase64, encodeArray, decodeBase64Buffers, isPayload, toDataView } from "./codec.js";

describe("codec", () => {
  it("decodes a float32 DataView payload without copying", () => {
    const src = new Float32Array([1, 2, 3, 4, 5, 6]);
    const dv = new DataView(src.buffer);
    const out = decodeArray({ dtype: "float32", shape: [2, 3], buffer: dv });
    expect(out.shape).toEqual([2, 3]);
    expect(out.data).toBeInstanceOf(Float32Array);
    expect(Array.from(out.data)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(out.data.buffer).toBe(src.buffer);
  });

  it("decodes int32 with -1 and NaN float32", () => {
    const ints = decodeArray(encodeArray(new Int32Array([-1, 0, 7]), [3]));
    expect(Array.from(ints.data)).toEqual([-1, 0, 7]);
    const f = decodeArray(encodeArray(new Float32Array([NaN, 0.5]), [2]));
    expect(Number.isNaN(f.data[0])).toBe(true);
  });

  it("round-trips base64 (the static export form)", () => {
    const src = new Float32Array([0.25, -1.5, 3e-8, NaN]);
    const b64 = toBase64(new DataView(src.buffer));
    const dv = base64ToDataView(b64);
    expect(dv).toBeInstanceOf(DataView);
    const out = decodeArray({ dtype: "float32", shape: [4], buffer: b64 });
    expect(out.data[0]).toBe(0.25);
    expect(out.data[1]).toBe(-1.5);
    expect(out.data[2]).toBeCloseTo(3e-8, 12);
    expect(Number.isNaN(out.data[3])).toBe(true);
  });

  it("accepts base64 without padding and URL-safe alphabet", () => {
    const bytes = new Uint8Array([251, 255, 190, 1, 2]);
    const std = toBase64(bytes);
    const url = std.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    expect(Array.from(new Uint8Array(base64ToDataView(url).buffer))).toEqual(Array.from(bytes));
  });

  it("copies an unaligned view", () => {
    const raw = new Uint8Array(13);
    new DataView(raw.buffer).setFloat32(1, 2.5, true);
    new DataView(raw.buffer).setFloat32(5, -4, true);
    const out = decodeArray({ dtype: "float32", shape: [2], buffer: new DataView(raw.buffer, 1, 8) });
    expect(Array.from(out.data)).toEqual([2.5, -4]);
  });

  it("rejects a size mismatch and unknown dtypes", () => {
    const dv = new DataView(new ArrayBuffer(8));
    expect(() => decodeArray({ dtype: "float32", shape: [3], buffer: dv })).toThrow(RangeError);
    expect(() => decodeArray({ dtype: "complex64", shape: [1], buffer: dv })).toThrow(TypeError);
  });

  it("handles int64 and numpy dtype strings", () => {
    const big = new BigInt64Array([-1n, 5n]);
    const out = decodeArray({ dtype: "int64", shape: [2], buffer: new DataView(big.buffer) });
    expect(Array.from(out.data)).toEqual([-1, 5]);
    const f = decodeArray({ dtype: "<f4", shape: [1], buffer: new DataView(new Float32Array([3]).buffer) });
    expect(f.data[0]).toBe(3);
  });

  it("accepts ArrayBuffer, typed arrays and plain data arrays", () => {
    const src = new Int32Array([4, 5]);
    expect(Array.from(decodeArray({ dtype: "int32", shape: [2], buffer: src.buffer }).data)).toEqual([4, 5]);
    expect(Array.from(decodeArray({ dtype: "int32", shape: [2], buffer: src }).data)).toEqual([4, 5]);
    expect(Array.from(decodeArray({ dtype: "float32", shape: [1, 2], data: [1, null] }).data)).toEqual([1, NaN]);
    expect(() => toDataView(42)).toThrow(TypeError);
  });

  it("decodes base64 buffers deep inside a state, leaving the rest alone", () => {
    const payload = encodeArray(new Float32Array([1, 2]), [2], { base64: true });
    expect(typeof payload.buffer).toBe("string");
    const state = { result: { a: payload, nested: [payload], tokens: ["x"] }, selected: 3 };
    const out = decodeBase64Buffers(state);
    expect(out.result.a.buffer).toBeInstanceOf(DataView);
    expect(out.result.nested[0].buffer).toBeInstanceOf(DataView);
    expect(out.result.tokens).toEqual(["x"]);
    expect(out.selected).toBe(3);
    expect(typeof state.result.a.buffer).toBe("string"); // input untouched
    expect(isPayload(out.result.a)).toBe(true);
    expect(isPayload({ dtype: "x" })).toBe(false);
  });
});
