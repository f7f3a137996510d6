"""The attribution request: what to attribute, parsed and validated once.

Every front end builds one :class:`AttributionRequest` — :func:`iglens_viz.attribute` and
:meth:`IGLens.attribute` from keyword arguments, the ``iglens`` command from its flags, the
widget from its controls (:meth:`AttributionRequest.with_controls`) — and the engine runs it
(:meth:`IGLens.run`). The result keeps it (``result.request``), a recompute replays it with
the changed fields, and the widget payload and the exported page carry its JSON form
(:meth:`AttributionRequest.to_dict`).

Validation here is everything that does not need the model: types, forms, ranges that hold
for any model. What needs the model (a boundary list ending at its number of blocks, a token
string that must be one token, ids below its vocabulary size) is checked when the engine
runs the request, with the same error class, :class:`~iglens_viz.errors.InvalidRequestError`.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypedDict, TypeGuard, get_args

import numpy as np
import torch

from ..errors import InvalidRequestError
from .boundaries import BoundarySpec, normalize_boundaries, resolve_boundaries
from .coordinates import LENS_KINDS, LOGIT, Lens

__all__ = [
    "CHAT_MODES",
    "ESTIMATORS",
    "MAX_STEPS",
    "PER_POSITION",
    "TARGET_KEYWORDS",
    "AnswerSpec",
    "AttributeOptions",
    "AttributionRequest",
    "ChatMode",
    "Estimator",
    "LensSpec",
    "PromptSpec",
    "TargetKeyword",
    "TargetSpec",
    "normalize_answer",
    "normalize_lens",
    "normalize_prompt",
    "normalize_target",
]

Estimator = Literal["prediction_aware", "riemann"]
"""``"prediction_aware"`` (exact: totals are first differences of f) or ``"riemann"``
(midpoint-rule gradients through norm + head, with a discretisation error)."""
ESTIMATORS: tuple[Estimator, ...] = get_args(Estimator)

_ChatKeyword = Literal["auto"]
ChatMode = bool | _ChatKeyword
"""Wrap a string prompt in the tokenizer's chat template: True, False or ``"auto"``."""
CHAT_MODES: tuple[ChatMode, ...] = (True, False, *get_args(_ChatKeyword))

TargetKeyword = Literal["predicted", "next"]
"""``"predicted"`` (the model's own top-1 next token) or ``"next"`` (the text's next token)."""
TARGET_KEYWORDS: tuple[TargetKeyword, ...] = get_args(TargetKeyword)

TargetSpec = TargetKeyword | int | str | Sequence[int]
"""``"predicted"`` (the model's own top-1 next token), ``"next"`` (the text's next token), a
token id, a single-token string, or one id per position (-1: no target there)."""

PromptSpec = str | Sequence[int] | np.ndarray | torch.Tensor
"""A prompt: text (not blank), or token ids as a sequence, a 1-D / ``[1, T]`` array or
tensor."""

AnswerSpec = str | Sequence[int]
"""A whole answer after the prompt: text (tokenised on its own, without special tokens;
mind the leading space, ``" Hanoi"``) or its token ids."""

LensSpec = Lens | str | os.PathLike[str]
"""The readout's coordinates: a :class:`~iglens_viz.core.coordinates.Lens`, a lens kind
(``"logit"``, the default, ``"shortcut"``, ``"tuned"``, ``"jacobian"``: fitted for the model,
or found in the cache) or the path of a saved lens (a file or a folder)."""

MAX_STEPS = 1000
"""The most interpolation steps per segment. Prediction-aware totals do not depend on the
step count, and the Riemann sum's discretisation error falls as 1/m²: at m = 1000 it is far
below what a figure shows, while each step costs a readout of every (position, segment)."""

PER_POSITION = "(per position)"
"""The controls' text for a target given as one id per position (it cannot be typed)."""

_INTEGER_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")  # steps: ASCII digits, spaces tolerated
# A typed target is a token id only as bare ASCII digits: " 4" is a token string (a leading
# space is part of many tokens) and so is a non-ASCII digit such as "\u0663", which int()
# would accept.
_TOKEN_ID_TEXT = re.compile(r"[0-9]+")
_NO_TARGET = -1


