// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { createLessonPicker, lessonCaption, lessonEntries } from "./lessons.js";

const entry = (/** @type {string} */ file, /** @type {string} */ question) => ({ file, question, chat: true, max_new_tokens: 12, positions: 40 });

describe("the site's lessons", () => {
  it("lists only the manifest's lessons that name a file it lists", () => {
    const manifest = /** @type {any} */ ({
      lessons: [entry("lessons/lesson-01.json", "a"), entry("lessons/missing.json", "b"), { file: 3 }],
      files: { "lessons/lesson-01.json": { bytes: 1 } },
    });
    expect(lessonEntries(manifest).map((e) => e.question)).toEqual(["a"]);
    expect(lessonEntries(/** @type {any} */ ({ files: {} }))).toEqual([]);
  });

  it("the picker shows each question as text and reports the lesson picked", () => {
    /** @type {number[]} */
    const picked = [];
    const evil = '<img src=x onerror="alert(1)">';
    const picker = createLessonPicker([entry("l1", "What is the capital of Vietnam?"), entry("l2", evil)], (i) => picked.push(i));
    expect(picker).not.toBeNull();
    const select = /** @type {HTMLSelectElement} */ (picker);
    expect([...select.options].map((o) => o.textContent)).toEqual(["What is the capital of Vietnam?", evil, "Your question"]);
    expect(select.querySelector("img")).toBeNull();
    select.value = "1";
    select.dispatchEvent(new Event("change"));
    select.value = "";
    select.dispatchEvent(new Event("change"));
    expect(picked).toEqual([1]);
    expect(select.selectedOptions[0].textContent).toBe("Your question"); // after a typed question
    expect(createLessonPicker([], () => {})).toBeNull();
  });

  it("the caption names the question, its positions and where it was computed", () => {
    expect(lessonCaption(entry("l1", "Why?"))).toMatch(/^Lesson: “Why\?” \(40 positions, asked with the chat template; computed in Python/);
  });
});
