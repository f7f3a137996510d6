// Vitest: unit tests of the pure modules (node) and DOM tests of the views (jsdom, chosen
// per file with a `@vitest-environment jsdom` comment), each `*.test.js` beside the module it
// tests in js/'s folders. Run from the repo root: `npm test`.
import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  // the run's cache beside the dependencies, not a node_modules/ inside js/ (whose root holds
  // only the entry points, the folders and the configuration)
  cacheDir: fileURLToPath(new URL("../node_modules/.vite", import.meta.url)),
  test: {
    include: ["**/*.test.js"],
    exclude: ["**/node_modules/**", "dev/**"],
    environment: "node",
    pool: "threads",
    maxWorkers: 2,
    // the jsdom view tests take ~1 s alone and several times that on a shared, loaded machine
    testTimeout: 20_000,
    css: false,
  },
});