def _is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _id_tuple(values: Any, what: str, *, allow_none_marker: bool) -> tuple[int, ...]:
    """A 1-D sequence / array / tensor of token ids as a tuple of ints (validated)."""
    array = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values)
    if array.dtype == object and array.size and all(_is_int(v) for v in array.ravel()):
        huge = next(int(v) for v in array.ravel() if abs(v) >= 2**63)  # not even int64
        raise InvalidRequestError(
            f"{what} ids out of range: {huge} is beyond any vocabulary (token ids are 0..V-1)"
        )
    if array.dtype == object or array.dtype.kind not in "iu":
        got = "values of mixed types" if array.dtype == object else array.dtype
        raise InvalidRequestError(f"{what} ids must be integers, got {got}")
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 1:
        raise InvalidRequestError(
            f"{what} ids must be 1-D or [1, T]; got shape {array.shape} "
            f"(attribute one sequence at a time)"
        )
    floor = _NO_TARGET if allow_none_marker else 0
    bad = array[array < floor]
    if bad.size:
        allowed = " (-1 marks a position without a target)" if allow_none_marker else ""
        raise InvalidRequestError(f"{what} ids must be >= {floor}{allowed}; got {bad[:5].tolist()}")
    return tuple(int(i) for i in array)


def _valid_text(text: str, what: str) -> str:
    """``text``, checked to be valid Unicode: a lone surrogate (half of a UTF-16 pair, as JSON's
    ``"\\ud800"`` or a file read with ``errors="surrogateescape"`` give) is not text a
    tokenizer reads, and the tokenizer's own ``TypeError`` names neither the field nor a fix."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidRequestError(
            f"the {what} holds a lone surrogate, {ascii(text[err.start])} at character "
            f"{err.start}, which no tokenizer reads: pass valid Unicode (decode bytes with "
            f"errors='replace')"
        ) from None
    return text


def normalize_prompt(prompt: PromptSpec) -> str | tuple[int, ...]:
    """A prompt as the request keeps it: non-blank text, or a tuple of token ids."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise InvalidRequestError(
                "the prompt is empty"
                + (" (only whitespace)" if prompt else "")
                + ": pass some text or a list of token ids"
            )
        return _valid_text(prompt, "prompt")
    if isinstance(prompt, (bytes, bytearray)):
        raise InvalidRequestError("the prompt is bytes: decode it to a string first")
    if not isinstance(prompt, (Sequence, np.ndarray)) and not hasattr(prompt, "detach"):
        raise InvalidRequestError(
            f"the prompt must be a string, a sequence of token ids or a "
            f"tensor, not {type(prompt).__name__}"
        )
    ids = _id_tuple(prompt, "token", allow_none_marker=False) if len(prompt) else ()
    if not ids:
        raise InvalidRequestError("the prompt is empty: it has no tokens")
    return ids


def normalize_target(
    spec: TargetSpec | np.ndarray | torch.Tensor, what: str = "target"
) -> str | int | tuple[int, ...]:
    """A target (or contrast) in the form a request keeps: ``"predicted"``, ``"next"``, an
    int id >= 0, a non-empty token string, or a tuple of ids (-1: no target there)."""
    if isinstance(spec, str):
        if spec == "":
            raise InvalidRequestError(
                f"the {what} is an empty string: pass 'predicted', "
                f"'next', a token id or one token such as ' Paris'"
            )
        return _valid_text(spec, what)
    if _is_int(spec):
        if int(spec) < 0:
            raise InvalidRequestError(f"{what} token id must be >= 0, got {int(spec)}")
        return int(spec)
    if isinstance(spec, (Sequence, np.ndarray)) or hasattr(spec, "detach"):
        if isinstance(spec, (bytes, bytearray)):
            raise InvalidRequestError(f"the {what} is bytes: decode it to a string first")
        return _id_tuple(spec, what, allow_none_marker=True)
    raise InvalidRequestError(
        f"{what} must be 'predicted', 'next', a token id, a "
        f"single-token string or one id per position; got "
        f"{type(spec).__name__}"
    )


