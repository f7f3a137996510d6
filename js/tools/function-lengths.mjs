// The longest functions of js/ (tests, testing/, dev/ and tools/ aside), by source lines,
// parsed with prettier's Babel parser. `node js/tools/function-lengths.mjs [--max N] [--top N]`
// prints the longest and exits 1 when one is longer than N lines (`npm run lint`: N = 150).
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as babel from "prettier/plugins/babel";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const args = process.argv.slice(2);
const opt = (/** @type {string} */ name, /** @type {number} */ fb) => {
  const q = args.indexOf(name);
  return q >= 0 ? Number(args[q + 1]) : fb;
};
const max = opt("--max", Infinity);
const top = opt("--top", 10);

/** @param {string} dir @returns {string[]} */
function sources(dir) {
  /** @type {string[]} */
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const rel = path.relative(root, p);
    if (statSync(p).isDirectory()) {
      if (!["node_modules", "dev", "testing", "tools"].includes(name)) out.push(...sources(p));
    } else if (name.endsWith(".js") && !name.endsWith(".test.js") && rel !== "vitest.config.js") out.push(p);
  }
  return out;
}

const FUNCTIONS = new Set(["FunctionDeclaration", "FunctionExpression", "ArrowFunctionExpression", "ObjectMethod", "ClassMethod"]);
/** @type {{file: string, name: string, lines: number, line: number}[]} */
const found = [];
for (const file of sources(root)) {
  const text = readFileSync(file, "utf8");
  const ast = /** @type {any} */ (babel).parsers.babel.parse(text, {});
  /** @param {any} node @param {string} name */
  const walk = (node, name) => {
    if (!node || typeof node.type !== "string") return;
    if (FUNCTIONS.has(node.type)) {
      const n = node.id?.name || node.key?.name || name || "(anonymous)";
      found.push({ file: path.relative(root, file), name: n, lines: node.loc.end.line - node.loc.start.line + 1, line: node.loc.start.line });
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === "loc" || key === "start" || key === "end" || key === "comments" || key === "leadingComments" || key === "trailingComments") continue;
      const label = node.type === "VariableDeclarator" ? node.id?.name : node.type === "ObjectProperty" ? node.key?.name : "";
      if (Array.isArray(value)) for (const v of value) walk(v, label);
      else if (value && typeof value === "object") walk(value, label);
    }
  };
  walk(ast, "");
}
found.sort((a, b) => b.lines - a.lines);
for (const f of found.slice(0, top)) console.log(`${String(f.lines).padStart(5)}  ${f.file}:${f.line}  ${f.name}`);
const over = found.filter((f) => f.lines > max);
if (over.length) {
  console.error(`${over.length} function(s) longer than ${max} lines`);
  process.exit(1);
}
