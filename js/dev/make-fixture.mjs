// Write js/dev/fixture.json: a synthetic widget state (traits) in the static-export form
// (ndarray buffers as base64 strings), for the dev harness. `node js/dev/make-fixture.mjs`
import { writeFileSync } from "node:fs";
import { makeState } from "../testing/fixture.js";

const tokens = [
  "<|im_start|>",
  "user",
  "\n",
  "What",
  " is",
  " the",
  " capital",
  " of",
  " Vietnam",
  "?",
  "<|im_end|>",
  "\n",
  "<|im_start|>",
  "assistant",
  "\n",
  "The",
  " capital",
  " of",
  " Vietnam",
  " is",
  " Hanoi",
  ".",
  "<|im_end|>",
];
const state = makeState({ T: tokens.length, tokens, nBlocks: 30, steps: 4, promptLength: 15, base64: true, seed: 11, selected: 19 });
state.result.model_name = "synthetic SmolLM2-like (30 blocks)";
writeFileSync(new URL("./fixture.json", import.meta.url), JSON.stringify(state) + "\n");
console.log(`wrote js/dev/fixture.json (${tokens.length} tokens)`);
