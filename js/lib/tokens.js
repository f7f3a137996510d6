/**
 * Readable token text: a character-for-character mirror of
 * `iglens_viz/views/token_format.py` (same marks, same rules, same truncation).
 *
 * Tokens are untrusted strings. The label this module returns is still untrusted text:
 * insert it with `textContent` / `createTextNode` only.
 * @module tokens
 */

export const SPACE = "\u2423"; // ␣ OPEN BOX
export const DOT_SPACE = "\u00b7"; // · MIDDLE DOT
export const NEWLINE = "\u21b5"; // ↵
export const TAB = "\u21e5"; // ⇥
export const NBSP = "\u237d"; // ⍽ SHOULDERED OPEN BOX: a no-break space
export const EMPTY = "\u2205"; // ∅
export const ELLIPSIS = "\u2026"; // …
export const DEFAULT_MAX_LEN = 16;

// Python's _ESCAPED_CATEGORIES = {Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs}.
const ESCAPED = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

/** Length in code points (Python's `len` of a str). @param {string} s */
export function cpLength(s) {
  let n = 0;
  for (const _ of s) n++; // eslint-disable-line no-unused-vars
  return n;
}

/**
 * The escape of one character: `\xNN` below 256, `\uNNNN` or `\UNNNNNNNN` above.
 * @param {string} ch one code point
 */
export function escapeChar(ch) {
  const code = /** @type {number} */ (ch.codePointAt(0));
  if (code < 0x100) return "\\x" + code.toString(16).padStart(2, "0");
  if (code < 0x10000) return "\\u" + code.toString(16).padStart(4, "0");
  return "\\U" + code.toString(16).padStart(8, "0");
}

/**
 * @typedef {object} MarkOptions
 * @property {string} [space] mark for a leading/trailing space (default "␣")
 * @property {string} [newline] mark for "\n" (default "↵")
 * @property {string} [tab] mark for "\t" (default "⇥")
 * @property {boolean} [allSpaces] mark every space, not only those at the ends
 */

/**
 * The display units of `text`: one string per input code point.
 * @param {string} text
 * @param {MarkOptions} [opts]
 * @returns {string[]}
 */
export function tokenUnits(text, opts = {}) {
  const space = opts.space ?? SPACE;
  const newline = opts.newline ?? NEWLINE;
  const tab = opts.tab ?? TAB;
  const allSpaces = opts.allSpaces ?? false;
  const chars = Array.from(text);
  const n = chars.length;
  let lead = 0;
  while (lead < n && chars[lead] === " ") lead++;
  let trail = 0;
  while (trail < n && chars[n - 1 - trail] === " ") trail++;
  /** @type {string[]} */
  const units = [];
  for (let pos = 0; pos < n; pos++) {
    const ch = chars[pos];
    if (ch === " ") {
      const edge = pos < lead || pos >= n - trail;
      units.push(edge || allSpaces ? space : " ");
    } else if (ch === "\n") units.push(newline);
    else if (ch === "\t") units.push(tab);
    else if (ch === "\r") units.push("\\r");
    else if (ch === "\u00a0") units.push(NBSP);
    else if (ESCAPED.test(ch)) units.push(escapeChar(ch));
    else units.push(ch);
  }
  return units;
}

/**
 * @typedef {MarkOptions & {maxLen?: number|null, empty?: string, ellipsis?: string}} FormatOptions
 */

/**
 * A short, unambiguous label for a token string (mirror of Python `format_token`).
 * @param {unknown} text the token's decoded text (null/undefined → "")
 * @param {FormatOptions} [opts] `maxLen` (default 16, null = no limit, ellipsis included)
 * @returns {string}
 */
export function formatToken(text, opts = {}) {
  const maxLen = opts.maxLen === undefined ? DEFAULT_MAX_LEN : opts.maxLen;
  const empty = opts.empty ?? EMPTY;
  const ellipsis = opts.ellipsis ?? ELLIPSIS;
  let s;
  if (text === null || text === undefined) s = "";
  else s = typeof text === "string" ? text : String(text);
  if (maxLen !== null && maxLen < 1) throw new RangeError(`maxLen must be >= 1 or null, got ${maxLen}`);
  if (s === "") return empty;
  const units = tokenUnits(s, opts);
  const label = units.join("");
  if (maxLen === null || cpLength(label) <= maxLen) return label;
  const room = maxLen - cpLength(ellipsis);
  let out = "";
  let used = 0;
  for (const unit of units) {
    const len = cpLength(unit);
    if (used + len > room) break;
    out += unit;
    used += len;
  }
  return out + ellipsis;
}

/**
 * A faithful, quoted rendering of the raw token (for tooltips and `title` attributes):
 * JSON-style quoting shows leading spaces and escapes control characters.
 * @param {unknown} text
 */
export function quoteToken(text) {
  const s = text === null || text === undefined ? "" : String(text);
  return JSON.stringify(s).replace(/[\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

/**
 * `formatToken` split into pieces, each flagged when it is a mark (a visible-whitespace
 * mark, an escape, the empty mark or the ellipsis), so a view can dim the marks.
 * `parts.map(p => p.text).join("")` equals `formatToken(text, opts)`.
 * @param {unknown} text
 * @param {FormatOptions} [opts]
 * @returns {{text: string, mark: boolean}[]}
 */
export function formatTokenParts(text, opts = {}) {
  const maxLen = opts.maxLen === undefined ? DEFAULT_MAX_LEN : opts.maxLen;
  const ellipsis = opts.ellipsis ?? ELLIPSIS;
  const s = text === null || text === undefined ? "" : String(text);
  if (s === "") return [{ text: opts.empty ?? EMPTY, mark: true }];
  const chars = Array.from(s);
  const units = tokenUnits(s, opts);
  const total = units.reduce((n, u) => n + cpLength(u), 0);
  let keep = units.length;
  let cut = false;
  if (maxLen !== null && total > maxLen) {
    const room = maxLen - cpLength(ellipsis);
    let used = 0;
    keep = 0;
    for (const unit of units) {
      const len = cpLength(unit);
      if (used + len > room) break;
      used += len;
      keep++;
    }
    cut = true;
  }
  /** @type {{text: string, mark: boolean}[]} */
  const parts = [];
  for (let q = 0; q < keep; q++) {
    const mark = units[q] !== chars[q];
    const last = parts[parts.length - 1];
    if (last && last.mark === mark) last.text += units[q];
    else parts.push({ text: units[q], mark });
  }
  if (cut) parts.push({ text: ellipsis, mark: true });
  return parts;
}
