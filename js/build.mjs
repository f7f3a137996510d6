// Bundle js/widget.js (+ its CSS) into iglens_viz/static/widget.{js,css}: one ESM file with
// every dependency inside, no CDN at run time. `node js/build.mjs` (minified) or
// `node js/build.mjs --watch` (inline source maps, rebuilds on change).
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const watch = process.argv.includes("--watch");

/** @type {import("esbuild").BuildOptions} */
const options = {
  entryPoints: { widget: path.join(here, "widget.js") },
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

if (watch) {
  const context = await esbuild.context(options);
  await context.watch();
  console.log("watching js/ for changes (Ctrl-C to stop)");
} else {
  await esbuild.build(options);
}
