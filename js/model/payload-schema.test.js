// @vitest-environment node
// The result payload checked against Python's schema (js/model/protocol.js's PAYLOAD_SCHEMAS): the
// payload Python made (js/testing/payload.json) fits it, and a mis-shaped, mis-typed or
// inconsistent array is refused by decodeResult with its name.
import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkPayload, shapeOf } from "./payload-schema.js";
import { decodeResult } from "./result.js";
import { PAYLOAD_SCHEMAS } from "./protocol.js";

const sent = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "testing", "payload.json"), "utf-8"));
/** The result with its base64 buffers, as the codec reads them. */
const result = () => structuredClone(sent.state.result);

describe("checkPayload", () => {
  it("binds the payload's sizes from Python's shapes", () => {
    const raw = result();
    expect(checkPayload(raw)).toEqual({ T: raw.tokens.length, k: raw.segment_labels.length, K: 5 });
    expect(decodeResult(raw)?.T).toBe(raw.tokens.length);
  });

  it("checks the nested tables against the result's k", () => {
    const raw = result();
    const k = raw.segment_labels.length;
    expect(checkPayload(raw.answer, "ledger", "result.answer", { k })).toEqual({ k, A: raw.answer.tokens.length });
    const bad = { ...raw.answer, lens_probs: { ...raw.answer.lens_probs, shape: [k + 2] } };
    expect(() => checkPayload(bad, "ledger", "result.answer", { k })).toThrow("result.answer.lens_probs: k+1 = 4, but k = 2 elsewhere");
  });

  it("refuses a wrong rank, a wrong dtype kind and an inconsistent size, naming the field", () => {
    const raw = result();
    const T = raw.tokens.length;
    expect(() => decodeResult({ ...raw, top_probs: { ...raw.top_probs, shape: [T, 3] } })).toThrow("result.top_probs must have shape (T, k+1, K), got [7,3]");
    expect(() => decodeResult({ ...raw, target_ids: { ...raw.target_ids, dtype: "float32" } })).toThrow(TypeError);
    expect(() => decodeResult({ ...raw, delta_p: { ...raw.delta_p, shape: [T + 1] } })).toThrow(`result.delta_p: T = ${T + 1}, but T = ${T} elsewhere`);
  });

  it("refuses a present field of another kind, naming it", () => {
    const raw = result();
    expect(() => decodeResult({ ...raw, steps: "3" })).toThrow('result.steps must be an int, got "3"');
    expect(() => decodeResult({ ...raw, model_name: 7 })).toThrow("result.model_name must be a str, got 7");
    expect(() => decodeResult({ ...raw, tokens: "w5 w17" })).toThrow("result.tokens must be a list");
    expect(() => decodeResult({ ...raw, request: "x" })).toThrow(TypeError);
  });

  it("leaves absent and null fields to their readers", () => {
    const raw = result();
    delete raw.onset_segment;
    expect(checkPayload({ ...raw, path_probs: null, lens_logprobs: undefined })).toEqual({ T: 7, k: 2, K: 5 });
    expect(PAYLOAD_SCHEMAS.result.find((f) => f.name === "path_probs")?.nullable).toBe(true);
  });

  it("gives a field's shape in numbers, as answers.js reads the ledgers", () => {
    expect(shapeOf("ledger", "token_logprobs", { k: 30, A: 2 })).toEqual([2, 31]);
    expect(shapeOf("ledger", "logprob_split", { k: 30, A: 2 })).toEqual([30, 2]);
    expect(shapeOf("result", "top_ids", { T: 7, k: 2, K: 5 })).toEqual([7, 3, 5]);
    expect(() => shapeOf("ledger", "token_logprobs", { k: 30 })).toThrow("no size given for A");
    expect(() => shapeOf("ledger", "text", { k: 30 })).toThrow(TypeError);
  });
});
