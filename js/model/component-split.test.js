import { describe, it, expect } from "vitest";
import { decodeComponents, readComponentsTrait, mergeComponents, componentsMismatch, segmentMatrix, shortName, cellName } from "./component-split.js";
import { decodeResult, contribution } from "./result.js";
import { makeResult, makeComponents, componentSegments } from "../testing/fixture.js";
import { encodeArray, decodeBase64Buffers } from "./codec.js";

/** @param {any} raw */
const decoded = (raw) => /** @type {import("./result.js").Result} */ (decodeResult(raw));
/** @param {any} raw */
const comps = (raw) => /** @type {import("./component-split.js").Components} */ (decodeComponents(raw));

describe("decodeComponents", () => {
  it("null, undefined and {} mean no split", () => {
    expect(decodeComponents(null)).toBeNull();
    expect(decodeComponents(undefined)).toBeNull();
    expect(decodeComponents({})).toBeNull();
  });

  it("reads names, segments, positions and shares; sharesAt(t) is one position's (n·C) slice", () => {
    const raw = makeResult({ T: 5, nBlocks: 4, sublayer: true, components: { heads: 3, positions: [1, 3] } });
    const c = comps(raw.components);
    expect(c.names).toEqual(["head:0", "head:1", "head:2", "mlp", "rest"]);
    expect([c.n, c.C]).toEqual([4, 5]);
    expect(c.positions).toEqual([1, 3]);
    // attention parts of block L in segment 2(L−1) (L.attn), the MLP in 2(L−1)+1 (L.mlp)
    expect(Array.from(c.segments.subarray(0, 10))).toEqual([0, 0, 0, 1, 0, 2, 2, 2, 3, 2]);
    const s = /** @type {import("./component-split.js").Shares} */ (c.sharesAt(3));
    expect(s.names).toBe(c.names);
    expect(s.shares.length).toBe(4 * 5);
    expect(Array.from(s.shares)).toEqual(Array.from(c.shares.subarray(20, 40)));
    expect(c.sharesAt(0)).toBeNull();
    expect(c.sharesAt(2)).toBeNull();
    // a detached lookup still works
    const at = c.sharesAt;
    expect(at(1)?.names).toEqual(c.names);
  });

  it("the fixture's shares add up to each segment's contribution (the protocol's invariant)", () => {
    for (const o of [{ sublayer: true }, { every: 3 }, { every: 1 }]) {
      const raw = makeResult({ T: 4, nBlocks: 6, ...o, components: { heads: 4 } });
      const r = decoded(raw);
      expect(r.componentsError).toBeNull();
      for (let t = 0; t < r.T; t++) {
        const s = /** @type {import("./component-split.js").Shares} */ (r.components?.sharesAt(t));
        for (let j = 0; j < r.k; j++) {
          let sum = 0;
          for (let q = 0; q < s.n * s.C; q++) if (s.segments[q] === j && Number.isFinite(s.shares[q])) sum += s.shares[q];
          expect(Math.abs(sum - contribution(r, t, j))).toBeLessThan(1e-6);
          expect(Math.abs(segmentMatrix(s, j).sum - sum)).toBeLessThan(1e-12);
        }
      }
    }
  });

  it("the base64 (static export) form decodes to the same split", () => {
    const a = makeResult({ T: 3, nBlocks: 4, components: true });
    const b = decodeBase64Buffers(makeResult({ T: 3, nBlocks: 4, components: true, base64: true }));
    expect(typeof makeResult({ T: 3, nBlocks: 4, components: true, base64: true }).components.shares.buffer).toBe("string");
    expect(Array.from(comps(b.components).shares)).toEqual(Array.from(comps(a.components).shares));
  });

  it("rejects malformed splits with a TypeError or RangeError naming the key", () => {
    const good = makeResult({ T: 3, nBlocks: 4, components: { heads: 2 } }).components;
    const C = good.names.length;
    /** @type {Array<[any, any, RegExp]>} */
    const cases = [
      ["x", TypeError, /result\.components must be an object/],
      [[1, 2], TypeError, /result\.components must be an object/],
      [{ ...good, names: "head:0" }, TypeError, /names/],
      [{ ...good, names: [] }, TypeError, /names/],
      [{ ...good, names: [...good.names.slice(0, -1), 3] }, TypeError, /names/],
      [{ ...good, names: [...good.names.slice(0, -1), "mlp"] }, RangeError, /names must not repeat/],
      [{ ...good, segments: [[0]] }, TypeError, /segments/],
      [{ ...good, segments: encodeArray(new Int32Array(4 * (C - 1)), [4, C - 1]) }, RangeError, /segments must have shape \(n, C=4\)/],
      [{ ...good, segments: encodeArray(new Int32Array(4 * C).fill(-1), [4, C]) }, RangeError, /segments must hold segment indices/],
      [{ ...good, segments: encodeArray(new Float32Array(4 * C).fill(0.5), [4, C]) }, RangeError, /segments/],
      [{ ...good, positions: [0, 1.5, 2] }, TypeError, /positions/],
      [{ ...good, positions: "0,1,2" }, TypeError, /positions/],
      [{ ...good, positions: [0, 1, 1] }, RangeError, /positions must not repeat/],
      [{ ...good, shares: null }, TypeError, /shares/],
      [{ ...good, shares: encodeArray(new Int32Array(3 * 4 * C), [3, 4, C]) }, TypeError, /shares must be float32/],
      [{ ...good, shares: encodeArray(new Float32Array(2 * 4 * C), [2, 4, C]) }, RangeError, /shares must have shape \(P=3, n=4, C=4\)/],
    ];
    for (const [raw, Err, msg] of cases) {
      expect(() => decodeComponents(raw), JSON.stringify(msg.source)).toThrow(Err);
      expect(() => decodeComponents(raw)).toThrow(msg);
    }
  });

  it("float64 shares are accepted too", () => {
    const raw = makeResult({ T: 2, nBlocks: 3, components: true }).components;
    const c32 = comps(raw);
    const c64 = comps({ ...raw, shares: encodeArray(Float64Array.from(c32.shares), [2, 3, c32.C]) });
    expect(Array.from(c64.shares)).toEqual(Array.from(c32.shares));
  });
});

