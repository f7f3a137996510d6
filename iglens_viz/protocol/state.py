"""The front-end model's state, declared once (:data:`STATE`): each synced value's type,
default, direction and meaning, behind the widget's traits, :data:`DEFAULT_STATE`, the
standalone page's defaults and the protocol doc's trait table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..errors import InvalidRequestError
from .opening import payload_opening

__all__ = [
    "COLOR_BY",
    "DEFAULT_STATE",
    "PAGE_WRITABLE",
    "STATE",
    "STATE_KEYS",
    "TEMPLATE_MODES",
    "VIEWS",
    "ColorBy",
    "Direction",
    "Kind",
    "StateKey",
    "TemplateMode",
    "View",
    "initial_state",
]

ColorBy = Literal["p_final", "delta_p", "onset", "nonmonotone"]
"""A token-strip colouring; see :data:`COLOR_BY`."""
COLOR_BY: tuple[ColorBy, ...] = get_args(ColorBy)
"""Token-strip colourings: final target probability, net change Δp, onset block, and how
much of the trajectory moves against Δp (the largest opposing segment as a share of the
token's largest |contribution|; 0 for a monotone token)."""

View = Literal["heatmap", "grid", "compare", "lesson"]
"""A tab of the main view; see :data:`VIEWS`."""
VIEWS: tuple[View, ...] = get_args(View)
"""The main view's tabs: the layer heatmap, the logit-lens grid, the compare view, and the
student view ``"lesson"`` (one answer's curve in percent and the lens column, walked block by
block)."""

TemplateMode = Literal["auto", "folded", "shown"]
"""Whether the strip folds the chat template; see :data:`TEMPLATE_MODES`."""
TEMPLATE_MODES: tuple[TemplateMode, ...] = get_args(TemplateMode)
"""The ``template`` switch: fold the chat template's positions in the student view only
(``"auto"``), in every view (``"folded"``), or never (``"shown"``)."""


Direction = Literal["to_page", "to_kernel", "both"]
"""Who writes a synced value: Python only (``"to_page"``: the kernel's answer or its own
state), the page only (``"to_kernel"``: a wish Python answers), or either (``"both"``)."""

Kind = Literal["int", "float", "bool", "str", "dict", "list"]
"""The JSON type of a synced value (a ``str`` with ``choices`` is an enumeration)."""


@dataclass(frozen=True)
class StateKey:
    """One synced value of the front-end model: the one declaration behind the widget's
    trait, :data:`DEFAULT_STATE`, the page's defaults (``js/model/protocol.js``, generated) and
    the trait table of ``docs/widget-protocol.md`` (tests/protocol/test_state_contract.py checks
    that all four agree)."""

    name: str
    kind: Kind
    default: Any
    direction: Direction
    doc: str
    choices: tuple[str, ...] = ()
    """The values a ``str`` may take (empty: any string)."""
    initial: bool = False
    """In :data:`DEFAULT_STATE`: part of every exported page's state. The others start
    empty and are Python's lazy answers (or the page's wishes), left out of exports."""

    @property
    def page_writes(self) -> bool:
        """The page may write this value (it is a wish, or shared view state)."""
        return self.direction != "to_page"


STATE: tuple[StateKey, ...] = (
    StateKey(
        "result",
        "dict",
        {},
        "to_page",
        """The shown attribution as the protocol's ``result`` dict (arrays as ndarray payloads:
    ``{"dtype", "shape", "buffer"}``, float32/int32), with its ``id``. Replaced whole, with
    a new ``id``, on every recompute.""",
    ),
    StateKey(
        "selected",
        "int",
        -1,
        "both",
        """The selected position, -1 for none. Set by clicks and arrow keys in the browser,
    and settable from Python; every view follows it.""",
        initial=True,
    ),
    StateKey(
        "hovered",
        "int",
        -1,
        "both",
        "The hovered position, -1 for none (a transient preview; set by the browser).",
        initial=True,
    ),
    StateKey(
        "color_by",
        "str",
        "p_final",
        "both",
        """The token-strip colouring: the final target probability ``"p_final"``, the total
    change ``"delta_p"``, the ``"onset"`` layer, or ``"nonmonotone"`` (how much of the
    trajectory moves against Δp).""",
        choices=COLOR_BY,
        initial=True,
    ),
    StateKey(
        "interactive",
        "bool",
        False,
        "to_page",
        """True when this kernel can recompute (the widget was given its ``IGLens``): the
    controls are enabled. False for a plain result and in static exports. The page also needs a
    live kernel: it asks ``hello`` first.""",
        initial=True,
    ),
    StateKey(
        "running",
        "dict",
        {},
        "to_page",
        """The command running in the background: ``{"id": request id, "command":
    "recompute" | "ask" | "ablation" | "gates"}``, or ``{}`` when none runs. The page shows it
    as busy and names it when it cancels (see ``iglens_viz.protocol.commands``). While a
    recompute or question fits a lens on its first use, ``"fit"`` adds its progress:
    ``{"kind", "phase": "corpus" | "states" | "fit", "done", "total", "unit",
    "remaining_s": seconds or null, "resumed_at"}`` (``iglens_viz.lenses.FitProgress``).""",
        initial=True,
    ),
    StateKey(
        "cached_lenses",
        "list",
        [],
        "to_page",
        """The fitted lens kinds (``"shortcut"``, ``"tuned"``, ``"jacobian"``) whose default
    fit for this widget's model is in the cache: choosing one of the others fits it first,
    minutes on a CPU, which the controls say before Apply. Set by an interactive widget and
    after each recompute or question; ``[]`` otherwise.""",
    ),
    StateKey(
        "components",
        "dict",
        {},
        "to_page",
        """The component split (heads, MLP, remainder) of the selected position, computed by
    Python when the selection changes in an interactive widget whose result has none:
    ``{names, segments, positions, shares}`` as in the result's ``components``, plus the
    ``result_id`` and ``request_id`` it answers; ``{}`` before and after every new result
    (the page's ``components`` command asks for it; an error is in the command's answer).
    Exported pages carry it when it belongs to the shown result.""",
    ),
    StateKey(
        "ablation",
        "dict",
        {},
        "to_page",
        """The causal check of one token (``segment_ablation``): ``{position, mode, drops,
    clean, labels, parts, target_id, contrast_id, target_name, seconds, positions, direct,
    patching, result_id, request_id}`` — ``drops`` the total effects, ``direct`` the direct
    ones, ``patching`` null or the counterfactual patching effects (docs/widget-protocol.md)
    —, ``{}`` before the first check and after every new result (the page's
    ``ablation`` command asks for it; an error is in the command's answer). Kept when the
    selection moves (the browser shows it for its result and position only); exported by
    ``to_html``.""",
    ),
    StateKey(
        "gates",
        "dict",
        {},
        "to_page",
        """The block-gate game of one token (``IGLensWidget.gate_game``): the ledger's
    ``GateLedger.to_dict()`` — ``{position, target_id, target, baseline, steps, labels,
    boundaries, start, end, total, start_reference, end_reference, readable, entries,
    corners, diagonal_values, riemann, sentences, plain_sentences, prompt_length, tokens,
    corrupt_tokens}`` — plus ``prompt`` (the counterfactual as typed), ``answer_opening`` (its
    answer's opening up to the position, the subject swapped), ``seconds``,
    ``result_id`` and ``request_id``; ``{}`` before the first game and after every new result
    (the page's ``gates`` command asks for it; an error is in the command's answer). Kept
    when the selection moves (the browser shows it for its result and position only);
    exported by ``to_html``.""",
    ),
    StateKey(
        "path",
        "dict",
        {},
        "to_page",
        """The interior path of one position (``IGLens.interior_path``): ``{position, steps,
    path, terms, labels, target_id, estimator, seconds}`` (``path`` ``(k, m+1)`` lists,
    ``terms`` the ``(k, m)`` midpoint Riemann terms when the result's estimator is
    ``riemann``, else null; null stands for a non-finite value) plus ``result_id`` and
    ``request_id``, ``{}`` before the first ``path`` command and after every new result.
    Computed lazily (milliseconds, no model run); the page draws it in the detail's chart
    (b) when the result has no ``path_probs``, for its result and ``position`` only.""",
    ),
    StateKey(
        "view",
        "str",
        "heatmap",
        "both",
        """The main view's tab: the layer ``"heatmap"``, the logit-lens ``"grid"`` (top-1 lens
    token per block and position), ``"compare"`` (pinned curves, results side by side) or
    the student view ``"lesson"`` (the answer's probability in percent after each block, the
    selected position's lens column and the output's top 5, a walk through the blocks). Set
    by the browser's tabs and settable from Python; ``iglens_viz.compare`` opens on
    ``"compare"``; exported pages keep it.""",
        choices=VIEWS,
        initial=True,
    ),
    StateKey(
        "pinned",
        "list",
        [],
        "both",
        """The compare view's pins: ``[r, i]`` pairs (result r — 0 for ``result``, r ≥ 1 for
    ``comparison["results"][r - 1]`` — and position i) whose cumulative curves are overlaid.
    Set by the browser (pin buttons, clicks in the compare view) and settable from Python.
    The page ignores pairs that name no result, a position out of range or one without a
    target (leftovers of another result), keeps the first 8 and reads a bare int i as
    ``[0, i]``.""",
        initial=True,
    ),
    StateKey(
        "template",
        "str",
        "auto",
        "both",
        """Whether the token strip folds the chat template's positions (the result's
    ``template_positions``: system prompt, role markers, the assistant's header) into one
    chip per run: ``"auto"`` folds them in the student view only, ``"folded"`` in every
    view, ``"shown"`` in none. Positions and numbers are unchanged (the arrow keys step over
    a folded run), and positions from ``answer_start`` on never fold. Set by the strip's
    switch (shown when the result has template positions; the folded chips are
    ``.iglens-template-fold`` with ``data-fold-start``/``data-fold-end``) and a click on a
    folded chip, and settable from Python; exported pages keep it.""",
        choices=TEMPLATE_MODES,
        initial=True,
    ),
    StateKey(
        "notes",
        "list",
        [],
        "both",
        """Teacher notes: ``{"text", "position"}``, ``{"text", "block"}`` or all three keys
    (``position`` 0 … T − 1, ``block`` a depth 0 … n; text at most 500 characters, at most
    50 notes). Python checks every write (``iglens_viz.protocol.notes.check_notes``: an
    ``InvalidTraitError`` naming the bad entry; the page's bad write is refused) and clears
    them when a new result has other tokens. The student view shows the notes of its
    position (and the position-free block notes) as callouts (``[data-note-index]``, text
    only) with an editor to add and remove them; the strip marks noted positions
    (``.iglens-token-noted``). Settable from Python (``IGLensWidget.add_note(text,
    position=, block=)``, ``remove_note(i)``); exported by ``to_html``.""",
        initial=True,
    ),
    StateKey(
        "comparison",
        "dict",
        {},
        "to_page",
        """Further results shown beside ``result`` on one colour scale
    (``iglens_viz.compare``): ``{labels, results, limit}`` — one label per result, the other
    results' protocol dicts, and the shared colour limit (the largest |contribution| of all
    results) and ``result_id``, the id of the ``result`` they are compared with — or ``{}``
    for one result.""",
    ),
    StateKey(
        "progress",
        "float",
        -1.0,
        "to_page",
        """The running recompute's progress, 0 … 1 (the share of interior points done, or of
    the current phase of a lens fit, see ``running``), -1 when no recompute runs or none
    reports progress (a steps = 1 prediction-aware request has no interior points).""",
    ),
)
"""Every synced value of the model, in the widget's declaration order."""

STATE_KEYS: dict[str, StateKey] = {key.name: key for key in STATE}
""":data:`STATE` by name."""

DEFAULT_STATE: dict[str, Any] = {key.name: key.default for key in STATE if key.initial}
"""The synced values every exported page carries (all but ``result`` and Python's lazy
answers and the page's wishes that start empty), as a new widget or an exported page
starts."""

PAGE_WRITABLE: frozenset[str] = frozenset(key.name for key in STATE if key.page_writes)
"""The values the page may write: its wishes and the shared view state. An update from the
page that writes any other is refused, so exports always carry what Python computed."""


def initial_state(
    payload: dict[str, Any],
    *,
    selected: int | None = None,
    color_by: ColorBy | None = None,
    interactive: bool = False,
) -> dict[str, Any]:
    """The model state that shows ``payload``: :data:`DEFAULT_STATE` with the given values.

    ``selected`` defaults to where a reader looks first (:func:`.opening.payload_opening`):
    the answer's first content token — the first answer position whose target does not
    occur among the prompt's tokens — else the first position that predicts the answer,
    else the last position.
    """
    T = len(payload["tokens"])
    if selected is None:
        selected = payload_opening(payload)
    if isinstance(selected, bool) or not isinstance(selected, int) or not -1 <= selected < T:
        raise InvalidRequestError(
            f"selected={selected!r} must be -1 (none) or a position 0 … {T - 1}"
        )
    color_by = DEFAULT_STATE["color_by"] if color_by is None else color_by
    if color_by not in COLOR_BY:
        raise InvalidRequestError(f"color_by={color_by!r}: choose one of {', '.join(COLOR_BY)}")
    return {
        **DEFAULT_STATE,
        "result": payload,
        "selected": selected,
        "color_by": color_by,
        "interactive": bool(interactive),
    }
