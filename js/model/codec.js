/**
 * ndarray payloads → typed-array views, and base64 → DataView.
 *
 * The protocol (docs/widget-protocol.md) sends every array as
 * `{dtype: "float32"|"int32", shape: [...], buffer}`: in Jupyter `buffer` is a `DataView`
 * (anywidget's binary buffers); in the static export it is a base64 string that the page
 * shim decodes to a `DataView` first. Data are little-endian, C order.
 * @module codec
 */

/** @typedef {Float32Array|Float64Array|Int8Array|Int16Array|Int32Array|Uint8Array|Uint16Array|Uint32Array} TypedArray */

/**
 * A decoded n-dimensional array: flat row-major data plus its shape.
 * @typedef {{data: TypedArray, shape: number[], dtype: string}} NDArray
 */

const CTORS = /** @type {Record<string, any>} */ ({
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  bool: Uint8Array,
});

/** Names numpy may write for the same dtypes. */
const ALIASES = /** @type {Record<string, string>} */ ({
  "<f4": "float32",
  f4: "float32",
  "<f8": "float64",
  f8: "float64",
  "<i4": "int32",
  i4: "int32",
  "<i8": "int64",
  i8: "int64",
  "<u4": "uint32",
  "|u1": "uint8",
  u1: "uint8",
  "|b1": "bool",
  "<i2": "int16",
  "|i1": "int8",
  "<u2": "uint16",
});

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Decode a base64 string (standard or URL-safe alphabet, padding optional) to a DataView.
 * @param {string} b64
 * @returns {DataView}
 */
