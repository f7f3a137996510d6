// Runs an exported site's graphs with onnxruntime-web (WebAssembly, in Node) as the page is
// meant to: each weight part read once and handed to both sessions as externalData.
// Usage: node ort_web_run.mjs SITE_DIR '{"ids": [...], "targets": [...]}'
// Prints JSON: the body's states (flat, with their shape) and the readout's target_prob of
// every state row (row-major over blocks, then positions) for the given targets.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [dir, input] = process.argv.slice(2);
const require = createRequire(pathToFileURL(`${process.cwd()}/package.json`));
const ort = await import(pathToFileURL(require.resolve("onnxruntime-web")).href);
ort.env.wasm.numThreads = 1;
const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, "utf8"));
const bytes = {};
for (const graph of Object.values(manifest.graphs))
  for (const name of graph.external_data)
    bytes[name] ??= new Uint8Array(readFileSync(`${dir}/graphs/${name}`));
const open = (graph) =>
  ort.InferenceSession.create(new Uint8Array(readFileSync(`${dir}/${graph.file}`)), {
    executionProviders: ["wasm"],
    externalData: graph.external_data.map((path) => ({ path, data: bytes[path] })),
  });
const body = await open(manifest.graphs.body);
const readout = await open(manifest.graphs.readout);
const { ids, targets } = JSON.parse(input);
// an empty cache: the past's named axis ("past") is 0
const cache = manifest.graphs.body.input_shapes.past_keys.map((n) =>
  typeof n === "string" ? 0 : n,
);
const empty = new ort.Tensor("float32", new Float32Array(0), cache);
const out = await body.run({
  input_ids: new ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
  past_keys: empty,
  past_values: empty,
});
const [rows, width] = [out.states.dims[0] * out.states.dims[1], out.states.dims[2]];
const read = await readout.run({
  states: new ort.Tensor("float32", out.states.data, [rows, width]),
  target_ids: new ort.Tensor("int64", BigInt64Array.from(targets.map(BigInt)), [rows]),
});
console.log(
  JSON.stringify({
    shape: out.states.dims,
    states: Array.from(out.states.data),
    target_prob: Array.from(read.target_prob.data),
  }),
);
