// The command channel (js/model/commands.js): ids, the answers it keeps and drops, the kernel state.
import { describe, it, expect, vi, afterEach } from "vitest";
import { createCommands, readAnswer, readRunning, HELLO_TIMEOUT_MS, MAX_ID_LENGTH } from "./commands.js";
import { createModel } from "../standalone.js";
import { kernelModel } from "../testing/kernel.js";

afterEach(() => {
  vi.useRealTimers();
});

/** A fake kernel that never answers by itself, and the events a channel on it reports. */
function setup(o = {}) {
  const model = kernelModel({ result: { id: "r1" } }, { hello: "silent" });
  const commands = createCommands(model, o);
  /** @type {import("./commands.js").CommandEvent[]} */
  const events = [];
  commands.listen((e) => events.push(e));
  const answers = () => events.filter((e) => e.type === "answer").map((e) => /** @type {any} */ (e).answer);
  return { model, commands, events, answers };
}

describe("sending", () => {
  it("every command carries kind and a unique id (a per-view prefix and a counter, at most 64 characters)", () => {
    const { model, commands } = setup();
    const ids = [
      commands.send("path", { result_id: "r1", position: 2, steps: 8 }),
      commands.send("path", { result_id: "r1", position: 3, steps: 8 }),
      commands.send("hello"),
    ];
    expect(new Set(ids).size).toBe(3);
    for (const id of ids) expect(typeof id === "string" && id.length > 0 && id.length <= MAX_ID_LENGTH).toBe(true);
    expect(model.sent[0]).toEqual({ kind: "path", id: ids[0], result_id: "r1", position: 2, steps: 8 });
    expect(commands.latest("path")?.id).toBe(ids[1]);
    expect(commands.pending("path")?.fields).toEqual({ result_id: "r1", position: 3, steps: 8 });
    // another view of the same model draws another prefix
    const other = createCommands(model);
    const a = /** @type {string} */ (ids[0]).split("-")[0];
    const b = /** @type {string} */ (other.send("hello")).split("-")[0];
    expect(a).not.toBe(b);
    // a long prefix is cut so that ids stay within Python's limit
    expect(/** @type {string} */ (createCommands(model, { prefix: "x".repeat(100) }).send("hello")).length).toBeLessThanOrEqual(MAX_ID_LENGTH);
  });

  it("a field named kind or id cannot overwrite the command's own", () => {
    const { model, commands } = setup();
    const id = commands.send("ablation", { kind: "recompute", id: "forged", result_id: "r1", position: 1 });
    expect(model.sent[0]).toMatchObject({ kind: "ablation", id });
  });

  it("the exported page's model cannot send: no id, nothing recorded", () => {
    const commands = createCommands(createModel({}));
    expect(commands.send("recompute", { result_id: "", controls: {} })).toBeNull();
    expect(commands.latest("recompute")).toBeNull();
  });

  it("a send that throws (a closed comm) leaves the previous request the latest", () => {
    const { model, commands } = setup();
    const first = commands.send("path", { position: 1 });
    model.send = () => {
      throw new Error("comm closed");
    };
    expect(commands.send("path", { position: 2 })).toBeNull();
    expect(commands.latest("path")?.id).toBe(first);
  });
});

describe("answers", () => {
  it("an answer to this view's latest request of its kind is kept, once", () => {
    const { model, commands, answers } = setup();
    commands.send("ablation", { result_id: "r1", position: 2 });
    const msg = model.sent[0];
    model.answer(msg, { error: { type: "InvalidRequestError", message: "position 2 has no target" } });
    expect(answers()).toEqual([
      { requestId: msg.id, command: "ablation", ok: false, resultId: "r1", error: { type: "InvalidRequestError", message: "position 2 has no target" } },
    ]);
    expect(commands.latest("ablation")?.answer?.error?.message).toBe("position 2 has no target");
    expect(commands.pending("ablation")).toBeNull();
    model.answer(msg); // a second envelope for the same id
    expect(answers().length).toBe(1);
  });

  it("drops answers it did not send, answers superseded by a newer request of the kind, and malformed envelopes", () => {
    const { model, commands, answers } = setup();
    commands.send("path", { position: 1 });
    commands.send("path", { position: 2 }); // supersedes the first
    const [first, second] = model.sent;
    model.answer(first);
    model.answer({ kind: "path", id: "someone-else-1" });
    model.emit({ kind: "answer", request_id: second.id, command: "path" }); // no ok
    model.emit({ kind: "answer", request_id: second.id, command: "path", ok: true, result_id: 3, error: null });
    model.emit({ kind: "answer", request_id: second.id, command: "path", ok: false, error: "not an object" });
    model.emit({ kind: "progress", request_id: second.id });
    model.emit("answer");
    expect(answers()).toEqual([]);
    expect(commands.pending("path")?.id).toBe(second.id);
    model.answer(second);
    expect(answers().map((a) => a.requestId)).toEqual([second.id]);
  });

  it("requests of different kinds do not supersede each other", () => {
    const { model, commands, answers } = setup();
    commands.send("recompute", { result_id: "r1", controls: {} });
    commands.send("cancel", { request_id: model.sent[0].id });
    model.answer(model.sent[1]);
    model.answer(model.sent[0], { error: { type: "RecomputeCancelled", message: "cancelled" } });
    expect(answers().map((a) => [a.command, a.ok])).toEqual([
      ["cancel", true],
      ["recompute", false],
    ]);
  });

  it("reads the envelope's fields; a failed answer without an error still says it failed", () => {
    expect(readAnswer({ kind: "answer", request_id: "a-1", command: "hello", ok: true, result_id: "r2", error: null })).toEqual({
      requestId: "a-1",
      command: "hello",
      ok: true,
      resultId: "r2",
      error: null,
    });
    expect(readAnswer({ kind: "answer", request_id: "a-1", command: "path", ok: false })?.error).toEqual({ type: "Error", message: "the command failed" });
    expect(readAnswer({ kind: "answer", request_id: "a-1", command: "path", ok: false, error: { message: 3 } })?.error?.message).toBe("the command failed");
    expect(readAnswer(null)).toBeNull();
    expect(readAnswer({ kind: "answer", request_id: 1, command: "path", ok: true })).toBeNull();
  });
});

