"""The IG-Lens notebook widget: token strip, layer heatmap and detail panel, linked in JS.

One anywidget model carries everything (see ``docs/widget-protocol.md``): the attribution as
``result``, the shared selection and hover, and — when a kernel can recompute — the
controls' ``request`` answered by a new ``result``. Linking lives in the browser, so it
survives the static HTML export (:func:`iglens_viz.export.to_html`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import anywidget
import numpy as np
import traitlets

from .bundle import BUNDLE_CSS, BUNDLE_JS, MISSING_BUNDLE
from .payload import result_payload

__all__ = ["IGLensWidget", "show"]

COLOR_BY = ("p_final", "delta_p", "onset")

_MISSING_BUNDLE_ESM = """
export default { render({ el }) {
  const p = document.createElement("pre");
  p.textContent = "iglens_viz: " + %s;
  el.appendChild(p);
} };
""" % json.dumps(MISSING_BUNDLE)

_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*")


def _bundle(path: Path, fallback: str):
    # anywidget reads a Path when the class is created and fails if the file is missing;
    # a checkout without a built bundle still imports, and the widget says what to do.
    return path if path.is_file() else fallback


class IGLensWidget(anywidget.AnyWidget):
    """Linked views of an IG-Lens attribution: token strip, layer heatmap, detail panel.

    Parameters
    ----------
    result:
        The :class:`~iglens_viz.core.result.AttributionResult` to show. May be None when
        ``lens`` and ``text_or_ids`` are given: it is then computed with
        ``lens.attribute(text_or_ids, **attribute_kwargs)``.
    lens:
        The :class:`~iglens_viz.core.lens.IGLens` that produced ``result``. With it the
        widget is *interactive*: its controls (target, contrast, boundaries, estimator,
        steps) recompute on the same token ids, reusing the lens's cached forward pass.
    text_or_ids:
        The input, only needed when ``result`` is None.
    selected:
        The initially selected position (-1: none).
    color_by:
        The token-strip statistic: ``"p_final"``, ``"delta_p"`` or ``"onset"``.
    target_spec, contrast_spec, boundary_spec:
        What produced ``result``, as the controls show it (inferred when omitted).
    **attribute_kwargs:
        Arguments of :meth:`IGLens.attribute` when ``result`` is computed here.

    The synced traits below are readable (and settable) from Python: ``w.selected`` follows
    clicks in the browser, ``w.result`` holds the protocol dict of the shown attribution and
    :attr:`attribution` the matching :class:`AttributionResult`.
    """

    _esm = _bundle(BUNDLE_JS, _MISSING_BUNDLE_ESM)
    _css = _bundle(BUNDLE_CSS, "")

    result = traitlets.Dict().tag(sync=True)
    """The shown attribution as the protocol's ``result`` dict (arrays as ndarray payloads:
    ``{"dtype", "shape", "buffer"}``, float32/int32). Replaced whole on every recompute.
    """

    selected = traitlets.Int(-1).tag(sync=True)
    """The selected position, -1 for none. Set by clicks and arrow keys in the browser, and
    settable from Python; every view follows it.
    """

    hovered = traitlets.Int(-1).tag(sync=True)
    """The hovered position, -1 for none (a transient preview; set by the browser)."""

    color_by = traitlets.Enum(COLOR_BY, default_value="p_final").tag(sync=True)
    """The token-strip colouring: the final target probability ``"p_final"``, the total
    change ``"delta_p"``, or the ``"onset"`` layer.
    """

    interactive = traitlets.Bool(False).tag(sync=True)
    """True when this kernel can recompute (the widget was given its ``IGLens``): the
    controls are enabled. False for a plain result and in static exports.
    """

    request = traitlets.Dict().tag(sync=True)
    """Written by the browser's controls: ``{target, contrast, boundaries, estimator,
    steps}`` as typed (``boundaries`` is a spec: ``all``, ``every:K`` or ``0,10,20,30``).
    Python answers with a new ``result``, or with ``error``.
    """

    busy = traitlets.Bool(False).tag(sync=True)
    """True while Python recomputes a request."""

    error = traitlets.Unicode("").tag(sync=True)
    """The last request's error message ("" when it succeeded); the old result stays."""

    def __init__(self, result=None, lens=None, text_or_ids=None, *, selected: int = -1,
                 color_by: str = "p_final", target_spec: str | None = None,
                 contrast_spec: str | None = None, boundary_spec: str | None = None,
                 **attribute_kwargs):
        if result is None:
            if lens is None or text_or_ids is None:
                raise TypeError("IGLensWidget needs a result, or an IGLens and text_or_ids "
                                "to compute one")
            result = lens.attribute(text_or_ids, **attribute_kwargs)
            specs = _specs_from_kwargs(attribute_kwargs)
            target_spec = specs["target"] if target_spec is None else target_spec
            contrast_spec = specs["contrast"] if contrast_spec is None else contrast_spec
            boundary_spec = specs["boundaries"] if boundary_spec is None else boundary_spec
        elif attribute_kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(attribute_kwargs)}: "
                            f"attribute() arguments are only used when result is None")
        if lens is not None and int(lens.n_blocks) != int(result.n_blocks):
            raise ValueError(f"the lens's model has {lens.n_blocks} blocks but the result "
                             f"was computed on {result.n_blocks}: pass the IGLens that "
                             f"produced it")
        T = len(result.input_ids)
        if isinstance(selected, bool) or not -1 <= int(selected) < T:
            raise ValueError(f"selected={selected!r} must be -1 (none) or a position "
                             f"0 … {T - 1}")
        self._lens = lens
        self._attribution = result
        self._input_ids = np.asarray(result.input_ids).copy()
        self._prompt_length = result.prompt_length
        payload = result_payload(result, target_spec=target_spec, contrast_spec=contrast_spec,
                                 boundary_spec=boundary_spec)
        super().__init__(result=payload, selected=int(selected), color_by=color_by,
                         interactive=lens is not None)
        self.observe(self._on_request, names="request")

    def __repr__(self) -> str:
        a = self._attribution
        return (f"IGLensWidget({len(a.input_ids)} tokens, {len(a.boundaries) - 1} segments, "
                f"interactive={self.interactive})")

    @property
    def attribution(self):
        """The :class:`AttributionResult` currently shown."""
        return self._attribution

    @property
    def lens(self):
        """The :class:`IGLens` that recomputes requests (None when not interactive)."""
        return self._lens

    def to_html(self, path=None, *, title: str | None = None) -> str:
        """A self-contained HTML page of the current view; see
        :func:`iglens_viz.export.to_html`. The selection and colouring are kept."""
        from ..export.html import to_html

        return to_html(self, path, title=title)

    # ------------------------------------------------------------------ recompute

    def _on_request(self, change) -> None:
        request = change["new"]
        if not request or self._lens is None:
            return
        self.busy = True
        try:
            kwargs, specs = parse_request(request, self._lens.n_blocks)
            new = self._recompute(**kwargs)
            payload = result_payload(new, target_spec=specs["target"],
                                     contrast_spec=specs["contrast"],
                                     boundary_spec=specs["boundaries"])
        except (ValueError, TypeError) as err:
            with self.hold_sync():
                self.error = str(err)
                self.busy = False
            return
        except Exception as err:  # unexpected: say so in the view, and in the kernel log
            with self.hold_sync():
                self.error = f"{type(err).__name__}: {err}"
                self.busy = False
            raise
        self._attribution = new
        with self.hold_sync():
            self.result = payload
            self.error = ""
            self.busy = False

    def recompute(self, **kwargs):
        """Recompute on the same token ids with new :meth:`IGLens.attribute` arguments
        (``target``, ``contrast``, ``boundaries``, ``estimator``, ``steps``) and show it.

        Returns the new :class:`AttributionResult`. Errors propagate (unlike requests from
        the browser, which land in :attr:`error`).
        """
        if self._lens is None:
            raise RuntimeError("this widget has no IGLens to recompute with; build it with "
                               "IGLensWidget(result, lens) or iglens_viz.widget.show(...)")
        new = self._recompute(**kwargs)
        specs = _specs_from_kwargs(kwargs)
        self._attribution = new
        with self.hold_sync():
            self.result = result_payload(new, target_spec=specs["target"],
                                         contrast_spec=specs["contrast"],
                                         boundary_spec=specs["boundaries"])
            self.error = ""
        return new

    def _recompute(self, *, target="predicted", contrast=None, boundaries=None,
                   estimator="prediction_aware", steps=1):
        import torch

        lens = self._lens
        ids = torch.as_tensor(self._input_ids, dtype=torch.long)
        # Recompute on exactly the shown ids (prompt, chat template and generated answer):
        # the lens finds its cached forward pass. "predicted" along the generated answer is
        # the token that was generated, as in the original call.
        target = self._predicted_ids(ids) if _is(target, "predicted") else target
        contrast = self._predicted_ids(ids) if _is(contrast, "predicted") else contrast
        new = lens.attribute(ids, target=target, contrast=contrast, boundaries=boundaries,
                             steps=steps, estimator=estimator)
        return dataclasses.replace(new, prompt_length=self._prompt_length)

    def _predicted_ids(self, ids):
        predicted = self._lens.trace(ids).predicted.cpu().numpy().astype(np.int64)
        start = self._prompt_length
        if start is not None and start < len(predicted):
            predicted[start - 1:-1] = self._input_ids[start:]
        return predicted


