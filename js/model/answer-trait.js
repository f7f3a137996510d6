/**
 * The answer traits (`components`, `ablation`, `path`, `gates`, `comparison`: the values
 * Python writes to answer a command, tagged with the result they belong to), read in one place
 * up to their payload: `{}` or absent is no answer, a `result_id` / `request_id` that is not a
 * string is reported, and an answer for another result than the one shown is stale. Each
 * trait's own module then validates its payload against the result. Pure: no DOM.
 * @module model/answer-trait
 */

/** A plain object (not null, not an array). @param {unknown} v @returns {v is Record<string, any>} */
export const isObject = (v) => !!v && typeof v === "object" && !Array.isArray(v);

/**
 * The `result_id` / `request_id` of a trait value: strings ("" when absent), or a message
 * naming the one that is not.
 * @param {Record<string, any>} raw @param {string} where
 * @returns {{resultId: string, requestId: string}|string}
 */
export function traitIds(raw, where) {
  for (const key of ["result_id", "request_id"]) {
    const v = raw[key];
    if (v !== undefined && v !== null && typeof v !== "string") return `${where}.${key} must be a string, got ${JSON.stringify(v)}`;
  }
  return { resultId: raw.result_id ?? "", requestId: raw.request_id ?? "" };
}

/**
 * @typedef {{kind: "empty"} | {kind: "not-object"} | {kind: "error", why: string} | {kind: "stale"} | {kind: "mine", raw: Record<string, any>, ids: {resultId: string, requestId: string}}} AnswerTrait
 *   what an answer trait holds for the shown result: nothing (`{}`, null or absent), a value
 *   that is not an object, malformed ids (`why`), another result's answer, or this result's
 *   (`raw`, still to be validated by the trait's reader, and its `ids`)
 */

/**
 * Read the envelope of an answer trait against the shown result (null: none shown, so any
 * answer is stale).
 * @param {unknown} raw @param {{id: string}|null} result @param {string} where the trait's name in messages
 * @returns {AnswerTrait}
 */
export function answerTrait(raw, result, where) {
  if (raw === null || raw === undefined || (isObject(raw) && Object.keys(raw).length === 0)) return { kind: "empty" };
  if (!isObject(raw)) return { kind: "not-object" };
  const ids = traitIds(raw, where);
  if (typeof ids === "string") return { kind: "error", why: ids };
  if (!result || ids.resultId !== result.id) return { kind: "stale" };
  return { kind: "mine", raw, ids };
}
