// Bundle js/widget.js (+ its CSS) into iglens_viz/static/widget.{js,css}: one ESM file with
// every dependency inside, no CDN at run time. js/site.js (the kernel-free site, issue 38) into
// static/site.{js,css}, with onnxruntime-web's WebAssembly files copied to static/ort/ (the
// site serves them itself). `node js/build.mjs` (minified) or
// `node js/build.mjs --watch` (inline source maps, rebuilds on change).
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const watch = process.argv.includes("--watch");

/** @type {import("esbuild").BuildOptions} */
const options = {
  entryPoints: { widget: path.join(here, "widget.js"), site: path.join(here, "site.js") },
  outdir: path.join(root, "iglens_viz", "static"),
  bundle: true,
  format: "esm",
  target: ["es2020", "chrome90", "firefox90", "safari15"],
  platform: "browser",
  minify: !watch,
  sourcemap: watch ? "inline" : false,
  legalComments: "none",
  define: { "define.amd": "false" },
  logLevel: "info",
};

// The files the default onnxruntime-web bundle loads (WebAssembly + WebGPU through JSEP).
const ortFiles = ["ort-wasm-simd-threaded.jsep.wasm", "ort-wasm-simd-threaded.jsep.mjs"];
const ortDist = path.join(root, "node_modules", "onnxruntime-web", "dist");
const ortOut = path.join(root, "iglens_viz", "static", "ort");
fs.mkdirSync(ortOut, { recursive: true });
for (const name of ortFiles) fs.copyFileSync(path.join(ortDist, name), path.join(ortOut, name));

if (watch) {
  const context = await esbuild.context(options);
  await context.watch();
  console.log("watching js/ for changes (Ctrl-C to stop)");
} else {
  await esbuild.build(options);
}
