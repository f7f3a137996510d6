// Vitest: unit tests of the pure modules (node) and DOM tests of the views (jsdom, chosen
// per file with a `@vitest-environment jsdom` comment). Run from the repo root: `npm test`.
import { defineConfig } from "vitest/config";
import { fileURLToPath } from "node:url";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
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