def _is(value, word: str) -> bool:
    return isinstance(value, str) and value == word


def _token_spec(value, what: str, *, optional: bool):
    """A target/contrast as typed in the controls → an :meth:`IGLens.attribute` argument."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None if optional else "predicted"
    if isinstance(value, bool):
        raise TypeError(f"{what} must be text or a token id, not a boolean")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (int, np.integer)):
        ident = int(value)
    elif isinstance(value, str):
        if value.strip() in ("predicted", "next"):
            return value.strip()
        if not _INT_TEXT.fullmatch(value):
            return value  # a token string, exactly as typed (a leading space matters)
        ident = int(value)
    else:
        raise TypeError(f"{what} must be 'predicted', 'next', a token id or a token "
                        f"string; got {type(value).__name__}")
    if ident < 0:
        raise ValueError(f"{what} token id must be >= 0, got {ident}")
    return ident


def parse_request(request: dict, n_blocks: int) -> tuple[dict, dict]:
    """The controls' ``request`` → (:meth:`IGLens.attribute` kwargs, the specs as text).

    Raises ValueError/TypeError for anything the user typed wrong.
    """
    from ..core.boundaries import boundaries_from_spec, parse_boundaries

    if not isinstance(request, dict):
        raise TypeError(f"request must be a dict, got {type(request).__name__}")
    target = _token_spec(request.get("target"), "target", optional=False)
    contrast = _token_spec(request.get("contrast"), "contrast", optional=True)
    spec = request.get("boundaries")
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        spec = "all"
    if isinstance(spec, str):
        boundaries = boundaries_from_spec(spec, n_blocks)
    elif isinstance(spec, (list, tuple)):
        boundaries = parse_boundaries(list(spec), n_blocks)
        spec = ",".join(str(b) for b in boundaries)
    else:
        raise TypeError(f"boundaries must be a spec such as 'all', 'every:5' or "
                        f"'0,10,{n_blocks}'; got {type(spec).__name__}")
    estimator = request.get("estimator") or "prediction_aware"
    if not isinstance(estimator, str):
        raise TypeError(f"estimator must be text, got {type(estimator).__name__}")
    steps = request.get("steps", 1)
    if steps is None or (isinstance(steps, str) and not steps.strip()):
        steps = 1
    if isinstance(steps, float) and steps.is_integer():
        steps = int(steps)
    if isinstance(steps, str):
        if not _INT_TEXT.fullmatch(steps):
            raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
        steps = int(steps)
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise TypeError(f"steps must be an integer >= 1, got {steps!r}")
    if steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps}")
    kwargs = dict(target=target, contrast=contrast, boundaries=boundaries,
                  estimator=estimator.strip(), steps=steps)
    specs = dict(target=_spec_text(request.get("target"), "predicted"),
                 contrast=_spec_text(request.get("contrast"), ""),
                 boundaries=spec.strip() if isinstance(spec, str) else spec)
    return kwargs, specs


def _spec_text(value, default: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _specs_from_kwargs(kwargs: dict) -> dict:
    """Control specs (text) of :meth:`IGLens.attribute` arguments, where they have one."""
    target = kwargs.get("target", "predicted")
    contrast = kwargs.get("contrast")
    bounds = kwargs.get("boundaries")

    def token(value, default):
        if value is None:
            return default
        if isinstance(value, (str, int, np.integer)) and not isinstance(value, bool):
            return str(value)
        return None  # a per-position sequence: inferred from the result

    return dict(target=token(target, "predicted"), contrast=token(contrast, ""),
                boundaries="all" if bounds is None else (
                    bounds if isinstance(bounds, str) else None))


def show(model_or_lens, tokenizer=None, text_or_ids=None, *, selected: int = -1,
         color_by: str = "p_final", **attribute_kwargs) -> IGLensWidget:
    """Attribute ``text_or_ids`` and return an interactive :class:`IGLensWidget`.

    ``model_or_lens`` is a model (an :class:`IGLens` is built over it with ``tokenizer``)
    or an existing :class:`IGLens` (its cached forward passes are reused). The remaining
    keyword arguments go to :meth:`IGLens.attribute` (``target``, ``contrast``,
    ``boundaries``, ``steps``, ``estimator``, ``chat``, ``max_new_tokens``); ``boundaries``
    may also be a spec string (``"every:5"``).

    >>> w = show(*iglens_viz.load_model(), "What is the capital of Vietnam?",
    ...          chat=True, max_new_tokens=12)          # doctest: +SKIP
    >>> w                                                 # doctest: +SKIP
    """
    from ..core import IGLens
    from ..core.boundaries import boundaries_from_spec

    if text_or_ids is None:
        raise TypeError("show() needs the text (or token ids) to attribute")
    if isinstance(model_or_lens, IGLens):
        lens = model_or_lens
        if tokenizer is not None and tokenizer is not lens.tokenizer:
            raise ValueError("pass either an IGLens or a model and its tokenizer, not an "
                             "IGLens with another tokenizer")
    else:
        lens = IGLens(model_or_lens, tokenizer)
    bounds = attribute_kwargs.get("boundaries")
    boundary_spec = None
    if isinstance(bounds, str):
        boundary_spec = bounds.strip()
        attribute_kwargs["boundaries"] = boundaries_from_spec(bounds, lens.n_blocks)
    result = lens.attribute(text_or_ids, **attribute_kwargs)
    specs = _specs_from_kwargs(attribute_kwargs)
    return IGLensWidget(result, lens, selected=selected, color_by=color_by,
                        target_spec=specs["target"], contrast_spec=specs["contrast"],
                        boundary_spec=boundary_spec or specs["boundaries"])
