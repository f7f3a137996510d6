"""The page's commands and Python's answers, declared once (:data:`COMMANDS`).

The page asks for work with custom messages (anywidget's ``model.send``), never by writing
traits; Python answers each command with one envelope (:func:`answer`). See the section
"Commands and answers" of ``docs/widget-protocol.md``. This module reads and checks the
messages; :meth:`iglens_viz.widget.IGLensWidget.dispatch` runs them.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.inputs import is_position_index
from ..errors import InvalidRequestError

__all__ = [
    "COMMANDS",
    "MAX_ASK_NEW_TOKENS",
    "MAX_GATE_STEPS",
    "MAX_ID_LENGTH",
    "MAX_PROMPT_LENGTH",
    "MAX_SAVE_BYTES",
    "Command",
    "CommandKind",
    "CommandSpec",
    "answer",
    "parse_command",
]

CommandKind = Literal[
    "hello", "recompute", "ask", "cancel", "ablation", "gates", "path", "components", "save"
]
"""A command the page can send; see :data:`COMMANDS`."""

MAX_ID_LENGTH = 64
"""The longest request id (the page's ids are a short random prefix and a counter)."""

MAX_PROMPT_LENGTH = 20_000
"""The longest text a command carries, in characters: the prompt of an ``ask``, a ``versus``
answer, the counterfactual prompt of a causal check."""

MAX_ASK_NEW_TOKENS = 256
"""The longest answer an ``ask`` may ask for, in tokens: a click in the page should not start
an hour of generation and attribution (a notebook call to ``attribute`` has no such limit)."""

MAX_GATE_STEPS = 256
"""The most diagonal steps a ``gates`` command may ask for (each costs two one-token runs)."""

MAX_SAVE_BYTES = 32 << 20
"""The largest picture a ``save`` command may carry, in bytes (before base64)."""

SAVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.(png|svg)")
"""A ``save`` command's file name: a plain name ending ``.png`` or ``.svg``, no folder."""

CHECK_POSITIONS = ("target", "all")
"""The ``positions`` of an ``ablation`` command: the answer position only, or every one."""


@dataclass(frozen=True)
class CommandSpec:
    """What one command carries and how it runs."""

    fields: tuple[str, ...]
    """Its fields beside ``kind`` and ``id``."""
    background: bool
    """Run in the widget's background thread (one at a time, named by ``running``)."""
    doc: str
    while_running: bool = False
    """Answered while a background command runs (the others are refused then: they would
    read the engine the background command uses, or a result about to be replaced)."""
    optional: tuple[str, ...] = ()
    """Fields it may carry beside :attr:`fields` (absent: the command's default)."""
    answer: str = "the envelope only"
    """Where the answer's data goes: a trait, or the envelope only."""


COMMANDS: dict[CommandKind, CommandSpec] = {
    "hello": CommandSpec(
        (),
        False,
        "Nothing to do: the answer tells the page a kernel listens.",
        while_running=True,
    ),
    "recompute": CommandSpec(
        ("result_id", "controls"),
        True,
        """Recompute the shown result's request with the controls' fields replaced:
        ``controls`` is ``{target, contrast, boundaries, estimator, steps, lens}`` as typed
        (``AttributionRequest.with_controls``); ``lens`` is ``"logit"`` (or ``""``) for the
        raw logit lens, ``"shortcut"``, ``"tuned"``, ``"jacobian"``, or the shown result's
        ``controls.lens`` to keep its lens; absent keeps it. ``versus``: an answer to compare
        the shown answer with, as text (the student view's compare box; null or ``""`` drops
        the comparison; absent keeps the request's). Runs in the background thread;
        ``running`` names it meanwhile, with progress in ``progress``.""",
        optional=("versus",),
        answer="a new ``result`` (a new ``id``)",
    ),
    "ask": CommandSpec(
        ("result_id", "prompt"),
        True,
        f"""A new question in the same widget (the prompt box): ``prompt`` is the question as
        text, 1 … {MAX_PROMPT_LENGTH:,} characters, not blank. The shown request with
        ``prompt`` replaced (``IGLensWidget.ask_request``: ``chat``, ``max_new_tokens`` unless
        the command gives one, the boundaries, estimator, steps and lens kept; a token target
        becomes ``predicted``; the contrast, ``answer`` and ``versus`` dropped, and a request
        that had a teacher-forced ``answer`` generates up to 24 tokens instead). ``versus``:
        an answer to compare the new one with, or null; ``max_new_tokens``: the answer's
        length, an integer 1 … {MAX_ASK_NEW_TOKENS} (``MAX_ASK_NEW_TOKENS``; absent or null:
        as the shown request; the box's ``input[name=max_new_tokens]``). In the background
        thread like a recompute, cancellable: ``running`` names it, ``progress`` climbs with
        the forward passes' blocks (generation included) and the interior points.""",
        optional=("versus", "max_new_tokens"),
        answer="a new ``result`` (a new ``id``)",
    ),
    "cancel": CommandSpec(
        ("request_id",),
        False,
        """Stop the running command ``request_id`` (a ``recompute``, an ``ask`` or a
        ``gates``) at its next block of a forward pass (each generation step included) or
        chunk of points; the old result stays and the cancelled command's envelope is an
        error of type ``RecomputeCancelled``.""",
        while_running=True,
    ),
    "ablation": CommandSpec(
        ("result_id", "position"),
        True,
        """The causal check of one token, in the background thread like a recompute.
        ``positions``: ``"target"`` (the default: the answer position only) or ``"all"``;
        ``counterfactual``: a corrupt prompt of the same token length, or null; ``contrast``:
        its answer token as typed, or null (the model's top-1 there).""",
        optional=("positions", "counterfactual", "contrast"),
        answer="``ablation``",
    ),
    "gates": CommandSpec(
        ("result_id", "position", "counterfactual"),
        True,
        f"""The block-gate game of one token (``IGLensWidget.gate_game``) against
        ``counterfactual``, the same question about another subject as text (formed as the
        shown prompt is, the answer's subject swapped); in the background thread like a
        recompute, ``progress`` climbing with its runs; a ``cancel`` stops it at its next
        block. ``steps``: the diagonal's steps, 1 … {MAX_GATE_STEPS} (``MAX_GATE_STEPS``;
        absent or null: 16).""",
        optional=("steps",),
        answer="``gates``",
    ),
    "path": CommandSpec(
        ("result_id", "position", "steps"),
        False,
        "The interior path of one token (milliseconds, no model run).",
        answer="``path``",
    ),
    "components": CommandSpec(
        ("result_id", "position"),
        False,
        "The head split of one token (the first on a prompt runs the model once).",
        answer="``components``",
    ),
    "save": CommandSpec(
        ("name", "data"),
        False,
        """Write a picture the page made (its PNG / SVG export) to ``name`` in the kernel's
        working folder, for a frame that blocks the page's download (a sandboxed iframe
        without ``allow-downloads``); ``data`` is its bytes as base64, at most
        :data:`MAX_SAVE_BYTES`.""",
        answer="the envelope (the file is ``name`` in the kernel's working folder)",
        while_running=True,
    ),
}
"""Every command, by kind (the order of ``docs/widget-protocol.md``'s table)."""


@dataclass(frozen=True)
class Command:
    """One checked command from the page."""

    kind: CommandKind
    id: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> CommandSpec:
        """The declaration of this command's kind."""
        return COMMANDS[self.kind]


def _a(kind: str) -> str:
    """The article before a command's kind: "an ask", "a recompute"."""
    return "an" if kind[:1] in "aeiou" else "a"


def _request_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_LENGTH:
        raise InvalidRequestError(
            f"{what} must be a string of 1 … {MAX_ID_LENGTH} characters, got {value!r:.80}"
        )
    return value


def _field(kind: str, name: str, value: Any) -> Any:
    """A command's field, checked for its form (the widget checks it against the result)."""
    if name in ("result_id", "request_id"):
        return _request_id(value, f"{_a(kind)} {kind} command's {name}")
    if name == "position":
        if not is_position_index(value):
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command needs a position (an integer >= 0), got {value!r:.80}"
            )
        return int(value)
    if name == "steps":
        if kind == "gates":
            whole = isinstance(value, int) and not isinstance(value, bool)
            if value is not None and not (whole and 1 <= value <= MAX_GATE_STEPS):
                raise InvalidRequestError(
                    f"a gates command's steps is the diagonal's step count, an integer 1 … "
                    f"{MAX_GATE_STEPS}, or null (16), got {value!r:.80}"
                )
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command needs steps (an integer), got {value!r:.80}"
            )
        return value
    if name == "positions":
        if value not in CHECK_POSITIONS:
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command's positions is 'target' (the answer position only) or "
                f"'all' (every position), got {value!r:.80}"
            )
        return value
    if name == "counterfactual":
        if value is not None and (not isinstance(value, str) or len(value) > MAX_PROMPT_LENGTH):
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command's counterfactual is a prompt (text of at most "
                f"{MAX_PROMPT_LENGTH} characters) or null, got {value!r:.80}"
            )
        return value or None
    if name == "contrast":
        token = isinstance(value, str) or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0
        )
        if value is not None and not token:
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command's contrast is a token (text, or an id >= 0) or null, "
                f"got {value!r:.80}"
            )
        return value if value != "" else None
    if name == "prompt":
        if not isinstance(value, str) or not value.strip():
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command needs a prompt: the question as text, got {value!r:.80}"
            )
        if len(value) > MAX_PROMPT_LENGTH:
            raise InvalidRequestError(
                f"the prompt is {len(value)} characters long; an {kind} takes at most "
                f"{MAX_PROMPT_LENGTH}: shorten it"
            )
        return value
    if name == "versus":
        if value is not None and not isinstance(value, str):
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command's versus is an answer to compare with (text) or null, "
                f"got {value!r:.80}"
            )
        if value is not None and len(value) > MAX_PROMPT_LENGTH:
            raise InvalidRequestError(
                f"the versus answer is {len(value)} characters long; at most "
                f"{MAX_PROMPT_LENGTH}: shorten it"
            )
        return value if value and value.strip() else None
    if name == "max_new_tokens":
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not (whole and 1 <= value <= MAX_ASK_NEW_TOKENS):
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command's max_new_tokens is the answer's length, an integer "
                f"1 … {MAX_ASK_NEW_TOKENS}, or null (as the shown question), got {value!r:.80}"
            )
        return value
    if name == "name":
        if not isinstance(value, str) or not SAVE_NAME.fullmatch(value):
            raise InvalidRequestError(
                f"a save command's name is a file name ending .png or .svg (letters, digits, "
                f"'.', '_', '-'; no folder), got {value!r:.80}"
            )
        return value
    if name == "data":
        try:
            data = base64.b64decode(value, validate=True) if isinstance(value, str) else None
        except binascii.Error:
            data = None
        if data is None or not 0 < len(data) <= MAX_SAVE_BYTES:
            raise InvalidRequestError(
                f"a save command's data is the picture's bytes as base64 (1 … "
                f"{MAX_SAVE_BYTES} bytes), got {type(value).__name__} of "
                f"{len(value) if isinstance(value, str) else 0} characters"
            )
        return data
    if name == "controls":
        if not isinstance(value, Mapping):
            raise InvalidRequestError(
                f"{_a(kind)} {kind} command needs controls (an object of target, contrast, "
                f"boundaries, estimator, steps), got {value!r:.80}"
            )
        return dict(value)
    raise AssertionError(f"no rule for the field {name!r}")  # pragma: no cover - COMMANDS