export function base64ToDataView(b64) {
  const clean = b64.replace(/[\s]/g, "").replace(/-/g, "+").replace(/_/g, "/");
  let bytes;
  if (typeof atob === "function") {
    const bin = atob(clean.padEnd(Math.ceil(clean.length / 4) * 4, "="));
    bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  } else {
    // @ts-ignore: Node without atob
    bytes = new Uint8Array(Buffer.from(clean, "base64"));
  }
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Encode bytes as base64 (the inverse of base64ToDataView; used by tests and the dev harness).
 * @param {ArrayBufferView|ArrayBuffer} view
 */
export function toBase64(view) {
  const bytes = view instanceof ArrayBuffer ? new Uint8Array(view) : new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let bin = "";
  const CH = 0x8000;
  for (let i = 0; i < bytes.length; i += CH) {
    bin += String.fromCharCode.apply(null, /** @type {any} */ (bytes.subarray(i, i + CH)));
  }
  return btoa(bin);
}

/**
 * Bytes of a buffer in any of the forms it may arrive in.
 * @param {unknown} buffer DataView | ArrayBuffer | typed array | base64 string
 * @returns {DataView}
 */
export function toDataView(buffer) {
  if (buffer instanceof DataView) return buffer;
  if (typeof buffer === "string") return base64ToDataView(buffer);
  if (buffer instanceof ArrayBuffer) return new DataView(buffer);
  if (ArrayBuffer.isView(buffer)) return new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  // Some comm layers hand a {buffer: ArrayBuffer} wrapper or a plain object of bytes.
  if (buffer && typeof buffer === "object" && "buffer" in buffer) return toDataView(/** @type {any} */ (buffer).buffer);
  throw new TypeError(`not a binary buffer: ${Object.prototype.toString.call(buffer)}`);
}

/**
 * Whether a value looks like an ndarray payload.
 * @param {unknown} v
 * @returns {v is {dtype: string, shape: number[], buffer: unknown}}
 */
export function isPayload(v) {
  return !!v && typeof v === "object" && !Array.isArray(v) && "dtype" in v && "shape" in v && ("buffer" in v || "data" in v);
}

/**
 * Decode an ndarray payload to a typed-array view (zero-copy when aligned).
 * int64/uint64 arrays become Float64Array (exact up to 2^53); plain JS arrays are accepted
 * too (`{dtype, shape, data: number[]}`), for hand-written fixtures.
 * @param {{dtype: string, shape: number[], buffer?: unknown, data?: unknown}} payload
 * @returns {NDArray}
 */
export function decodeArray(payload) {
  const dtype = ALIASES[payload.dtype] ?? payload.dtype;
  const shape = Array.from(payload.shape ?? [], Number);
  const size = shape.reduce((a, b) => a * b, 1);
  if (Array.isArray(payload.data)) {
    const Ctor = CTORS[dtype] ?? Float64Array;
    const data = Ctor.from(payload.data.map((x) => (x === null ? NaN : x)));
    if (data.length !== size) throw new RangeError(`data has ${data.length} values, shape ${JSON.stringify(shape)} needs ${size}`);
    return { data, shape, dtype };
  }
  const dv = toDataView(payload.buffer ?? payload.data);
  if (dtype === "int64" || dtype === "uint64") {
    if (dv.byteLength !== size * 8) throw new RangeError(`buffer has ${dv.byteLength} bytes, ${dtype}${JSON.stringify(shape)} needs ${size * 8}`);
    const out = new Float64Array(size);
    for (let i = 0; i < size; i++) {
      out[i] = Number(dtype === "int64" ? dv.getBigInt64(i * 8, true) : dv.getBigUint64(i * 8, true));
    }
    return { data: out, shape, dtype: "float64" };
  }
  const Ctor = CTORS[dtype];
  if (!Ctor) throw new TypeError(`unsupported dtype ${JSON.stringify(payload.dtype)}`);
  const bytes = Ctor.BYTES_PER_ELEMENT;
  if (dv.byteLength !== size * bytes) {
    throw new RangeError(`buffer has ${dv.byteLength} bytes, ${dtype}${JSON.stringify(shape)} needs ${size * bytes}`);
  }
  if (!LITTLE_ENDIAN && bytes > 1) {
    const out = new Ctor(size);
    const get = /** @type {any} */ ({
      2: dtype === "int16" ? "getInt16" : "getUint16",
      4: dtype === "float32" ? "getFloat32" : dtype === "int32" ? "getInt32" : "getUint32",
      8: "getFloat64",
    })[bytes];
    for (let i = 0; i < size; i++) out[i] = /** @type {any} */ (dv)[get](i * bytes, true);
    return { data: out, shape, dtype };
  }
  if (dv.byteOffset % bytes === 0) {
    return { data: new Ctor(dv.buffer, dv.byteOffset, size), shape, dtype };
  }
  // Unaligned view: copy the bytes once.
  const copy = dv.buffer.slice(dv.byteOffset, dv.byteOffset + dv.byteLength);
  return { data: new Ctor(copy), shape, dtype };
}

/**
 * Replace every base64 `buffer` string inside ndarray payloads of `value` (deeply) with a
 * DataView, returning a new structure (the static-export shim's job).
 * @param {any} value
 * @returns {any}
 */
export function decodeBase64Buffers(value) {
  if (Array.isArray(value)) return value.map(decodeBase64Buffers);
  if (value && typeof value === "object" && !(value instanceof DataView) && !ArrayBuffer.isView(value) && !(value instanceof ArrayBuffer)) {
    if (isPayload(value) && typeof value.buffer === "string") {
      return { ...value, buffer: base64ToDataView(value.buffer) };
    }
    /** @type {Record<string, any>} */
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = decodeBase64Buffers(v);
    return out;
  }
  return value;
}

/**
 * Encode an ndarray as a payload (tests, dev harness).
 * @param {TypedArray} data
 * @param {number[]} shape
 * @param {{base64?: boolean}} [opts]
 */
export function encodeArray(data, shape, opts = {}) {
  const dtype = Object.keys(CTORS).find((name) => data instanceof CTORS[name] && name !== "bool") ?? "float64";
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  return { dtype, shape: [...shape], buffer: opts.base64 ? toBase64(view) : view };
}
