/**
 * The component split (docs/widget-protocol.md, `result.components` and the `components`
 * trait): each segment's contribution divided over the (block, component) pairs it holds,
 * where the components are the attention heads, the MLP and the remainder of the attention
 * write (`head:0 … head:H−1, mlp, rest`), or `attn, mlp` where heads cannot be split.
 * Decoding, validation, the merge of the trait with the result, and the per-segment matrix.
 * Pure: no DOM.
 * @module components
 */
import { decodeArray, isPayload } from "./codec.js";
import { isObject, answerTrait } from "./answer-trait.js";

/**
 * @typedef {import("./codec.js").TypedArray} TypedArray
 *
 * @typedef {object} Shares the split of one position
 * @property {string[]} names C component names
 * @property {number} n blocks
 * @property {number} C components per block
 * @property {TypedArray} segments (n·C) the segment index j holding each (block, component), row-major
 * @property {TypedArray} shares (n·C) each (block, component)'s share of its segment's contribution (NaN: not applicable)
 *
 * @typedef {object} Components a decoded split (of one or more positions)
 * @property {string[]} names
 * @property {number} n
 * @property {number} C
 * @property {TypedArray} segments (n·C)
 * @property {number[]} positions P
 * @property {TypedArray} shares (P·n·C)
 * @property {(t: number) => Shares|null} sharesAt the split of position t, null when absent
 *
 * @typedef {object} ComponentsFit what a split must agree with: the result it belongs to
 * @property {number} T positions
 * @property {number} k segments
 * @property {number} nBlocks blocks
 * @property {number[]} [boundaries] (k+1) depths: when given, each (block, component)'s segment
 *   must overlap its block
 *
 * @typedef {object} MatrixCell
 * @property {number} block 1-based
 * @property {number} c component index
 * @property {string} name the component's full name ("head:3")
 * @property {number} value its share (NaN: not applicable)
 *
 * @typedef {object} SegmentMatrix the (block × component) shares of one segment
 * @property {number} j the segment
 * @property {number[]} blocks 1-based blocks whose components lie in segment j (the rows)
 * @property {number[]} cols component indices that lie in segment j in some row (the columns)
 * @property {string[]} colNames their names
 * @property {(MatrixCell|null)[][]} cells rows × cols; null where that (block, component) is in another segment
 * @property {number} sum Σ of the finite shares (float64)
 * @property {MatrixCell[]} ranked the finite cells by decreasing |share|
 */

/** Whether a trait/key value means "no split": null, undefined or `{}`. @param {unknown} raw */
export const isEmptyComponents = (raw) => raw === null || raw === undefined || (isObject(raw) && Object.keys(raw).length === 0);

/**
 * Decode a component split (`result.components`, or the `components` trait).
 * Returns null for null, undefined or `{}`; throws a TypeError (wrong type) or RangeError
 * (wrong shape or value) naming the offending key otherwise.
 * @param {unknown} raw
 * @param {string} [where] how messages name it
 * @returns {Components|null}
 */
export function decodeComponents(raw, where = "result.components") {
  if (isEmptyComponents(raw)) return null;
  if (!isObject(raw)) throw new TypeError(`${where} must be an object {names, segments, positions, shares} or null`);
  const names = raw.names;
  if (!Array.isArray(names) || names.length === 0 || !names.every((x) => typeof x === "string" && x !== "")) {
    throw new TypeError(`${where}.names must be a non-empty list of component names ("head:0", …, "mlp", "rest")`);
  }
  if (new Set(names).size !== names.length) throw new RangeError(`${where}.names must not repeat a name`);
  const C = names.length;

  if (!isPayload(raw.segments)) throw new TypeError(`${where}.segments must be an int32 (n, C) ndarray payload`);
  const seg = decodeArray(raw.segments);
  if (seg.shape.length !== 2 || seg.shape[1] !== C || seg.shape[0] < 1) {
    throw new RangeError(`${where}.segments must have shape (n, C=${C}), got ${JSON.stringify(seg.shape)}`);
  }
  const n = seg.shape[0];
  for (let q = 0; q < seg.data.length; q++) {
    const v = seg.data[q];
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`${where}.segments must hold segment indices >= 0, got ${v}`);
  }

  const positions = raw.positions;
  if (!Array.isArray(positions) || !positions.every((p) => Number.isInteger(p) && p >= 0)) {
    throw new TypeError(`${where}.positions must be a list of positions (integers >= 0)`);
  }
  if (new Set(positions).size !== positions.length) throw new RangeError(`${where}.positions must not repeat a position`);
  const P = positions.length;

  if (!isPayload(raw.shares)) throw new TypeError(`${where}.shares must be a float32 (P, n, C) ndarray payload`);
  const sh = decodeArray(raw.shares);
  if (sh.dtype !== "float32" && sh.dtype !== "float64") {
    throw new TypeError(`${where}.shares must be float32, got ${JSON.stringify(raw.shares.dtype)}`);
  }
  const [sP, sn, sC] = sh.shape;
  if (sh.shape.length !== 3 || sP !== P || sn !== n || sC !== C) {
    throw new RangeError(`${where}.shares must have shape (P=${P}, n=${n}, C=${C}), got ${JSON.stringify(sh.shape)}`);
  }
  const index = new Map(positions.map((p, q) => [p, q]));
  const size = n * C;
  const nameList = names.slice();
  return {
    names: nameList,
    n,
    C,
    segments: seg.data,
    positions: positions.slice(),
    shares: sh.data,
    sharesAt(t) {
      const q = index.get(t);
      if (q === undefined) return null;
      return { names: nameList, n, C, segments: seg.data, shares: sh.data.subarray(q * size, (q + 1) * size) };
    },
  };
}

