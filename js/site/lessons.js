/**
 * The site's pre-computed lessons (iglens_viz/export/site_lessons.py): questions attributed in
 * Python at export time, listed in the manifest and shown at first paint, before and without
 * the model's sessions. A picker switches between them; a typed question replaces the lesson.
 * Question text reaches the DOM only through `textContent` (and the views' own escaping).
 * @module site/lessons
 */
import { fetchCheckedJson } from "./verify.js";

/**
 * @typedef {{file: string, question: string, chat: boolean, max_new_tokens: number, positions: number}} LessonEntry
 */

/**
 * The manifest's lessons that name a file it lists (a folder exported without lessons has none).
 * @param {{lessons?: LessonEntry[], files: Record<string, unknown>}} manifest
 * @returns {LessonEntry[]}
 */
export function lessonEntries(manifest) {
  const lessons = Array.isArray(manifest.lessons) ? manifest.lessons : [];
  return lessons.filter((e) => e && typeof e.file === "string" && typeof e.question === "string" && e.file in manifest.files);
}

/**
 * The caption under the picker: which question the shown ledger answers and where it came from.
 * @param {LessonEntry} entry
 */
export function lessonCaption(entry) {
  const how = entry.chat ? "with the chat template" : "as plain text";
  return `Lesson: “${entry.question}” (${entry.positions} positions, asked ${how}; computed in Python when the site was exported). Ask your own question above.`;
}

/**
 * The lesson picker: one option per lesson (its question as text), or null when there are none.
 * `onPick(i)` runs when the reader chooses lesson i. A last option, "Your question", which the
 * reader cannot pick, is what the picker shows (value "") while a typed question is drawn.
 * @param {LessonEntry[]} entries @param {(index: number) => void} onPick
 * @returns {HTMLSelectElement|null}
 */
export function createLessonPicker(entries, onPick) {
  if (entries.length === 0) return null;
  const select = document.createElement("select");
  select.setAttribute("aria-label", "Lesson");
  select.setAttribute("data-testid", "site-lessons");
  entries.forEach((entry, i) => {
    const option = document.createElement("option");
    option.value = String(i);
    option.textContent = entry.question;
    select.append(option);
  });
  const typed = document.createElement("option");
  typed.value = "";
  typed.disabled = true;
  typed.textContent = "Your question";
  select.append(typed);
  select.addEventListener("change", () => {
    const i = Number(select.value);
    if (select.value !== "" && Number.isInteger(i) && i >= 0 && i < entries.length) onPick(i);
  });
  return select;
}

/**
 * Fetch lesson `entry` (checked against the manifest's sha256) and return the state to mount.
 * @param {string} base @param {any} manifest @param {LessonEntry} entry
 * @returns {Promise<Record<string, any>>}
 */
export async function loadLesson(base, manifest, entry) {
  const data = await fetchCheckedJson(base, entry.file, manifest);
  if (!data || typeof data.state !== "object" || !data.state?.result) throw new Error(`${entry.file}: not a lesson`);
  return data.state;
}