describe("the split inside decodeResult", () => {
  it("a result without components has none; a malformed one is reported without losing the result", () => {
    expect(decoded(makeResult({ T: 2, nBlocks: 3 })).components).toBeNull();
    const raw = makeResult({ T: 3, nBlocks: 4, components: true });
    const broken = decoded({ ...raw, components: { ...raw.components, shares: "nope" } });
    expect(broken.T).toBe(3);
    expect(broken.components).toBeNull();
    expect(broken.componentsError).toMatch(/result\.components\.shares/);
  });

  it("a split must fit the result: its blocks, segment indices and positions", () => {
    const raw = makeResult({ T: 3, nBlocks: 4, every: 2, components: true });
    const r = decoded(raw);
    expect(r.k).toBe(2);
    const other = makeResult({ T: 3, nBlocks: 4, components: true }).components; // 4 segments
    expect(decoded({ ...raw, components: other }).componentsError).toMatch(/names segment 2, the result has 2/);
    const fewer = makeResult({ T: 3, nBlocks: 3, components: true }).components;
    expect(decoded({ ...raw, components: fewer }).componentsError).toMatch(/3 blocks, the result 4/);
    const halves = makeResult({ T: 3, nBlocks: 4, sublayer: true });
    expect(decoded({ ...halves, components: raw.components }).componentsError).toMatch(
      /puts block 2's head:0 in segment 0 \(depth 0 → 0\.5\), which does not overlap block 2/,
    );
    const c = comps(raw.components);
    expect(componentsMismatch({ ...c, positions: [0, 7] }, r)).toMatch(/positions has 7/);
    expect(componentsMismatch(c, r)).toBeNull();
  });
});

