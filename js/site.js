/**
 * The kernel-free site's entry (issue 38): onnxruntime-web with its WebAssembly files served
 * from the site's own `ort/` folder (nothing is fetched off the serving origin), then the page.
 * @module site
 */
import "./styles/widget.css";
import "./styles/views.css";
import "./styles/lesson.css";
import "./styles/prompt.css";
import * as ort from "onnxruntime-web";
import { startSite } from "./site/page.js";

const here = new URL(".", import.meta.url).href;
ort.env.wasm.wasmPaths = here + "ort/";
const root = document.getElementById("iglens-site") ?? document.body;
startSite(root, { ort, base: new URL("../", here).href });