def parse_command(message: Any) -> Command:
    """The :class:`Command` a page message asks for; an :class:`InvalidRequestError`
    naming what is wrong (the dispatcher sends it back in the error envelope)."""
    if not isinstance(message, Mapping):
        raise InvalidRequestError(
            f"a command is an object with kind and id, got {type(message).__name__}"
        )
    kind = message.get("kind")
    if not isinstance(kind, str) or kind not in COMMANDS:  # a list or dict is not hashable
        raise InvalidRequestError(
            f"unknown command kind {kind!r:.80}: choose one of {', '.join(COMMANDS)}"
        )
    request_id = _request_id(message.get("id"), f"{_a(kind)} {kind} command's id")
    spec = COMMANDS[kind]
    missing = [name for name in spec.fields if name not in message]
    if missing:
        raise InvalidRequestError(f"{_a(kind)} {kind} command needs {', '.join(missing)}")
    fields = {name: _field(kind, name, message[name]) for name in spec.fields}
    fields.update(
        {name: _field(kind, name, message[name]) for name in spec.optional if name in message}
    )
    return Command(kind, request_id, fields)


def answer(
    request_id: str,
    command: str,
    result_id: str,
    error: BaseException | None = None,
) -> dict[str, Any]:
    """The one answer envelope of a command: ``ok``, or the error's type and message."""
    return {
        "kind": "answer",
        "request_id": request_id,
        "command": command,
        "ok": error is None,
        "result_id": result_id,
        "error": None
        if error is None
        else {"type": type(error).__name__, "message": str(error) or type(error).__name__},
    }