describe("the components trait and the merge", () => {
  const raw = makeResult({ T: 6, nBlocks: 4, sublayer: true, components: { heads: 2 } });
  const r = decoded(raw);

  it("reads {}, a trait of another result (by its result_id), a malformed trait and one that does not fit", () => {
    expect(readComponentsTrait({}, r)).toEqual({ components: null, error: null, stale: false });
    expect(readComponentsTrait(undefined, r)).toEqual({ components: null, error: null, stale: false });
    const mine = (/** @type {Record<string, any>} */ t) => ({ ...t, result_id: r.id, request_id: "q-1" });
    const ok = readComponentsTrait(mine(makeComponents(raw, { heads: 2, positions: [2], seed: 9 })), r);
    expect(ok.components?.positions).toEqual([2]);
    // another result's split: not shown, not an error (no result_id counts as "")
    expect(readComponentsTrait({ ...mine(makeComponents(raw, { heads: 2, positions: [2] })), result_id: "r0" }, r)).toEqual({
      components: null,
      error: null,
      stale: true,
    });
    expect(readComponentsTrait(makeComponents(raw, { heads: 2, positions: [2] }), r).stale).toBe(true);
    // this result's, not of the documented form or not fitting it: reported
    expect(readComponentsTrait(mine({ names: ["attn"] }), r).error).toMatch(/^Could not read the head shares: the components trait\.segments/);
    expect(readComponentsTrait(mine({ error: "gpt2: heads cannot be split" }), r).error).toMatch(/^Could not read the head shares: .*names/);
    expect(readComponentsTrait({ ...mine({}), result_id: 4 }, r).error).toMatch(/result_id must be a string/);
    const misfit = readComponentsTrait(mine(makeResult({ T: 6, nBlocks: 4, every: 2, components: true }).components), r);
    expect(misfit.error).toMatch(/^Could not read the head shares: the components trait/);
  });

  it("a position's shares come from the trait when it has that position, else from result.components", () => {
    const trait = comps(makeComponents(raw, { heads: 2, positions: [2, 5], seed: 9 }));
    const fromResult = /** @type {import("./component-split.js").Components} */ (r.components);
    expect(Array.from(trait.sharesAt(2)?.shares ?? [])).not.toEqual(Array.from(fromResult.sharesAt(2)?.shares ?? []));
    const merged = mergeComponents(trait, fromResult);
    expect(merged.sharesAt(2)?.shares).toEqual(trait.sharesAt(2)?.shares);
    expect(merged.sharesAt(5)?.shares).toEqual(trait.sharesAt(5)?.shares);
    expect(merged.sharesAt(3)?.shares).toEqual(fromResult.sharesAt(3)?.shares);
    expect(merged.positions).toEqual([0, 1, 2, 3, 4, 5]);
    expect(mergeComponents(trait, null).sharesAt(3)).toBeNull();
    expect(mergeComponents(null, null).sharesAt(0)).toBeNull();
    expect(mergeComponents(null, null).positions).toEqual([]);
  });
});

describe("segment matrix", () => {
  it("rows are the blocks whose components lie in the segment, columns those components", () => {
    const r = decoded(makeResult({ T: 3, nBlocks: 6, sublayer: true, components: { heads: 3 } }));
    const s = /** @type {import("./component-split.js").Shares} */ (r.components?.sharesAt(1));
    const attn = segmentMatrix(s, 4); // 3.attn
    expect(attn.blocks).toEqual([3]);
    expect(attn.colNames).toEqual(["head:0", "head:1", "head:2", "rest"]);
    const mlp = segmentMatrix(s, 5); // 3.mlp
    expect(mlp.blocks).toEqual([3]);
    expect(mlp.colNames).toEqual(["mlp"]);
    expect(mlp.sum).toBeCloseTo(contribution(r, 1, 5), 7);
    expect(attn.ranked.map((c) => Math.abs(c.value))).toEqual(attn.ranked.map((c) => Math.abs(c.value)).sort((a, b) => b - a));

    const wide = decoded(makeResult({ T: 3, nBlocks: 6, every: 3, components: { heads: 2 } }));
    const m = segmentMatrix(/** @type {any} */ (wide.components?.sharesAt(0)), 0);
    expect(m.blocks).toEqual([1, 2, 3]);
    expect(m.colNames).toEqual(["head:0", "head:1", "mlp", "rest"]);
    expect(Number.isNaN(/** @type {any} */ (m.cells[0][3]).value)).toBe(true); // block 1's rest: not applicable
    expect(m.ranked.length).toBe(3 * 4 - 1);
  });

  it("componentSegments mirrors Python's component_segments", () => {
    expect(Array.from(componentSegments([0, 2, 4], ["attn", "mlp"], 4))).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    expect(Array.from(componentSegments([0, 0.5, 1, 1.5, 2], ["attn", "mlp"], 2))).toEqual([0, 1, 2, 3]);
  });

  it("short names", () => {
    expect(["head:0", "head:17", "mlp", "rest", "attn"].map(shortName)).toEqual(["h0", "h17", "mlp", "rest", "attn"]);
    expect(cellName({ block: 12, c: 3, name: "head:3", value: 0 })).toBe("L12.h3");
  });
});
