/**
 * The site's tokenizer and chat template: `tokenizer/tokenizer.json` read by
 * `@huggingface/tokenizers`, `tokenizer/chat.json`'s template rendered by `@huggingface/jinja`.
 * @module site/chat
 */
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

/**
 * @typedef {object} Chat
 * @property {(question: string) => {ids: number[], templatePositions: number[]}} encode the templated
 *   prompt's ids, and the positions that are the template's (not the user's text)
 * @property {(id: number) => string} decode one id's text, as Python's `tokenizer.decode([id])`
 * @property {number} eosId
 */

/**
 * @param {any} tokenizerJson tokenizer.json @param {Record<string, any>} chat chat.json
 * @returns {Chat}
 */
export function makeChat(tokenizerJson, chat) {
  const tokenizer = new Tokenizer(tokenizerJson, { clean_up_tokenization_spaces: false });
  const template = new Template(chat.chat_template);
  /** @param {string} content */
  const render = (content) =>
    template.render({
      messages: [{ role: "user", content }],
      add_generation_prompt: true,
      bos_token: chat.bos_token,
      eos_token: chat.eos_token,
    });
  /** @param {string} text */
  const ids = (text) => tokenizer.encode(text, { add_special_tokens: false }).ids.map(Number);
  return {
    encode(question) {
      // the user's positions: those the text adds after the template's prefix
      const marker = "\u0000";
      const full = render(question);
      const prefix = render(marker).split(marker)[0];
      const all = ids(full);
      const before = ids(prefix).length;
      const user = ids(prefix + question).length - before;
      const templatePositions = all.map((_, i) => i).filter((i) => i < before || i >= before + user);
      return { ids: all, templatePositions };
    },
    decode: (id) => tokenizer.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    eosId: Number(chat.eos_token_id),
  };
}
