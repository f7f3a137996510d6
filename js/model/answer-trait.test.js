// The answer traits' envelope (js/model/answer-trait.js): empty, not an object, bad ids, stale, this result's.
import { describe, it, expect } from "vitest";
import { answerTrait, traitIds } from "./answer-trait.js";

describe("answer traits", () => {
  it('traitIds: strings, absent as "", anything else named', () => {
    expect(traitIds({ result_id: "r2", request_id: "v-1" }, "path")).toEqual({ resultId: "r2", requestId: "v-1" });
    expect(traitIds({}, "path")).toEqual({ resultId: "", requestId: "" });
    expect(traitIds({ result_id: 2 }, "path")).toBe("path.result_id must be a string, got 2");
    expect(traitIds({ request_id: [] }, "the ablation trait")).toMatch(/request_id must be a string/);
  });

  it("answerTrait: one reading of every answer trait's envelope", () => {
    const shown = { id: "r1" };
    for (const empty of [undefined, null, {}]) expect(answerTrait(empty, shown, "path")).toEqual({ kind: "empty" });
    for (const odd of [[], "x", 3, true]) expect(answerTrait(odd, shown, "path")).toEqual({ kind: "not-object" });
    expect(answerTrait({ result_id: 2 }, shown, "gates")).toEqual({ kind: "error", why: "gates.result_id must be a string, got 2" });
    expect(answerTrait({ result_id: "r0", position: 1 }, shown, "path")).toEqual({ kind: "stale" });
    expect(answerTrait({ result_id: "r1", position: 1 }, null, "path")).toEqual({ kind: "stale" });
    const raw = { result_id: "r1", position: 1 };
    expect(answerTrait(raw, shown, "path")).toEqual({ kind: "mine", raw, ids: { resultId: "r1", requestId: "" } });
  });
});
