/**
 * Teacher notes (the `notes` trait): `{text, position?, block?}` pinned to a position, a
 * block (a depth 0 … n) or a block at a position. Python checks what it writes
 * (iglens_viz/protocol/notes.py); the page reads the trait defensively (entries that do not
 * fit this result are skipped) and caps what its editor writes the same way. The text is
 * untrusted: the views insert it as text only.
 * @module notes
 */

import { MAX_NOTE_CHARS, MAX_NOTES } from "./protocol.js";

/** The longest note text and the most notes a widget keeps (iglens_viz.protocol.notes). */
export { MAX_NOTE_CHARS, MAX_NOTES };

/**
 * @typedef {object} Note
 * @property {number} index its index in the `notes` trait (what a removal names)
 * @property {string} text
 * @property {number|null} position
 * @property {number|null} block
 */

/** @param {unknown} v @param {number} top */
const inRange = (v, top) => typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= top;

/**
 * The trait's notes that fit a result of `T` positions and `nBlocks` blocks (others are
 * skipped: a leftover of another result, or a bad write).
 * @param {unknown} raw @param {number} T @param {number} nBlocks
 * @returns {Note[]}
 */
export function readNotes(raw, T, nBlocks) {
  if (!Array.isArray(raw)) return [];
  /** @type {Note[]} */
  const out = [];
  raw.slice(0, MAX_NOTES).forEach((n, index) => {
    if (!n || typeof n !== "object" || typeof n.text !== "string" || !n.text.trim()) return;
    const position = n.position ?? null;
    const block = n.block ?? null;
    if (position === null && block === null) return;
    if (position !== null && !inRange(position, T - 1)) return;
    if (block !== null && !inRange(block, nBlocks)) return;
    out.push({ index, text: n.text.slice(0, MAX_NOTE_CHARS), position, block });
  });
  return out;
}

/**
 * The notes a lesson about `position` shows: those pinned to it, and the block notes pinned
 * to no position.
 * @param {Note[]} notes @param {number} position
 */
export function notesAt(notes, position) {
  return notes.filter((n) => n.position === position || (n.position === null && n.block !== null));
}

/**
 * A note as the trait stores it (the editor's output), or null when the text is blank.
 * @param {string} text @param {{position?: number|null, block?: number|null}} pin
 * @returns {{text: string, position?: number, block?: number}|null}
 */
export function newNote(text, pin) {
  const t = String(text).slice(0, MAX_NOTE_CHARS);
  if (!t.trim()) return null;
  /** @type {{text: string, position?: number, block?: number}} */
  const note = { text: t };
  if (pin.position == null && pin.block == null) return null;
  // the trait's key order, as Python writes it: position, block, text
  return { ...(pin.position != null ? { position: pin.position } : {}), ...(pin.block != null ? { block: pin.block } : {}), ...note };
}

/**
 * The trait with a note added (at most MAX_NOTES: null when full).
 * @param {unknown} raw @param {{text: string, position?: number, block?: number}} note
 */
export function withNote(raw, note) {
  const list = Array.isArray(raw) ? raw.slice() : [];
  if (list.length >= MAX_NOTES) return null;
  list.push(note);
  return list;
}

/**
 * The trait without note `index`.
 * @param {unknown} raw @param {number} index
 */
export function withoutNote(raw, index) {
  const list = Array.isArray(raw) ? raw.slice() : [];
  list.splice(index, 1);
  return list;
}

/**
 * Where a note is pinned, in words: "[41] ␣is", "block 25", "[41] ␣is, block 25".
 * @param {Note} n @param {(i: number) => string} tokenLabel
 */
export function pinText(n, tokenLabel) {
  const parts = [];
  if (n.position !== null) parts.push(tokenLabel(n.position));
  if (n.block !== null) parts.push(n.block === 0 ? "the embeddings" : `block ${n.block}`);
  return parts.join(", ");
}
