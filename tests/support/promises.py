"""The gallery's promise rule: a markdown cell that announces a figure, a table or a widget
is followed by a code cell that shows one (tests/gallery/test_promises.py tests the rule;
tests/gallery/test_notebooks.py applies it to every executed notebook)."""

from __future__ import annotations

import re

import nbformat

# What a word announces -> the output MIME types that keep the promise.
IMAGE = ("image/png", "image/svg+xml")
WIDGET = ("application/vnd.jupyter.widget-view+json",)
ANNOUNCED = {
    "figure": IMAGE + WIDGET,  # a widget is a figure too (its picture rides in its bundle)
    "plot": IMAGE,
    "chart": IMAGE,
    "histogram": IMAGE,
    "heatmap": IMAGE + WIDGET,
    "scatter": IMAGE,
    "table": ("text/html",),
    "widget": WIDGET,
}
WORD = re.compile(r"\b(" + "|".join(ANNOUNCED) + r")s?\b", re.IGNORECASE)
INLINE_CODE = re.compile(r"`[^`]*`")


KINDS = "|".join(ANNOUNCED)
BELOW = re.compile(rf"\b({KINDS})s?\s+below\b", re.IGNORECASE)
# A sentence whose subject is the output: "The table lists…", "A static figure…"
SUBJECT = re.compile(rf"^(?:the|this|a|an|its)\s+(?:[\w-]+\s+)?({KINDS})s?\b", re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def announced_kinds(markdown: str) -> tuple[set[str], bool]:
    """What ``markdown`` (inline code removed) announces for the next cell, and whether its
    last line ends with a colon ("Its detail view:"). A word announces where a reader takes
    it as a promise: in a heading ("## A static figure"), before "below" ("the widget
    below"), or as a sentence's subject ("The table lists each token's halves."); elsewhere
    it describes ("printed from the table", "stream the table to Parquet"). A notebook's
    title cell (a level-1 heading) describes the whole notebook and announces nothing."""
    if markdown.lstrip().startswith("# "):
        return set(), False
    prose = INLINE_CODE.sub("", markdown)
    lines = [line.strip() for line in prose.strip().splitlines() if line.strip()]
    headings = [line.lstrip("#").strip() for line in lines if line.startswith("#")]
    text = " ".join(line for line in lines if not line.startswith("#"))
    words = {m.group(1).lower() for h in headings for m in WORD.finditer(h)}
    words |= {m.group(1).lower() for m in BELOW.finditer(prose)}
    for sentence in SENTENCE_END.split(text):
        subject = SUBJECT.match(sentence.strip().lstrip("*_"))
        if subject:
            words.add(subject.group(1).lower())
    return words, bool(lines) and lines[-1].endswith(":")


def shown_types(cell: nbformat.NotebookNode) -> set[str]:
    """The MIME types a code cell's outputs show (a print shows ``text/plain``)."""
    shown: set[str] = set()
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            shown.add("text/plain")
        else:
            shown.update(output.get("data", {}))
    return shown


def unkept_promises(nb: nbformat.NotebookNode) -> list[str]:
    """One line per markdown cell whose announced output the next code cell does not show."""
    problems = []
    cells = nb.cells
    for index, cell in enumerate(cells[:-1]):
        following = cells[index + 1]
        if cell.cell_type != "markdown" or following.cell_type != "code":
            continue
        words, colon = announced_kinds(cell.source)
        shown = shown_types(following)
        kept = any(shown & set(ANNOUNCED[word]) for word in words)
        if words and not kept:
            what = sorted(shown) or "nothing"
            problems.append(
                f"cell {index} announces {sorted(words)}; cell {index + 1} shows {what}"
            )
        elif not words and colon and not shown:
            problems.append(f"cell {index} ends on a colon; cell {index + 1} shows nothing")
    return problems