/**
 * Why a split does not belong to a result (null when it does): its blocks, segment indices
 * and positions must fit.
 * @param {Components} comp @param {ComponentsFit} r @param {string} [where]
 * @returns {string|null}
 */
export function componentsMismatch(comp, r, where = "result.components") {
  if (comp.n !== r.nBlocks) return `${where} has ${comp.n} blocks, the result ${r.nBlocks}`;
  for (let q = 0; q < comp.segments.length; q++) {
    if (comp.segments[q] >= r.k) return `${where}.segments names segment ${comp.segments[q]}, the result has ${r.k} (0 … ${r.k - 1})`;
  }
  const b = r.boundaries;
  if (b) {
    // block L spans depths L − 1 → L: its components lie in segments that overlap it
    for (let q = 0; q < comp.segments.length; q++) {
      const L = Math.floor(q / comp.C) + 1;
      const j = comp.segments[q];
      if (!(b[j] < L && b[j + 1] > L - 1)) {
        return `${where}.segments puts block ${L}'s ${comp.names[q % comp.C]} in segment ${j} (depth ${b[j]} \u2192 ${b[j + 1]}), which does not overlap block ${L}`;
      }
    }
  }
  const bad = comp.positions.find((p) => p >= r.T);
  if (bad !== undefined) return `${where}.positions has ${bad}, the result has ${r.T} positions`;
  return null;
}

/**
 * @typedef {object} TraitComponents the `components` trait, read
 * @property {Components|null} components usable for the current result
 * @property {string|null} error why the trait (of this result) could not be read (Python's errors
 *   come in answers)
 * @property {boolean} stale a split of another result (by its `result_id`): not shown
 */

/**
 * Read the `components` trait against the current result: `{}` / absent → nothing; a split
 * of another result (its `result_id` is not the result's `id`) → stale (not shown); one of
 * this result that is not of the documented form, or does not fit the result, → the reason.
 * Never throws.
 * @param {unknown} raw @param {(ComponentsFit & {id: string})|null} r
 * @returns {TraitComponents}
 */
export function readComponentsTrait(raw, r) {
  const none = { components: null, error: null, stale: false };
  const bad = (/** @type {string} */ why) => ({ ...none, error: `Could not read the head shares: ${why}` });
  const got = answerTrait(raw, r, "the components trait");
  if (got.kind === "empty") return none;
  if (got.kind === "not-object") return bad("the components trait must be an object {names, segments, positions, shares, result_id}");
  if (got.kind === "error") return bad(got.why);
  if (got.kind === "stale" || !r) return { ...none, stale: true };
  let comp;
  try {
    comp = decodeComponents(raw, "the components trait");
  } catch (err) {
    return bad(err instanceof Error ? err.message : String(err));
  }
  if (!comp) return none;
  const why = componentsMismatch(comp, r, "the components trait");
  if (why) return bad(why);
  return { ...none, components: comp };
}

/**
 * The merged lookup: a position's shares come from the trait when it has that position, else
 * from `result.components`.
 * @param {Components|null} trait @param {Components|null} fromResult
 * @returns {{sharesAt: (t: number) => Shares|null, positions: number[]}}
 */
export function mergeComponents(trait, fromResult) {
  const positions = [...new Set([...(trait?.positions ?? []), ...(fromResult?.positions ?? [])])].sort((a, b) => a - b);
  return {
    positions,
    sharesAt: (t) => trait?.sharesAt(t) ?? fromResult?.sharesAt(t) ?? null,
  };
}

/**
 * The component a fitted lens adds (last in `names`): the change of the lens's coordinates
 * along a segment, at the segment's last block; its own column, never folded into a head.
 */
export const COORDINATE = "coordinate";

/**
 * A component's short column name: "head:3" → "h3"; "coordinate" → "coord"; "mlp", "rest",
 * "attn" as they are.
 * @param {string} name
 */
export function shortName(name) {
  if (name === COORDINATE) return "coord";
  const m = /^head:(\d+)$/.exec(name);
  return m ? `h${m[1]}` : name;
}

/**
 * The (block × component) shares that lie in segment j: rows are the blocks with at least
 * one component in j, columns the components in j in some row.
 * @param {Shares} s @param {number} j
 * @returns {SegmentMatrix}
 */
export function segmentMatrix(s, j) {
  const { n, C } = s;
  /** @type {number[]} */
  const rows = [];
  const inCols = new Array(C).fill(false);
  for (let b = 0; b < n; b++) {
    let any = false;
    for (let c = 0; c < C; c++)
      if (s.segments[b * C + c] === j) {
        any = true;
        inCols[c] = true;
      }
    if (any) rows.push(b);
  }
  /** @type {number[]} */
  const cols = [];
  for (let c = 0; c < C; c++) if (inCols[c]) cols.push(c);
  let sum = 0;
  /** @type {MatrixCell[]} */
  const finite = [];
  const cells = rows.map((b) =>
    cols.map((c) => {
      if (s.segments[b * C + c] !== j) return null;
      const value = s.shares[b * C + c];
      const cell = { block: b + 1, c, name: s.names[c], value };
      if (Number.isFinite(value)) {
        sum += value;
        finite.push(cell);
      }
      return cell;
    }),
  );
  const ranked = finite.slice().sort((a, b) => Math.abs(b.value) - Math.abs(a.value) || a.block - b.block || a.c - b.c);
  return { j, blocks: rows.map((b) => b + 1), cols, colNames: cols.map((c) => s.names[c]), cells, sum, ranked };
}

/** "L12.h3": a (block, component) in words. @param {MatrixCell} cell */
export const cellName = (cell) => `L${cell.block}.${shortName(cell.name)}`;
