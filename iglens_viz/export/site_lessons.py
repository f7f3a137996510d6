"""The kernel-free site's pre-computed lessons (issue 38): questions attributed in Python at
export time, so the page shows a ledger at first paint, before (and without) the model's
sessions::

    DIR/lessons/lesson-01.json   {"question", "chat", "max_new_tokens",
                                  "state": the model state the HTML export embeds}

``state`` is :func:`iglens_viz.export.html.page_state` of Python's
:func:`~iglens_viz.attribute`: the widget's ``result`` payload (buffers as base64) and the
selection a reader looks at first. The page mounts it with the same views (``mount`` of
js/standalone.js), so prompt and token text reach the DOM only through their escaping.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

__all__ = ["DEFAULT_LESSONS", "Lesson", "lesson_entries", "write_lessons"]


class Lesson(TypedDict):
    """One pre-computed lesson: the question and how it is asked."""

    question: str
    chat: bool
    max_new_tokens: int


DEFAULT_LESSONS: tuple[Lesson, ...] = (
    {"question": "What is the capital of Vietnam?", "chat": True, "max_new_tokens": 12},
)
"""The README's lesson, as the site ships it by default."""


def _lesson(spec: Lesson | str) -> Lesson:
    if isinstance(spec, str):
        return {"question": spec, "chat": True, "max_new_tokens": 12}
    return {
        "question": str(spec["question"]),
        "chat": bool(spec.get("chat", True)),
        "max_new_tokens": int(spec.get("max_new_tokens", 12)),
    }


def write_lessons(
    directory: str | Path,
    model: Any,
    tokenizer: Any,
    lessons: Iterable[Lesson | str],
    *,
    name: str | None = None,
    top_k: int = 5,
) -> list[dict[str, Any]]:
    """Attribute each lesson with :func:`iglens_viz.attribute` and write
    ``lessons/lesson-NN.json`` into the site folder ``directory`` (no folder when there are
    none); the manifest's entries (``file`` and the lesson's question and options).

    A question is a string (asked with the chat template, 12 new tokens) or a :class:`Lesson`.
    """
    from ..core.lens import attribute
    from .html import page_state

    specs = [_lesson(spec) for spec in lessons]
    entries: list[dict[str, Any]] = []
    if not specs:
        return entries
    folder = Path(directory) / "lessons"
    folder.mkdir()
    for i, spec in enumerate(specs, start=1):
        result = attribute(
            model,
            tokenizer,
            spec["question"],
            chat=spec["chat"],
            max_new_tokens=spec["max_new_tokens"],
            top_k=top_k,
            name=name,
        )
        relative = f"lessons/lesson-{i:02d}.json"
        data = {**spec, "state": page_state(result)}
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        (Path(directory) / relative).write_text(text + "\n", encoding="utf-8")
        entries.append({"file": relative, **spec, "positions": len(result.input_ids)})
    return entries


def lesson_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The lessons a site's manifest lists (none for a folder written without them)."""
    return list(manifest.get("lessons", []))
