import { afterEach, describe, expect, it, vi } from "vitest";
import { createHash } from "node:crypto";
import { fetchModel } from "./engine.js";
import { DamagedFile, canVerify, fetchCheckedJson, verifyFile } from "./verify.js";

const sha = (/** @type {Uint8Array} */ b) => createHash("sha256").update(b).digest("hex");

/** A site of three files: the body, its part, and a tokenizer file; the manifest their hashes. */
function site() {
  const files = {
    "graphs/body.onnx": new Uint8Array([1, 2, 3]),
    "graphs/weights-00.bin": new Uint8Array(1000).map((_, i) => i % 251),
    "tokenizer/chat.json": new TextEncoder().encode('{"eos_token": "<e>"}'),
  };
  const manifest = /** @type {any} */ ({
    graphs: { body: { file: "graphs/body.onnx", external_data: ["weights-00.bin"] }, readout: { file: "graphs/body.onnx", external_data: [] } },
    files: Object.fromEntries(Object.entries(files).map(([k, v]) => [k, { bytes: v.byteLength, sha256: sha(v) }])),
  });
  return { files, manifest };
}

/** A fake fetch serving `files` under "site/" and recording the names asked for. */
function serve(/** @type {Record<string, Uint8Array>} */ files, /** @type {string[]} */ asked = []) {
  return vi.fn(async (/** @type {string} */ url) => {
    const name = url.replace(/^site\//, "");
    asked.push(name);
    const body = files[name];
    return body ? new Response(body.slice()) : new Response("", { status: 404 });
  });
}

afterEach(() => vi.unstubAllGlobals());

describe("the page checks every fetched part against the manifest's sha256", () => {
  it("passes the site's own bytes and reports the hashing's time", async () => {
    const { files, manifest } = site();
    vi.stubGlobal("fetch", serve(files));
    const timing = {};
    const bytes = await fetchModel("site/", manifest, () => {}, undefined, timing);
    expect([...bytes.keys()]).toEqual(["graphs/body.onnx", "graphs/weights-00.bin"]);
    expect(bytes.get("graphs/weights-00.bin")).toEqual(files["graphs/weights-00.bin"]);
    expect(timing).toHaveProperty("verify_ms");
    expect(await fetchCheckedJson("site/", "tokenizer/chat.json", manifest)).toEqual({ eos_token: "<e>" });
  });

  it("stops at a part with one byte flipped, naming the file, before fetching the rest", async () => {
    const { files, manifest } = site();
    const damaged = { ...files, "graphs/body.onnx": new Uint8Array([1, 2, 4]) };
    /** @type {string[]} */
    const asked = [];
    vi.stubGlobal("fetch", serve(damaged, asked));
    const error = await fetchModel("site/", manifest, () => {}).catch((e) => e);
    expect(error).toBeInstanceOf(DamagedFile);
    expect(error.file).toBe("graphs/body.onnx");
    expect(String(error)).toBe("DamagedFile: graphs/body.onnx is damaged (its sha256 is not the manifest's): copy or export the site again");
    expect(asked).toEqual(["graphs/body.onnx"]);
  });

  it("refuses a truncated file by its size and a file the manifest does not list", async () => {
    const { manifest } = site();
    await expect(verifyFile("graphs/body.onnx", new Uint8Array([1, 2]), manifest)).rejects.toThrow(/body.onnx is damaged \(2 bytes, the manifest says 3\)/);
    await expect(verifyFile("graphs/other.bin", new Uint8Array([1]), manifest)).rejects.toThrow(/other.bin is damaged \(not in the manifest\)/);
  });

  it("without crypto.subtle (plain http off localhost) checks sizes only", async () => {
    const { manifest } = site();
    expect(canVerify(null)).toBe(false);
    expect(canVerify(globalThis.crypto.subtle)).toBe(true);
    await expect(verifyFile("graphs/body.onnx", new Uint8Array([9, 9, 9]), manifest, null)).resolves.toBeUndefined();
  });
});
