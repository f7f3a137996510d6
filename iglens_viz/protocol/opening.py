"""Where a result opens: the position a widget, an exported page and :func:`iglens_viz.compare`
select (and pin) when ``selected=`` / ``pinned=`` say nothing.

A reader looks first at the answer's first *content* token: for "What is the capital of
Vietnam?" answered "The capital of Vietnam is Hoi An." that is ``[41] ␣is → ␣Ho``, not the
answer's opening words, which repeat the question.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .serializers import array_from_payload

__all__ = ["opening_position", "payload_opening"]

_MARKERS = " \t\r\n\u0120\u2581\u2423"
"""Whitespace and the tokenizers' leading-space markers (Ġ, ▁, and ␣ as the views show it)."""

_SPECIAL = re.compile(r"^<[^<>]*>$")
"""A special token's text (``<|im_end|>``, ``<s>``): never the point of an answer."""


def _word(token: str) -> str:
    """A token compared as a word: stripped of whitespace and space markers, case-folded."""
    return token.strip().lstrip(_MARKERS).casefold()


def _is_content(word: str) -> bool:
    """A word with a letter or digit that is not a special token."""
    return any(ch.isalnum() for ch in word) and not _SPECIAL.match(word)


def opening_position(
    tokens: Sequence[str],
    target_tokens: Sequence[str],
    answer_start: int,
    has_target: Sequence[bool] | None = None,
) -> int:
    """The position to open on: the first answer position whose target is a content token
    (a letter or digit, not a special token) that does not occur among the prompt's tokens
    (compared case-insensitively, stripped of the leading space marker).

    ``answer_start`` is the first position whose target is an answer token (the protocol's
    ``answer_start``; ``len(tokens)`` without an answer): the prompt's tokens are
    ``tokens[: answer_start + 1]`` and the answer's positions ``answer_start … T - 2``.
    Without such a position: ``answer_start`` (the first position that predicts the
    answer), else the last position — or, when ``has_target`` says it has no target, the
    nearest earlier one that has. -1 for an empty result.
    """
    T = len(tokens)
    if T == 0:
        return -1
    has = [True] * T if has_target is None else [bool(x) for x in has_target]
    start = min(max(int(answer_start), 0), T)
    prompt = {_word(t) for t in tokens[: start + 1]}
    for i in range(start, T - 1):
        word = _word(target_tokens[i])
        if has[i] and _is_content(word) and word not in prompt:
            return i
    fallback = min(start, T - 1)
    return next((i for i in range(fallback, -1, -1) if has[i]), fallback)


def payload_opening(payload: Mapping[str, Any]) -> int:
    """:func:`opening_position` of a result payload (``tokens``, ``target_tokens``,
    ``answer_start``, ``target_ids``; docs/widget-protocol.md)."""
    tokens = [str(t) for t in payload["tokens"]]
    T = len(tokens)
    targets = [str(t) for t in payload.get("target_tokens") or [""] * T]
    ids = payload.get("target_ids")
    has = None if ids is None else (array_from_payload(ids).reshape(-1) >= 0).tolist()
    return opening_position(tokens, targets, int(payload.get("answer_start", T)), has)
