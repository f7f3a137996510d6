/**
 * A payload checked against Python's schema (`PAYLOAD_SCHEMAS` of the generated
 * js/model/protocol.js, from iglens_viz/protocol/schema.py): every field that is present is of its
 * kind (a string, an int, a list, …), and every ndarray has its rank, a dtype of its kind
 * (float or integer) and one size per shape symbol (T
 * positions, k segments, K top tokens, m steps, …; `k+1` is one more than k). A field that
 * is absent or null is left to its reader (a payload from before the field, an optional
 * part). Pure: no DOM.
 * @module payload-schema
 */
import { isPayload } from "./codec.js";
import { PAYLOAD_SCHEMAS } from "./protocol.js";

const FLOAT_DTYPES = new Set(["float16", "float32", "float64", "<f4", "f4", "<f8", "f8"]);
const INT_DTYPES = new Set([
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "<i4",
  "i4",
  "<i8",
  "i8",
  "<u4",
  "|u1",
  "u1",
  "<i2",
  "|i1",
  "<u2",
]);

/**
 * Bind a shape symbol to an axis length, or check it against its earlier binding.
 * @param {string} symbol "T" or "k+1" @param {number} length @param {Record<string, number>} sizes @param {string} at
 */
function bind(symbol, length, sizes, at) {
  const [, name, plus] = /^([A-Za-z]+)(?:\+(\d+))?$/.exec(symbol) ?? [null, symbol, "0"];
  const value = length - Number(plus ?? 0);
  if (!(name in sizes)) sizes[name] = value;
  else if (sizes[name] !== value) throw new RangeError(`${at}: ${symbol} = ${length}, but ${name} = ${sizes[name]} elsewhere in the payload`);
}

/** Whether a JSON value is of a schema field's kind (arrays are checked apart). */
const IS_KIND = /** @type {Record<string, (v: unknown) => boolean>} */ ({
  str: (v) => typeof v === "string",
  int: (v) => Number.isInteger(v),
  float: (v) => typeof v === "number",
  list: (v) => Array.isArray(v),
  dict: (v) => !!v && typeof v === "object" && !Array.isArray(v),
  object: (v) => !!v && typeof v === "object" && !Array.isArray(v),
});

/**
 * Check the fields of `raw` against the table `table` of PAYLOAD_SCHEMAS: each present,
 * non-null value of its kind, each ndarray of its rank, dtype kind and sizes.
 * @param {Record<string, any>} raw
 * @param {string} [table] "result", "ledger", "comparison" or "components"
 * @param {string} [where] the name errors start with ("result")
 * @param {Record<string, number>} [sizes] sizes already known (a nested table's `k`)
 * @returns {Record<string, number>} the sizes found, e.g. `{T: 7, k: 2, K: 5}`
 * @throws {TypeError|RangeError} naming the first field that does not fit
 */
export function checkPayload(raw, table = "result", where = table, sizes = {}) {
  for (const field of PAYLOAD_SCHEMAS[table] ?? []) {
    const v = raw[field.name];
    if (v === null || v === undefined) continue;
    const at = `${where}.${field.name}`;
    if (field.kind !== "array") {
      if (!IS_KIND[field.kind]?.(v)) throw new TypeError(`${at} must be ${field.kind === "int" ? "an int" : `a ${field.kind}`}, got ${JSON.stringify(v)}`);
      continue;
    }
    const shape = field.shape ?? [];
    if (!isPayload(v)) throw new TypeError(`${at} is not an ndarray payload`);
    const dtypes = field.dtype === "int32" ? INT_DTYPES : FLOAT_DTYPES;
    if (!dtypes.has(v.dtype))
      throw new TypeError(
        `${at} must be ${field.dtype === "int32" ? "an integer" : "a float"} array (Python sends ${field.dtype}), got ${JSON.stringify(v.dtype)}`,
      );
    if (!Array.isArray(v.shape) || v.shape.length !== shape.length) {
      throw new RangeError(`${at} must have shape (${shape.join(", ")}), got ${JSON.stringify(v.shape)}`);
    }
    shape.forEach((symbol, axis) => bind(symbol, Number(v.shape[axis]), sizes, at));
  }
  return sizes;
}

/**
 * A field's shape in numbers: its symbols (`A`, `k+1`, …) given `sizes`.
 * @param {string} table a table of PAYLOAD_SCHEMAS @param {string} name the field
 * @param {Record<string, number>} sizes e.g. `{k: 30, A: 2}`
 * @returns {number[]}
 */
export function shapeOf(table, name, sizes) {
  const field = (PAYLOAD_SCHEMAS[table] ?? []).find((f) => f.name === name);
  if (!field?.shape) throw new TypeError(`${table}.${name} has no shape in PAYLOAD_SCHEMAS`);
  return field.shape.map((symbol) => {
    const [, sym, plus] = /^([A-Za-z]+)(?:\+(\d+))?$/.exec(symbol) ?? [null, symbol, "0"];
    if (!(sym in sizes)) throw new TypeError(`${table}.${name}: no size given for ${sym}`);
    return sizes[sym] + Number(plus ?? 0);
  });
}