describe("the kernel state", () => {
  it("hello answered: live", () => {
    const { model, commands, events } = setup();
    expect(commands.kernel()).toBe("unknown");
    commands.start();
    expect(model.sent).toEqual([{ kind: "hello", id: expect.any(String) }]);
    model.answer(model.sent[0]);
    expect(commands.kernel()).toBe("live");
    expect(events.filter((e) => e.type === "kernel")).toEqual([{ type: "kernel", state: "live" }]);
  });

  it("no answer within the timeout: none; a late answer still makes it live", () => {
    vi.useFakeTimers();
    const { model, commands, events } = setup();
    commands.start();
    vi.advanceTimersByTime(HELLO_TIMEOUT_MS - 1);
    expect(commands.kernel()).toBe("unknown");
    vi.advanceTimersByTime(1);
    expect(commands.kernel()).toBe("none");
    model.answer(model.sent[0]);
    expect(commands.kernel()).toBe("live");
    expect(events.filter((e) => e.type === "kernel").map((e) => /** @type {any} */ (e).state)).toEqual(["none", "live"]);
  });

  it("the timeout can be set; an answer before it cancels it", () => {
    vi.useFakeTimers();
    const { model, commands } = setup({ timeoutMs: 100 });
    commands.start();
    model.answer(model.sent[0]);
    vi.advanceTimersByTime(1000);
    expect(commands.kernel()).toBe("live");
    const late = setup({ timeoutMs: 100 });
    late.commands.start();
    vi.advanceTimersByTime(100);
    expect(late.commands.kernel()).toBe("none");
  });

  it("another view's answer shows a kernel is listening, but is not delivered here", () => {
    const { model, commands, answers } = setup();
    commands.start();
    const other = createCommands(model);
    other.send("path", { position: 1 });
    model.answer(model.sent[1]);
    expect(commands.kernel()).toBe("live");
    expect(answers()).toEqual([]);
  });

  it("the exported page's model (standalone) and a model without send: none at once, nothing sent", () => {
    vi.useFakeTimers();
    const standalone = createCommands(createModel({}));
    standalone.start();
    expect(standalone.kernel()).toBe("none");
    const base = createModel({});
    const bare = createCommands({ ...base, standalone: false });
    bare.start();
    expect(bare.kernel()).toBe("none");
  });

  it("dispose stops listening and waiting", () => {
    vi.useFakeTimers();
    const { model, commands, events } = setup();
    commands.start();
    commands.dispose();
    expect(model.listeners()).toBe(0);
    vi.advanceTimersByTime(HELLO_TIMEOUT_MS);
    expect(commands.kernel()).toBe("unknown");
    expect(commands.send("hello")).toBeNull();
    expect(events.map((e) => e.type)).toEqual(["sent"]); // the hello, and nothing after dispose
  });
});

describe("trait values with identity", () => {
  it("readRunning: {} is idle; {id, command} names the running command; anything else is idle", () => {
    expect(readRunning({})).toBeNull();
    expect(readRunning({ id: "v-3", command: "recompute" })).toEqual({ id: "v-3", command: "recompute" });
    expect(readRunning({ id: "", command: "recompute" })).toBeNull();
    expect(readRunning({ id: 3, command: "recompute" })).toBeNull();
    expect(readRunning(null)).toBeNull();
  });
});
