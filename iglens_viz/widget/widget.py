"""The IG-Lens notebook widget: token strip, layer heatmap and detail panel, linked in JS.

One anywidget model carries the state (see ``docs/widget-protocol.md``): the attribution as
``result``, the shared selection and hover, and Python's answers. Linking lives in the
browser, so it survives the static HTML export (:func:`iglens_viz.export.to_html`).

When a kernel can compute (the widget was given its ``IGLens``), the page sends commands
as custom messages — recompute, cancel, the causal check, the interior path, the head split
— declared in :mod:`iglens_viz.protocol.commands`; the widget's command server
(:mod:`iglens_viz.widget.commands`) runs them, answering each with one envelope, and the
answers' dicts are built in :mod:`iglens_viz.protocol.payload`. This class holds the synced
traits, checks the page's writes, keeps the notes and offers the same work as methods
(:meth:`IGLensWidget.ask`, :meth:`~IGLensWidget.causal_check`, …). A recompute replays the
shown result's :class:`~iglens_viz.core.request.AttributionRequest` with the fields the
controls changed (:meth:`AttributionRequest.with_controls`): the engine finds its cached
forward pass, so nothing is re-derived here.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import numpy as np
import traitlets
from typing_extensions import Unpack

from ..core.request import TARGET_KEYWORDS
from ..errors import IGLensError, InvalidRequestError
from ..protocol import DEFAULT_STATE, PAGE_WRITABLE, STATE_KEYS, initial_state, result_payload
from ..protocol.bundle import BUNDLE_CSS, BUNDLE_JS, MISSING_BUNDLE
from ..protocol.notes import check_notes, make_note
from ..protocol.opening import payload_opening
from ..protocol.payload import (
    answered,
    components_payload,
    gate_game_payload,
    position_path,
    segment_ablation,
)
from ..protocol.serializers import to_base64_state
from .commands import CommandServer, RecomputeCancelled

if TYPE_CHECKING:
    from ..core.lens import IGLens
    from ..core.request import AttributeOptions, AttributionRequest, PromptSpec
    from ..core.result import AttributionResult
    from ..protocol import ColorBy

# RecomputeCancelled (iglens_viz.widget.commands) and the answers' builders
# (iglens_viz.protocol.payload) are importable from here, where they were first defined.
__all__ = [
    "ASK_NEW_TOKENS",
    "IGLensWidget",
    "InvalidTraitError",
    "PAGE_WRITABLE",
    "RecomputeCancelled",
    "gate_game_payload",
    "position_path",
    "segment_ablation",
    "show",
]

# The traits the page writes (js/views: strip, heatmap and context select/hover, the colour
# select, the view tabs, the compare view's pins) are PAGE_WRITABLE, derived from the
# direction of each value in iglens_viz.protocol.state.STATE; its commands are messages.
# Every other synced trait is Python's answer or Python's own state (and anywidget's and
# ipywidgets' own traits): an update from the page that writes one of those is refused, so
# exports always carry what Python computed.

ASK_NEW_TOKENS = 24
"""The answer a new question generates when the shown request had a teacher-forced one
(``answer=``) and no ``max_new_tokens`` (see :meth:`IGLensWidget.ask_request`)."""

_TRAIT_TYPES: dict[str, type[traitlets.TraitType[Any, Any]]] = {
    "int": traitlets.Int,
    "float": traitlets.Float,
    "bool": traitlets.Bool,
    "str": traitlets.Unicode,
    "dict": traitlets.Dict,
    "list": traitlets.List,
}


def _trait(name: str) -> Any:
    """The synced trait of the state value ``name`` (:data:`iglens_viz.protocol.STATE`): its
    type (an Enum for a ``str`` with choices), default (a fresh copy of a dict or list) and
    docstring as ``help``."""
    key = STATE_KEYS[name]
    default = copy.deepcopy(key.default)
    if key.choices:
        trait: traitlets.TraitType[Any, Any] = traitlets.Enum(
            key.choices, default_value=default, help=key.doc
        )
    else:
        trait = _TRAIT_TYPES[key.kind](default_value=default, help=key.doc)
    return trait.tag(sync=True)


_MISSING_BUNDLE_ESM = f"""
export default {{ render({{ el }}) {{
  const p = document.createElement("pre");
  p.textContent = "iglens_viz: " + {json.dumps(MISSING_BUNDLE)};
  el.appendChild(p);
}} }};
"""


def _bundle(path: Path, fallback: str) -> Path | str:
    # anywidget reads a Path when the class is created and fails if the file is missing;
    # a checkout without a built bundle still imports, and the widget says what to do.
    return path if path.is_file() else fallback


class IGLensWidget(anywidget.AnyWidget):
    """Linked views of an IG-Lens attribution: token strip, layer heatmap, detail panel.

    Parameters
    ----------
    result:
        The :class:`~iglens_viz.core.result.AttributionResult` to show. May be None when
        ``iglens`` and ``text_or_ids`` are given: it is then computed with
        ``iglens.attribute(text_or_ids, **options)``.
    iglens:
        The :class:`~iglens_viz.core.lens.IGLens` that produced ``result``. With it the
        widget is *interactive*: its controls (target, contrast, boundaries, estimator,
        steps) recompute on the same token ids, reusing the engine's cached forward pass.
    text_or_ids:
        The input, only needed when ``result`` is None.
    selected:
        The initially selected position (-1: none; default: the answer's first content
        token, see :func:`iglens_viz.protocol.opening.opening_position`).
    color_by:
        The token-strip statistic: ``"p_final"``, ``"delta_p"``, ``"onset"`` or ``"nonmonotone"``.
    **options:
        The keywords of :meth:`IGLens.attribute`
        (:class:`~iglens_viz.core.request.AttributeOptions`) when ``result`` is computed
        here (``lens=`` among them: the coordinates the states are read in).

    Notes
    -----
    The synced traits below are readable (and settable) from Python: ``w.selected`` follows
    clicks in the browser, ``w.result`` holds the protocol dict of the shown attribution and
    :attr:`attribution` the matching :class:`AttributionResult`.
    """

    _esm = _bundle(BUNDLE_JS, _MISSING_BUNDLE_ESM)
    _css = _bundle(BUNDLE_CSS, "")

    # The synced traits, each built from its declaration in iglens_viz.protocol.state.STATE
    # (type, default, direction, docstring as the trait's help): ``IGLensWidget.selected.help``
    # or ``iglens_viz.protocol.STATE_KEYS["selected"].doc`` tells what a trait means.
    result = _trait("result")
    selected = _trait("selected")
    hovered = _trait("hovered")
    color_by = _trait("color_by")
    interactive = _trait("interactive")
    running = _trait("running")
    cached_lenses = _trait("cached_lenses")
    components = _trait("components")
    ablation = _trait("ablation")
    gates = _trait("gates")
    path = _trait("path")
    view = _trait("view")
    pinned = _trait("pinned")
    template = _trait("template")
    notes = _trait("notes")
    comparison = _trait("comparison")
    progress = _trait("progress")

    threaded: bool | None = None
    """Run recomputes (and the prompt box's questions) in a background thread, so that the
    kernel hears a Cancel while one runs. None (the default): whenever this process runs an
    IPython kernel — also for the page's requests, which arrive in a comm handler outside
    any cell — or a marimo notebook or app; False: always in the caller's thread (tests,
    scripts). Read by the command server (:func:`iglens_viz.widget.commands.runs_threaded`)."""

    # ------------------------------------------------------------------ page writes

    def _position_range(self, name: str, value: Any) -> int:
        T = len(self._attribution.input_ids)
        if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < T:
            raise InvalidTraitError(
                f"{name}={value!r} is not a position of this result: use -1 (none) or 0 … {T - 1}"
            )
        return value

    @traitlets.validate("selected")
    def _valid_selected(self, proposal: Mapping[str, Any]) -> int:
        return self._position_range("selected", proposal["value"])

    @traitlets.validate("hovered")
    def _valid_hovered(self, proposal: Mapping[str, Any]) -> int:
        return self._position_range("hovered", proposal["value"])

    @traitlets.validate("pinned")
    def _valid_pinned(self, proposal: Mapping[str, Any]) -> list[list[int]]:
        lengths = [len(self.result.get("tokens") or ())] + [
            len(r.get("tokens") or ())
            for r in (self.comparison or {}).get("results") or ()
            if isinstance(r, dict)
        ]
        pins = []
        for pin in proposal["value"]:
            pair = [0, pin] if isinstance(pin, int) else pin  # a bare i is [0, i], as in JS
            ok = (
                isinstance(pair, (list, tuple))
                and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
                and 0 <= pair[0] < len(lengths)
                and 0 <= pair[1] < lengths[pair[0]]
            )
            if not ok:
                raise InvalidTraitError(
                    f"pin {pin!r} names no position: use [r, i] with r in "
                    f"0 … {len(lengths) - 1} (0 = the result, r ≥ 1 its "
                    f"comparison's results) and i a position of result r"
                )
            pins.append([int(pair[0]), int(pair[1])])
        return pins

    @traitlets.validate("notes")
    def _valid_notes(self, proposal: Mapping[str, Any]) -> list[dict[str, Any]]:
        try:
            positions, blocks = self._note_bounds()
            return check_notes(proposal["value"], positions=positions, blocks=blocks)
        except InvalidRequestError as err:
            raise InvalidTraitError(str(err)) from None

    def _note_bounds(self) -> tuple[int, int]:
        """The result's positions and blocks: the ranges a note's position and block take."""
        a = self._attribution
        return len(a.input_ids), int(a.n_blocks)

    def add_note(self, text: str, *, position: int | None = None, block: int | None = None) -> int:
        """Pin a teacher note to ``position`` (a position of the result), ``block`` (a depth
        0 … n) or both; the student view shows it as a callout, the strip marks its position,
        and :meth:`to_html` keeps it. The text (at most 500 characters) is shown as text.
        Returns the note's index in :attr:`notes`; raises :class:`InvalidTraitError` for a
        blank or long text, a position or block out of range, or a note pinned nowhere."""
        try:
            positions, blocks = self._note_bounds()
            note = make_note(
                text, position=position, block=block, positions=positions, blocks=blocks
            )
        except InvalidRequestError as err:
            raise InvalidTraitError(str(err)) from None
        self.notes = [*self.notes, note]
        return len(self.notes) - 1

    def remove_note(self, index: int) -> dict[str, Any]:
        """Remove the note at ``index`` of :attr:`notes` and return it."""
        notes = list(self.notes)
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not -len(notes) <= index < len(notes)
        ):
            raise InvalidTraitError(
                f"no note {index!r}: this widget has {len(notes)} note(s)"
                + (f", indices 0 … {len(notes) - 1}" if notes else "")
            )
        note = notes.pop(index)
        self.notes = notes
        return note

    def set_state(self, sync_data: Any) -> None:
        """Apply an update from the page (ipywidgets calls this for every ``update`` message).

        Only the traits in :data:`PAGE_WRITABLE` are taken, each validated as a Python
        assignment is; a refused value leaves its trait as it was, and the page is sent
        Python's value back. Never raises for a bad value (it would leave the comm handler
        with half an update)."""
        refused = {}
        accepted = {}
        for name, value in sync_data.items() if isinstance(sync_data, dict) else ():
            if name not in self.keys:
                continue  # ipywidgets ignores these too
            if name not in PAGE_WRITABLE:
                refused[name] = "only Python writes it"
                continue
            try:
                from_json = self.trait_metadata(name, "from_json", self._trait_from_json)
                self.traits()[name]._validate(self, from_json(value, self))
            except traitlets.TraitError as err:
                refused[name] = str(err)
            else:
                accepted[name] = value
        with self._sync_lock:
            if accepted:
                try:
                    super().set_state(accepted)
                except traitlets.TraitError as err:  # rolled back whole by traitlets
                    refused.update(dict.fromkeys(accepted, str(err)))
            if refused:
                self.log.warning(
                    "IGLensWidget: refused the page's %s",
                    "; ".join(f"{k}: {v}" for k, v in refused.items()),
                )
                self.send_state(sorted(refused))

    def __init__(
        self,
        result: AttributionResult | None = None,
        iglens: IGLens | None = None,
        text_or_ids: PromptSpec | None = None,
        *,
        selected: int | None = None,
        color_by: ColorBy = DEFAULT_STATE["color_by"],
        **options: Unpack[AttributeOptions],
    ) -> None:
        if result is None:
            if iglens is None or text_or_ids is None:
                raise TypeError(
                    "IGLensWidget needs a result, or an IGLens and text_or_ids to compute one"
                )
            result = iglens.attribute(text_or_ids, **options)
        elif options:
            raise TypeError(
                f"unexpected keyword arguments {sorted(options)}: "
                f"attribute() arguments are only used when result is None"
            )
        if iglens is not None and int(iglens.n_blocks) != int(result.n_blocks):
            raise IGLensError(
                f"the IGLens's model has {iglens.n_blocks} blocks but the result "
                f"was computed on {result.n_blocks}: pass the IGLens that "
                f"produced it"
            )
        self._engine = iglens
        self._attribution = result
        self._shown = itertools.count(1)  # the n of the result id "r<n>"
        # Held by page updates (kernel thread) and the background worker's updates and
        # answers: ipywidgets keeps the sync bookkeeping (hold_sync, property locks) per
        # widget, not per thread.
        self._sync_lock = threading.RLock()
        state = initial_state(
            result_payload(result, result_id=self._next_result_id()),
            selected=selected,
            color_by=color_by,
            interactive=iglens is not None,
        )
        super().__init__(**state)
        self._server = CommandServer(self, self._sync_lock)  # the page's commands, cancel
        self._server.show_cached_lenses()

    def __repr__(self) -> str:
        a = self._attribution
        return (
            f"IGLensWidget({len(a.input_ids)} tokens, {len(a.boundaries) - 1} segments, "
            f"interactive={self.interactive})"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view (anywidget's bundle) and beside it ``image/png``, a static picture
        of the current view (:mod:`iglens_viz.widget.fallback`) for where no widget manager
        runs: GitHub, nbviewer, offline nbconvert HTML. Jupyter front ends rank the widget
        view first. A picture that fails to render is left out (logged), never the widget;
        one the caller excludes (``display(w, exclude=["image/png"])``, as the Voilà app
        does) is not drawn at all, which spares the kernel matplotlib."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if "image/png" in (kwargs.get("exclude") or ()):
            return data, metadata
        try:
            import base64

            from .fallback import fallback_png

            png = base64.b64encode(fallback_png(self)).decode("ascii")
        except Exception as err:  # the picture is optional; the widget must show
            self.log.warning("IGLensWidget: no static picture in the output (%r)", err)
            return data, metadata
        return {**data, "image/png": png}, metadata

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        """The traits' serialized state; under Colab with every binary buffer as base64 text
        (the page decodes it, js/model/codec.js). Colab's widget manager drops the binary buffers
        of the model's ``comm_open`` (googlecolab/colab-cdn-widget-manager#33), which carry
        this widget's whole payload: sent as buffers there, the page would get none."""
        state = super().get_state(key, drop_defaults)
        return to_base64_state(state) if _in_colab() else state

    @property
    def attribution(self) -> AttributionResult:
        """The :class:`AttributionResult` currently shown."""
        return self._attribution

    @property
    def engine(self) -> IGLens | None:
        """The :class:`IGLens` that recomputes requests (None when not interactive)."""
        return self._engine

    @property
    def lens(self) -> IGLens | None:
        """Deprecated name of :attr:`engine` ("lens" names a fitted
        :class:`~iglens_viz.core.coordinates.Lens`; the :class:`IGLens` is the engine)."""
        warnings.warn(
            "IGLensWidget.lens is now IGLensWidget.engine (a 'lens' is a Lens)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._engine

    @property
    def result_id(self) -> str:
        """The id of the shown result (``result["id"]``): what every answer about it names."""
        return str(self.result.get("id", ""))

    def to_html(
        self, path: str | os.PathLike[str] | None = None, *, title: str | None = None
    ) -> str:
        """A self-contained HTML page of the current view; see
        :func:`iglens_viz.export.to_html`. The selection and colouring are kept."""
        from ..export.html import to_html

        return to_html(self, path, title=title)

    def save_png(self, path: str | os.PathLike[str]) -> Path:
        """Write a picture of the current view to ``path`` as PNG and return the path: the
        heatmap around the selection beside the selected token's detail, drawn in Python (the
        static picture of the widget's output, :mod:`iglens_viz.widget.fallback`). For where
        the page's PNG button cannot download: an output frame that blocks downloads (a
        sandboxed iframe without ``allow-downloads``) says so and names this method."""
        from .fallback import fallback_png

        out = Path(path).expanduser()
        out.write_bytes(fallback_png(self))
        return out

    def save_svg(self, path: str | os.PathLike[str]) -> Path:
        """:meth:`save_png`'s picture as SVG (vectors) at ``path``; returns the path."""
        from .fallback import fallback_svg

        out = Path(path).expanduser()
        out.write_bytes(fallback_svg(self))
        return out

    def _next_result_id(self) -> str:
        return f"r{next(self._shown)}"

    def _require_engine(self, what: str) -> IGLens:
        if self._engine is None:
            raise IGLensError(
                f"{what} needs the model: this widget has no IGLens; build it with "
                f"IGLensWidget(result, iglens) or iglens_viz.widget.show(...)"
            )
        return self._engine

    # ------------------------------------------------------------------ commands

    def dispatch(self, message: Any) -> dict[str, Any] | None:
        """Run one command from the page (see :mod:`iglens_viz.protocol.commands`) and send
        its answer envelope to the page; the widget's command server
        (:mod:`iglens_viz.widget.commands`) runs it.

        Returns the envelope when the command is done on return, or None when it runs in
        the background thread (its envelope is sent when it ends). Never raises for a bad
        message or a failed command: the envelope says what went wrong (an unexpected error
        also goes to the kernel's log)."""
        return self._server.dispatch(message)

    def cancel(self) -> None:
        """Stop the running recompute or question at its next block of a forward pass
        (generation included) or chunk of points (the old result stays)."""
        self._server.cancel()

    def ask_request(
        self, prompt: str, *, versus: str | None = None, max_new_tokens: int | None = None
    ) -> AttributionRequest:
        """The request of a new question ``prompt`` in this widget: the shown result's
        request with the prompt replaced and what belongs to the old question dropped.

        Kept: ``chat``, ``max_new_tokens`` (the answer is generated as before, unless
        ``max_new_tokens`` is given: the prompt box's answer length), the boundaries,
        estimator, steps, lens and head split, and a keyword target (``"predicted"``,
        ``"next"``; a token target becomes ``"predicted"``). Dropped: the contrast, a
        teacher-forced ``answer`` (a request that had one generates up to
        :data:`ASK_NEW_TOKENS` tokens instead) and ``versus`` (replaced by ``versus``).
        An :class:`~iglens_viz.errors.InvalidRequestError` for a bad prompt."""
        old = self._attribution.request
        keyword = isinstance(old.target, str) and old.target in TARGET_KEYWORDS
        target = old.target if keyword else "predicted"
        if max_new_tokens is None:
            max_new_tokens = old.max_new_tokens or (ASK_NEW_TOKENS if old.answer is not None else 0)
        return old.replace(
            prompt=prompt,
            target=target,
            contrast=None,
            answer=None,
            versus=versus or None,
            max_new_tokens=max_new_tokens,
        )

    def ask(
        self, prompt: str, *, versus: str | None = None, max_new_tokens: int | None = None
    ) -> AttributionResult:
        """Ask a new question in this widget and show its result: what the page's prompt
        box does (the ``ask`` command), in the caller's thread. The request is
        :meth:`ask_request`'s (the answer generated as the shown request does, or
        ``max_new_tokens`` long).

        Returns the new :class:`AttributionResult`. Errors propagate; the old result stays.

        >>> w.ask("What is the capital of France?")     # doctest: +SKIP
        """
        engine = self._require_engine("asking a new question")
        self._server.refuse_while_running()
        self._server.cancelled.clear()
        try:
            request = self.ask_request(prompt, versus=versus, max_new_tokens=max_new_tokens)
            return self._server.run_ask(engine, request)
        finally:
            with self._sync_lock:
                self.progress = -1.0

    def recompute(self, **changes: Any) -> AttributionResult:
        """Replay the shown result's request with some fields changed (``target``,
        ``contrast``, ``boundaries``, ``estimator``, ``steps``, … as in
        :meth:`IGLens.attribute`) and show the new result.

        Returns the new :class:`AttributionResult`. Errors propagate (the page's
        ``recompute`` command gets them in its answer instead).
        """
        engine = self._require_engine("recomputing")
        new = engine.run(self._attribution.request.replace(**changes))
        self._show(new)
        return new

    def _show(self, result: AttributionResult) -> None:
        payload = result_payload(result, result_id=self._next_result_id())
        same_ids = np.array_equal(result.input_ids, self._attribution.input_ids)
        with self._sync_lock, self.hold_sync():
            self._attribution = result
            self.result = payload
            if not same_ids:
                # a new question: its notes and pins were about the old tokens (a recompute
                # keeps them; pins on a comparison's other results stay), and it opens on its
                # point, as a new widget does
                self.notes = []
                self.pinned = [pin for pin in self.pinned if pin[0] != 0]
                self.hovered = -1
                self.selected = payload_opening(payload)
            self.path = {}
            self.components = {}
            self.ablation = {}
            self.gates = {}

    # ------------------------------------------------------------------ answers by token

    def causal_check(
        self,
        token: int | None = None,
        positions: str = "target",
        counterfactual: str | Sequence[int] | None = None,
        contrast: int | str | None = None,
        *,
        request_id: str = "",
    ) -> dict[str, Any]:
        """The causal check of one token of the shown result: what each segment does to the
        lens value f at position ``token`` (default: the selected one), set beside its
        IG-Lens contribution; see :func:`segment_ablation`.

        Parameters
        ----------
        token:
            The position checked (its target is the answer; the passes run on the ids up to
            it, so it is the last, answer, position).
        positions:
            Where each segment is zero-ablated for its **total** effect (the drop of f with
            the rest of the forward pass running): ``"target"`` (default: the answer
            position only) or ``"all"`` (every position). The **direct** effect (later
            blocks frozen: f(h_n) − f(h_n − Δ) with Δ the segment's update at the answer
            position, a readout only) is computed either way.
        counterfactual:
            A corrupt prompt (text or ids) of the same token length as the clean prompt up
            to ``token`` (or as the whole input): adds the normalised noising patching
            effects (:func:`iglens_viz.causal.patch`, positions ``"target"``, total and
            direct, metric ``logit_diff``) of each block. None: no patching.
        contrast:
            The counterfactual prompt's answer token (an id, digits, or a one-token string);
            None: the model's top-1 at the corrupt prompt's answer position.

        Sets :attr:`ablation` (the browser draws both effects, and the patching effects,
        beside the contributions) and returns it. Errors propagate (the page's ``ablation``
        command gets them in its answer instead).
        """
        engine = self._require_engine("the causal check")
        position = self.selected if token is None else token
        payload = answered(
            segment_ablation(
                engine,
                self._attribution,
                position,
                positions=positions,
                counterfactual=counterfactual,
                contrast=contrast,
            ),
            result_id=self.result_id,
            request_id=request_id,
        )
        with self._sync_lock:
            self.ablation = payload
        return payload

    def gate_game(
        self,
        token: int | None = None,
        counterfactual: str | None = None,
        *,
        steps: int = 16,
        request_id: str = "",
    ) -> dict[str, Any]:
        """The block-gate game of one token of the shown result (default: the selected one)
        against ``counterfactual``, the same question about another subject ("What is the
        capital of Italy?"): where its answer becomes readable, where the answer-specific
        information arrives (patching) and each block's shared credit, one chart in
        probability units; see :func:`gate_game_payload` and :func:`iglens_viz.gate_ledger`.

        Sets :attr:`gates` and returns it. Errors propagate (the page's ``gates`` command
        gets them in its answer instead).
        """
        engine = self._require_engine("the gate game")
        position = self.selected if token is None else token
        payload = answered(
            gate_game_payload(engine, self._attribution, position, counterfactual, steps=steps),
            result_id=self.result_id,
            request_id=request_id,
        )
        with self._sync_lock:
            self.gates = payload
        return payload

    def interior_path(
        self, position: int | None = None, steps: int = 8, *, request_id: str = ""
    ) -> dict[str, Any]:
        """Compute the interior path of one position of the shown result (default: the
        selected one) at ``steps`` interpolation steps, and show it in the detail panel.

        Sets :attr:`path` and returns it (see :func:`position_path`). Errors propagate (the
        page's ``path`` command gets them in its answer instead).
        """
        engine = self._require_engine("the interior path")
        position = self.selected if position is None else position
        payload = answered(
            position_path(engine, self._attribution, position, steps),
            result_id=self.result_id,
            request_id=request_id,
        )
        with self._sync_lock:
            self.path = payload
        return payload

    def split_components(
        self, position: int | None = None, *, request_id: str = ""
    ) -> dict[str, Any]:
        """Split one position's contributions (default: the selected one) over heads, MLPs
        and the remainder, and show it in the detail panel's heads section.

        Milliseconds once the engine holds the head outputs; the first call on a prompt runs
        the model once. Sets :attr:`components` and returns it (``{}`` when the result
        carries its own split). Errors propagate (the page's ``components`` command gets
        them in its answer instead)."""
        engine = self._require_engine("the head split")
        result = self._attribution
        position = self.selected if position is None else position
        if result.component_shares is not None:
            return {}
        if not -len(result.input_ids) <= position < len(result.input_ids):
            raise InvalidRequestError(
                f"position {position} is not a position of this result: use 0 … "
                f"{len(result.input_ids) - 1}"
            )
        if result.target_ids[position] < 0:
            raise InvalidRequestError(f"position {position} has no target to split")
        row = int(position) % len(result.input_ids)
        split = engine.with_components(result, [row])  # its names: `coordinate` under a lens
        shares, names = split.component_shares, split.component_names or []
        assert shares is not None  # with_components always splits: (T, n, C), NaN but at row
        payload = answered(
            components_payload(names, split.component_segments, [row], shares[[row]]),
            result_id=self.result_id,
            request_id=request_id,
        )
        with self._sync_lock:
            self.components = payload
        return payload


def _in_colab() -> bool:
    """Whether this kernel runs in Google Colab (``google.colab.output`` imported, as
    anywidget's ``in_colab`` asks); looked up, not imported."""
    return "google.colab.output" in sys.modules


class InvalidTraitError(InvalidRequestError, traitlets.TraitError):
    """A widget trait was given a value it cannot take (a position out of range, a pin
    that names no position). Raised by Python assignments; the page's writes are refused
    instead (:meth:`IGLensWidget.set_state`)."""


def show(
    model_or_engine: Any,
    tokenizer: Any = None,
    text_or_ids: PromptSpec | None = None,
    *,
    selected: int | None = None,
    color_by: ColorBy = DEFAULT_STATE["color_by"],
    name: str | None = None,
    **options: Unpack[AttributeOptions],
) -> IGLensWidget:
    """Attribute ``text_or_ids`` and return an interactive :class:`IGLensWidget`.

    ``model_or_engine`` is a model (an :class:`IGLens` is built over it with ``tokenizer``)
    or an existing :class:`IGLens` (its cached forward passes are reused). The remaining
    keyword arguments go to :meth:`IGLens.attribute`
    (:class:`~iglens_viz.core.request.AttributeOptions`: ``target``, ``contrast``,
    ``boundaries`` — a list or a spec such as ``"every:5"`` —, ``steps``, ``estimator``,
    ``chat``, ``max_new_tokens``, …). ``name`` is the model's name in the header and the
    exported page and figures (see :class:`IGLens`; give it to the IGLens you pass instead).

    >>> w = show(*iglens_viz.load_model(), "What is the capital of Vietnam?",
    ...          chat=True, max_new_tokens=12)          # doctest: +SKIP
    >>> w                                                 # doctest: +SKIP
    """
    from ..core import IGLens

    if text_or_ids is None:
        raise TypeError("show() needs the text (or token ids) to attribute")
    if isinstance(model_or_engine, IGLens):
        engine = model_or_engine
        if tokenizer is not None and tokenizer is not engine.tokenizer:
            raise IGLensError(
                "pass either an IGLens or a model and its tokenizer, not an "
                "IGLens with another tokenizer"
            )
        if name is not None:
            raise IGLensError(
                "this IGLens already has its name: pass name= to IGLens(model, tokenizer, name=...)"
            )
    else:
        engine = IGLens(model_or_engine, tokenizer, name=name)
    return IGLensWidget(None, engine, text_or_ids, selected=selected, color_by=color_by, **options)
