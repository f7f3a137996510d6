"""Teacher notes: short texts pinned to a position, a block, or a block at a position, kept in
the widget's ``notes`` state (and so in every exported page) and shown by the student view
as callouts (the token strip marks the positions that have one).

A note is ``{"text": str, "position": int}``, ``{"text": str, "block": int}`` or both keys:
``position`` a position of the result (0 … T − 1), ``block`` a depth 0 … n (0: the
embeddings, n: the output block). The text is untrusted: the page inserts it as text only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidRequestError

__all__ = ["MAX_NOTES", "MAX_NOTE_CHARS", "check_notes", "make_note"]

MAX_NOTE_CHARS = 500
"""The longest note text, in characters (the page's editor caps it too)."""
MAX_NOTES = 50
"""The most notes one widget keeps."""

_KEYS = ("position", "block", "text")


def _index(value: Any, name: str, top: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise InvalidRequestError(
            f"{where}: {name}={value!r} must be an integer 0 … {top}"
            + (" (a position of this result)" if name == "position" else " (0: the embeddings)")
        )
    return int(value)


def make_note(
    text: Any,
    *,
    position: Any = None,
    block: Any = None,
    positions: int,
    blocks: int,
    where: str = "note",
) -> dict[str, Any]:
    """One checked note: ``text`` (not blank, at most :data:`MAX_NOTE_CHARS` characters)
    pinned to ``position`` (0 … ``positions`` − 1) and/or ``block`` (0 … ``blocks``).

    Raises :class:`~iglens_viz.errors.InvalidRequestError` saying what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequestError(f"{where}: text must be a non-blank string, not {text!r}")
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidRequestError(
            f"{where}: text has {len(text)} characters; a note holds at most {MAX_NOTE_CHARS}"
        )
    if position is None and block is None:
        raise InvalidRequestError(
            f"{where}: pin it to a position=, a block= or both (a note pinned nowhere is not shown)"
        )
    note: dict[str, Any] = {}
    if position is not None:
        note["position"] = _index(position, "position", positions - 1, where)
    if block is not None:
        note["block"] = _index(block, "block", blocks, where)
    note["text"] = text
    return note


def check_notes(value: Any, *, positions: int, blocks: int) -> list[dict[str, Any]]:
    """The ``notes`` state checked against a result of ``positions`` positions and
    ``blocks`` blocks: a list of at most :data:`MAX_NOTES` notes (see :func:`make_note`),
    each a dict with ``text`` and ``position`` and/or ``block`` and no other key.

    Raises :class:`~iglens_viz.errors.InvalidRequestError` naming the first bad entry."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise InvalidRequestError(f"notes must be a list of notes, not {type(value).__name__}")
    if len(value) > MAX_NOTES:
        raise InvalidRequestError(f"{len(value)} notes: a widget keeps at most {MAX_NOTES}")
    out = []
    for n, entry in enumerate(value):
        where = f"note {n}"
        if not isinstance(entry, dict):
            raise InvalidRequestError(
                f"{where} must be a dict like {{'position': 41, 'text': '…'}}, not {entry!r}"
            )
        extra = sorted(str(k) for k in entry if k not in _KEYS)
        if extra:
            raise InvalidRequestError(
                f"{where} has unknown keys {extra}: a note has text, position and/or block"
            )
        out.append(
            make_note(
                entry.get("text"),
                position=entry.get("position"),
                block=entry.get("block"),
                positions=positions,
                blocks=blocks,
                where=where,
            )
        )
    return out
