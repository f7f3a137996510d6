/**
 * The student view's teacher notes: the notes of the lesson's position (and the block notes
 * pinned to no position) as callouts, and a small editor that adds a note to the position,
 * the walk's block, or both (the `notes` trait; js/model/notes.js). A block note is highlighted
 * while the walk is at its block, and its "go to block" button moves the walk there (the
 * view's click handler reads `data-block`, a boundary index). Note text is untrusted: text
 * nodes only, capped at MAX_NOTE_CHARS.
 * @module views/lesson/notes
 */
import { h, clear, listen } from "../../lib/dom.js";
import { formatToken } from "../../lib/tokens.js";
import { readNotes, notesAt, newNote, withNote, withoutNote, pinText, MAX_NOTE_CHARS, MAX_NOTES } from "../../model/notes.js";

/**
 * The boundary index the walk goes to for a note's block: the boundary at that depth, else
 * the first one past it (-1: none).
 * @param {number[]} boundaries @param {number} block
 */
export function boundaryOfBlock(boundaries, block) {
  const exact = boundaries.indexOf(block);
  return exact >= 0 ? exact : boundaries.findIndex((d) => d >= block);
}

/**
 * @param {import("../../model/result.js").Result} r @param {number} i
 */
const tokenLabel = (r, i) => `[${i}] ${formatToken(r.tokens[i] ?? "", { maxLen: 20 })}`;

/**
 * A note's callout.
 * @param {import("../../model/notes.js").Note} n @param {import("../../model/result.js").Result} r
 */
function callout(n, r) {
  const L = n.block === null ? -1 : boundaryOfBlock(r.boundaries, n.block);
  return h(
    "aside",
    { class: "iglens-note", role: "note", "data-note-index": n.index, "data-note-boundary": L >= 0 ? L : null },
    h("span", { class: "iglens-note-pin", text: `\u270e ${pinText(n, (i) => tokenLabel(r, i))}` }),
    h("span", { class: "iglens-note-text", text: n.text }),
    L >= 0 ? h("button", { type: "button", class: "iglens-note-go", "data-block": L, text: "go to block" }) : null,
    h("button", {
      type: "button",
      class: "iglens-note-remove",
      "data-action": "note-remove",
      "data-note-index": n.index,
      "aria-label": "remove this note",
      title: "remove this note",
      text: "\u00d7",
    }),
  );
}

/** The editor's elements. */
function editor() {
  const text = h("textarea", { name: "note-text", rows: 2, maxlength: MAX_NOTE_CHARS, placeholder: "a note for the class", "aria-label": "note text" });
  const pin = h(
    "select",
    { name: "note-pin", "aria-label": "pin the note to" },
    h("option", { value: "position", text: "this token" }),
    h("option", { value: "block", text: "this block" }),
    h("option", { value: "both", text: "this token, at this block" }),
  );
  const add = h("button", { type: "button", class: "iglens-note-add", "data-action": "note-add", text: "add note" });
  const status = h("span", { class: "iglens-muted iglens-note-status", role: "status" });
  const el = h(
    "details",
    { class: "iglens-note-editor" },
    h("summary", { text: "\u270e add a note" }),
    h("div", { class: "iglens-note-form" }, text, pin, add, status),
  );
  return { el, text, pin, add, status };
}

/**
 * The notes of a lesson: `callouts` (above the body) and `editor` (below the walk).
 * @param {import("../context.js").Context} ctx @param {import("../../model/lesson.js").Lesson} lesson
 * @param {() => number} cursor the walk's boundary now
 */
export function lessonNotes(ctx, lesson, cursor) {
  const callouts = h("div", { class: "iglens-lesson-notes", "data-lesson-notes": lesson.position });
  const ed = editor();

  function update() {
    clear(callouts);
    const r = ctx.result;
    if (!r) return;
    const shown = notesAt(readNotes(ctx.model.get("notes"), r.T, r.nBlocks), lesson.position);
    for (const n of shown) callouts.appendChild(callout(n, r));
    callouts.hidden = !shown.length;
    setCursor(cursor());
  }

  /** Highlight the block notes at boundary L. @param {number} L */
  function setCursor(L) {
    for (const c of callouts.querySelectorAll("[data-note-index]")) {
      if (c.tagName !== "ASIDE") continue;
      c.classList.toggle("iglens-note-now", c.getAttribute("data-note-boundary") === String(L));
    }
  }

  function add() {
    const r = ctx.result;
    if (!r) return;
    const depth = Math.ceil(r.boundaries[cursor()] ?? r.nBlocks);
    const where = ed.pin.value;
    const note = newNote(ed.text.value, {
      position: where !== "block" && lesson.position >= 0 ? lesson.position : null,
      block: where !== "position" ? depth : null,
    });
    if (!note) {
      ed.status.textContent = "write a note first";
      return;
    }
    const list = withNote(ctx.model.get("notes"), note);
    if (!list) {
      ed.status.textContent = `the widget holds ${MAX_NOTES} notes: remove one first`;
      return;
    }
    ed.text.value = "";
    ed.status.textContent = "";
    ctx.setTrait("notes", list);
  }

  const offs = [
    listen(ed.add, "click", add),
    listen(callouts, "click", (e) => {
      const b = e.target instanceof Element ? e.target.closest("[data-action=note-remove]") : null;
      if (b) ctx.setTrait("notes", withoutNote(ctx.model.get("notes"), Number(b.getAttribute("data-note-index"))));
    }),
  ];
  update();
  return { callouts, editor: ed.el, update, setCursor, destroy: () => offs.forEach((off) => off()) };
}