def normalize_answer(spec: object, what: str = "answer") -> str | tuple[int, ...] | None:
    """An answer as the request keeps it: None, non-empty text, or a non-empty tuple of ids."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec == "":
            raise InvalidRequestError(
                f"the {what} is an empty string: pass its text (e.g. ' Hanoi', with its "
                f"leading space) or its token ids"
            )
        return _valid_text(spec, what)
    if isinstance(spec, (bytes, bytearray)):
        raise InvalidRequestError(f"the {what} is bytes: decode it to a string first")
    if not isinstance(spec, (Sequence, np.ndarray)) and not hasattr(spec, "detach"):
        raise InvalidRequestError(
            f"the {what} must be text or a sequence of token ids, not {type(spec).__name__}"
        )
    ids = _id_tuple(spec, what, allow_none_marker=False) if len(spec) else ()  # type: ignore[arg-type]
    if not ids:
        raise InvalidRequestError(f"the {what} has no tokens: pass its text or its token ids")
    return ids


def normalize_lens(spec: LensSpec | None) -> Lens | str:
    """A lens as the request keeps it: a :class:`Lens`, a kind name, or an existing path as
    text (``None`` is ``"logit"``; a leading ``~`` is the home folder)."""
    if spec is None:
        return LOGIT.kind
    if isinstance(spec, Lens):
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise InvalidRequestError(
            f"lens must be a Lens, one of {', '.join(LENS_KINDS)} or the path of a saved "
            f"lens, not {type(spec).__name__}"
        )
    text = os.fspath(spec)
    if text in LENS_KINDS:
        return text
    if (
        not isinstance(text, str)
        or not text.strip()
        or not os.path.exists(os.path.expanduser(text))
    ):
        raise InvalidRequestError(
            f"lens {text!r}: choose one of {', '.join(LENS_KINDS)}, or give the path of a "
            f"saved lens (no such file or folder)"
        )
    return text


def _target_from_text(text: object, what: str, *, optional: bool) -> TargetSpec | None:
    """A target/contrast as typed in a text field (CLI flag, widget box).

    Empty means the default ("predicted", or no contrast); bare ASCII digits (``4``) are a
    token id; ``predicted`` / ``next`` exactly are the keywords; anything else is a token
    string exactly as typed: ``" 4"`` and ``" next"`` are tokens (a leading space matters).
    """
    if text is None or text == "":
        return None if optional else "predicted"
    if isinstance(text, float) and text.is_integer():
        text = int(text)
    if _is_int(text):
        return normalize_target(int(text), what)
    if not isinstance(text, str):
        raise InvalidRequestError(f"{what} must be text or a token id, not {type(text).__name__}")
    if text in TARGET_KEYWORDS:
        return text
    if _TOKEN_ID_TEXT.fullmatch(text):
        return normalize_target(int(text), what)
    return normalize_target(text, what)


def _target_text(value: TargetSpec | None) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        return PER_POSITION
    return str(value)


def _steps(value: object) -> int:
    if (
        isinstance(value, str)
        and _INTEGER_TEXT.fullmatch(value)
        or isinstance(value, float)
        and value.is_integer()
    ):
        value = int(value)
    if not _is_int(value) or not 1 <= int(value) <= MAX_STEPS:
        raise InvalidRequestError(f"steps must be an integer from 1 to {MAX_STEPS}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class AttributionRequest:
    """One attribution request, normalised and validated on construction (immutable).

    Build it with keyword arguments (the Python forms) or from text fields with
    :meth:`from_controls`; change it with :meth:`replace` or :meth:`with_controls`, which
    validate again. Run it with :meth:`IGLens.run <iglens_viz.IGLens.run>`.
    """

    prompt: PromptSpec
    """The user's text (not blank) or the token ids, as given (before any chat template);
    ids are kept as a tuple of ints."""
    target: TargetSpec = "predicted"
    """See :data:`TargetSpec`; a sequence is kept as a tuple of ids."""
    contrast: TargetSpec | None = None
    """Optional second token in the same forms: attribute p(target) − p(contrast)."""
    boundaries: BoundarySpec = "all"
    """``"all"``, ``"every:K"``, ``"sublayer"`` (every attention and MLP output) or a tuple of
    block indices ``(0, …, n)``; text such as ``"0,10,20,30"`` and lists are normalised to
    the tuple."""
    estimator: Estimator = "prediction_aware"
    """See :data:`Estimator`."""
    steps: int = 1
    """Interpolation steps per segment, 1 … :data:`MAX_STEPS`."""
    chat: ChatMode = False
    """Wrap a string prompt as one user turn in the tokenizer's chat template."""
    max_new_tokens: int = 0
    """Generate the model's greedy answer (up to this many tokens) and attribute it too."""
    components: bool = False
    """Also split every segment's contribution over attention heads and MLPs
    (``result.components``; see :mod:`iglens_viz.core.components`)."""
    lens: LensSpec = "logit"
    """The coordinates each state is read in (see :data:`LensSpec`): ``"logit"`` reads h_L as
    it is; a fitted lens reads T_L(h_L). Kept as given (a :class:`Lens`, a kind name or a
    path); the engine (:meth:`IGLens.resolve_lens`) resolves it when it runs the request."""
    answer: AnswerSpec | None = None
    """A whole answer (see :data:`AnswerSpec`) appended to the prompt (after the chat
    template's assistant turn when ``chat`` is on) and teacher-forced; its ledgers are
    ``result.answer``. Without it the generated answer (``max_new_tokens``) is the answer."""
    versus: AnswerSpec | None = None
    """A second answer after the same prompt, teacher-forced in a pass over its own tokens
    (the prompt computed once): ``result.versus`` and the differential ledger
    ``result.comparison``."""

    # The constructor's signature for inspect and help(): the generated __init__'s (set
    # below the class), not __new__'s.
    __signature__: ClassVar[inspect.Signature]

    def __new__(cls, *args: object, **fields: object) -> AttributionRequest:
        # Runs before the generated __init__: an unknown keyword is an InvalidRequestError
        # naming the fields, not Python's TypeError (``replace`` comes through here too).
        _check_field_names(fields)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        def set_(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        set_("prompt", normalize_prompt(self.prompt))
        set_("target", normalize_target(self.target, "target"))
        set_(
            "contrast",
            None if self.contrast is None else normalize_target(self.contrast, "contrast"),
        )
        set_("boundaries", normalize_boundaries(self.boundaries))
        if self.estimator not in ESTIMATORS:
            raise InvalidRequestError(
                f"unknown estimator {self.estimator!r}; choose one of {', '.join(ESTIMATORS)}"
            )
        set_("steps", _steps(self.steps))
        if self.chat not in CHAT_MODES or isinstance(self.chat, np.bool_):
            raise InvalidRequestError(f"chat must be 'auto', True or False, not {self.chat!r}")
        if self.chat is True and not isinstance(self.prompt, str):
            raise InvalidRequestError("chat=True needs the user message as a string, not token ids")
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 0:
            raise InvalidRequestError(
                f"max_new_tokens must be an integer >= 0, got {self.max_new_tokens!r}"
            )
        set_("max_new_tokens", int(self.max_new_tokens))
        if not isinstance(self.components, (bool, np.bool_)):
            raise InvalidRequestError(f"components must be True or False, not {self.components!r}")
        set_("components", bool(self.components))
        set_("lens", normalize_lens(self.lens))
        set_("answer", normalize_answer(self.answer))
        set_("versus", normalize_answer(self.versus, "versus answer"))
        if self.answer is not None and self.max_new_tokens:
            raise InvalidRequestError(
                "answer= is teacher-forced and max_new_tokens generates one: pass one of "
                "them (max_new_tokens=0 with answer=)"
            )
        if self.versus is not None and self.answer is None and not self.max_new_tokens:
            raise InvalidRequestError(
                "versus= compares two answers, and there is no first one: pass answer= "
                "(or max_new_tokens > 0 to compare against the generated answer)"
            )
        if self.versus is not None and self.versus == self.answer:
            raise InvalidRequestError(
                f"versus is the answer itself ({self.answer!r}): the comparison would be 0 "
                f"in every block; pass a different answer"
            )

    # ------------------------------------------------------------------ building

    def replace(self, **changes: Any) -> AttributionRequest:
        """A copy with some fields changed (validated again); an unknown field name is an
        :class:`~iglens_viz.errors.InvalidRequestError` naming the valid ones (as it is for
        the constructor)."""
        _check_field_names(changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_controls(
        cls, prompt: PromptSpec, controls: Mapping[str, Any], **fixed: Any
    ) -> AttributionRequest:
        """A request from text fields, as the CLI flags and the widget's controls give them.

        ``controls`` may hold ``target``, ``contrast``, ``boundaries``, ``estimator``,
        ``steps`` and ``lens`` as text (or ints); missing or empty fields take the defaults,
        an integer target is a token id. ``fixed`` gives the other fields (``chat``,
        ``max_new_tokens``).
        """
        return cls(prompt, **fixed).with_controls(controls)

    def with_controls(self, controls: Mapping[str, Any]) -> AttributionRequest:
        """This request with the fields typed in ``controls`` (see :meth:`from_controls`).

        An empty or missing field means its default, except ``lens``: missing, it keeps
        this request's lens (controls without a lens switch do not reset it); empty, it is
        the logit lens. The target text :data:`PER_POSITION` keeps this request's
        per-position ids.
        """
        if not isinstance(controls, Mapping):
            raise InvalidRequestError(
                f"the controls must be a mapping of field names to "
                f"text, got {type(controls).__name__}"
            )
        typed = controls.get("target")
        if isinstance(typed, str) and typed == PER_POSITION and isinstance(self.target, tuple):
            target: TargetSpec | None = self.target
        else:
            target = _target_from_text(typed, "target", optional=False)
        estimator = controls.get("estimator") or "prediction_aware"
        if not isinstance(estimator, str):
            raise InvalidRequestError(f"estimator must be text, got {type(estimator).__name__}")
        steps = controls.get("steps")
        lens = controls.get("lens", self.lens)
        if isinstance(lens, str):
            lens = lens.strip()
            lens = self.lens if lens == self.lens_name else lens  # the same lens: keep it
        return self.replace(
            target=target,
            contrast=_target_from_text(controls.get("contrast"), "contrast", optional=True),
            boundaries=controls.get("boundaries") or "all",
            estimator=estimator.strip(),
            steps=1 if steps is None or steps == "" else steps,
            lens=lens or None,
        )

    # ------------------------------------------------------------------ reading

    def boundary_list(self, n_blocks: int) -> list[float]:
        """The boundaries as depths ``[0, …, n]`` for a model with ``n_blocks``: block
        indices, and the half depths L − 0.5 (after block L's attention) under
        ``"sublayer"``."""
        return resolve_boundaries(self._boundary_form, n_blocks)

    @property
    def _boundary_form(self) -> str | tuple[int, ...]:
        # The field as __post_init__ normalised it (its annotation is what the constructor
        # takes).
        b = self.boundaries
        assert isinstance(b, (str, tuple)), "normalised by __post_init__"
        return b

    @property
    def boundary_text(self) -> str:
        """The boundaries as the controls and the CLI write them (``all``, ``every:5``,
        ``0,10,20,30``)."""
        b = self._boundary_form
        return b if isinstance(b, str) else ",".join(str(x) for x in b)

    @property
    def lens_name(self) -> str:
        """The lens's name: ``"logit"``, ``"shortcut"`` …, a saved lens's path as given, or
        a :class:`Lens` object's :attr:`~iglens_viz.core.coordinates.Lens.name`."""
        lens = self.lens
        assert isinstance(lens, (Lens, str)), "normalised by __post_init__"
        return lens.name if isinstance(lens, Lens) else lens

    def controls(self) -> dict[str, str | int]:
        """The text fields that reproduce this request in the widget's controls (``lens``
        only when it is not the logit lens)."""
        out: dict[str, str | int] = {
            "target": _target_text(self.target),
            "contrast": _target_text(self.contrast),
            "boundaries": self.boundary_text,
            "estimator": self.estimator,
            "steps": self.steps,
        }
        if self.lens_name != LOGIT.kind:
            out["lens"] = self.lens_name
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (tuples become lists; a :class:`Lens` object by its name; the
        defaults of the later fields — the logit lens, no answer — left out);
        ``AttributionRequest(**d)`` rebuilds it (a lens object as the lens of that name)."""
        out = {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in dataclasses.fields(self)
        }
        out["lens"] = self.lens_name
        if out["lens"] == LOGIT.kind:
            del out["lens"]
        for name in ("answer", "versus"):
            if out[name] is None:
                del out[name]
        return out


class AttributeOptions(TypedDict, total=False):
    """The keyword arguments of an attribution, typed once for every front end.

    :func:`iglens_viz.attribute`, :meth:`IGLens.attribute <iglens_viz.IGLens.attribute>`,
    :class:`~iglens_viz.widget.IGLensWidget` and :func:`~iglens_viz.show` take these as
    ``**options`` (``Unpack[AttributeOptions]``, so a type checker and an editor know each
    keyword) and pass them to :class:`AttributionRequest`, whose fields hold the defaults,
    the rules and the documentation. Every field of the request but ``prompt`` is here
    (``tests/core/test_request.py`` holds the two lists equal).
    """

    target: TargetSpec
    contrast: TargetSpec | None
    boundaries: BoundarySpec
    estimator: Estimator
    steps: int
    chat: ChatMode
    max_new_tokens: int
    components: bool
    lens: LensSpec
    answer: AnswerSpec | None
    versus: AnswerSpec | None


_INIT = inspect.signature(AttributionRequest.__init__)
AttributionRequest.__signature__ = _INIT.replace(parameters=list(_INIT.parameters.values())[1:])


def _check_field_names(names: Mapping[str, object]) -> None:
    """:class:`~iglens_viz.errors.InvalidRequestError` when a keyword of the constructor or
    of :meth:`AttributionRequest.replace` is not a field: the one message naming them."""
    fields = [f.name for f in dataclasses.fields(AttributionRequest)]
    unknown = [name for name in names if name not in fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidRequestError(
            f"AttributionRequest has no field {', '.join(map(repr, unknown))}{hint}; the "
            f"fields are {', '.join(fields)}"
        )
