"""Several attributions side by side on one colour scale: :func:`compare`.

Two prompts, one prompt with two targets (or contrasts, boundaries, estimators): each
:class:`~iglens_viz.core.result.AttributionResult` becomes a panel of the widget's compare
view, every panel coloured with the same diverging scale — its limit is the largest
|contribution| of all the results (:func:`shared_limit`) — so equal colours mean equal
contributions. Pinned positions overlay their cumulative contribution curves on one chart.

The widget is the usual :class:`~iglens_viz.widget.IGLensWidget`: the first result is its
``result`` (the token strip, heatmap, grid and detail panel show it), the others travel in
its ``comparison`` trait (:func:`comparison_payload`, see ``docs/widget-protocol.md``), and
``widget.to_html(path)`` exports all of them in one offline page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidRequestError
from ..protocol.opening import opening_position
from ..views.token_format import format_token

if TYPE_CHECKING:
    from ..core.result import AttributionResult
    from ..protocol import View
    from .widget import IGLensWidget

__all__ = ["compare", "comparison_payload", "default_labels", "default_pins", "shared_limit"]


def _check(results: Iterable[object]) -> list[AttributionResult]:
    from ..core.result import AttributionResult

    given = list(results)
    if len(given) < 2:
        raise InvalidRequestError(f"compare() needs at least two results, got {len(given)}")
    checked = []
    for q, r in enumerate(given):
        if not isinstance(r, AttributionResult):
            raise InvalidRequestError(
                f"compare(): argument {q + 1} is a {type(r).__name__}, "
                f"not an AttributionResult (from iglens_viz.attribute)"
            )
        checked.append(r)
    return checked


def shared_limit(results: Iterable[AttributionResult]) -> float:
    """The colour limit every panel shares: max |contribution| over all the results (NaN
    ignored; 1.0 when every contribution is 0), the same rule as one heatmap's limit."""
    vmax = 0.0
    for r in results:
        c = np.asarray(r.contributions, dtype=np.float64)
        finite = np.abs(c[np.isfinite(c)])
        if finite.size:
            vmax = max(vmax, float(finite.max()))
    return vmax if vmax > 0 else 1.0


def _prompt_text(r: AttributionResult) -> str:
    prompt = r.request.prompt
    if isinstance(prompt, str):
        return prompt
    return "".join(str(t) for t in r.tokens[: min(len(r.tokens), int(r.answer_start) + 1)])


def default_labels(results: Iterable[AttributionResult]) -> list[str]:
    """One short label per result, naming what differs: the prompt when the prompts differ,
    else the target (and contrast), else the estimator, steps and boundaries."""
    given = list(results)
    prompts = [_prompt_text(r) for r in given]
    if len(set(prompts)) > 1:
        return [format_token(p, max_len=60, all_spaces=False) for p in prompts]
    controls = [r.request.controls() for r in given]
    targets = [
        f"target: {c['target']}" + (f" vs {c['contrast']}" if c["contrast"] else "")
        for c in controls
    ]
    if len(set(targets)) > 1:
        return targets
    return [f"{c['estimator']}, m={c['steps']}, boundaries {c['boundaries']}" for c in controls]


def default_pins(results: Iterable[AttributionResult]) -> list[list[int]]:
    """Each result's opening position (``[r, i]`` pairs, the ``pinned`` trait's form), as a
    widget opens (:func:`iglens_viz.protocol.opening.opening_position`): the answer's first
    content token, else its first answer position, else its last one that has a target."""
    pins = []
    for q, r in enumerate(results):
        has = (np.asarray(r.target_ids) >= 0).tolist()
        i = opening_position(list(r.tokens), list(r.target_tokens), int(r.answer_start), has)
        if i >= 0 and has[i]:
            pins.append([q, int(i)])
    return pins


def comparison_payload(
    results: Iterable[AttributionResult],
    labels: Iterable[object] | None = None,
    *,
    result_id: str = "r0",
) -> dict[str, Any]:
    """The ``comparison`` trait of a widget that shows ``results[0]`` as its result
    ``result_id``: one label per result, the protocol dicts of ``results[1:]`` (ids ``c1``,
    ``c2``, …) and the shared colour limit."""
    from ..protocol import result_payload

    checked = _check(results)
    names = default_labels(checked) if labels is None else [str(x) for x in labels]
    if len(names) != len(checked):
        raise InvalidRequestError(
            f"{len(names)} labels for {len(checked)} results: give one label per result"
        )
    return {
        "labels": names,
        "results": [result_payload(r, result_id=f"c{q}") for q, r in enumerate(checked[1:], 1)],
        "limit": shared_limit(checked),
        "result_id": str(result_id),
    }


def compare(
    *results: AttributionResult,
    labels: Iterable[object] | None = None,
    pinned: Iterable[Sequence[int]] | None = None,
    view: View = "compare",
    selected: int | None = None,
) -> IGLensWidget:
    """Show two or more attributions side by side, on one colour scale.

    ``compare(a, b)`` for two prompts, or for one prompt attributed twice (two targets, a
    target and a contrast, two boundary specs…). Returns an
    :class:`~iglens_viz.widget.IGLensWidget` that opens on its compare view: one panel per
    result (positions × segments, coloured with the shared limit :func:`shared_limit`, the
    largest |contribution| of all of them) and the cumulative contribution curves of the
    pinned positions on shared axes. The first result also fills the token strip, heatmap,
    logit-lens grid and detail panel. ``widget.to_html(path)`` writes all of it to one
    offline page.

    Parameters
    ----------
    *results:
        Two or more :class:`~iglens_viz.core.result.AttributionResult`.
    labels:
        One label per result (default :func:`default_labels`: the prompts when they differ,
        else the targets, else the estimator settings).
    pinned:
        ``[r, i]`` pairs (result r, position i) whose curves to overlay (default
        :func:`default_pins`: each result's first answer position, else its last one).
    view:
        The opening tab: ``"compare"`` (default), ``"heatmap"`` or ``"grid"``.
    selected:
        The position selected in the first result (default: its opening position).

    Examples
    --------
    >>> a = iglens_viz.attribute(model, tok, "The capital of France is")      # doctest: +SKIP
    >>> b = iglens_viz.attribute(model, tok, "The capital of Italy is")       # doctest: +SKIP
    >>> w = iglens_viz.compare(a, b); w                                       # doctest: +SKIP
    >>> w.to_html("capitals.html")                                            # doctest: +SKIP
    """
    from ..protocol import VIEWS
    from .widget import IGLensWidget

    checked = _check(results)
    if view not in VIEWS:
        raise InvalidRequestError(f"view={view!r}: choose one of {', '.join(VIEWS)}")
    pins = default_pins(checked) if pinned is None else [[int(r), int(i)] for r, i in pinned]
    for r, i in pins:
        if not (0 <= r < len(checked) and 0 <= i < len(checked[r].input_ids)):
            raise InvalidRequestError(
                f"pin [{r}, {i}] names no position: result r in 0 … "
                f"{len(checked) - 1}, position i within that result"
            )
    widget = IGLensWidget(checked[0], selected=selected)
    payload = comparison_payload(checked, labels, result_id=widget.result_id)
    with widget.hold_sync():
        widget.comparison = payload
        widget.pinned = pins
        widget.view = view
    return widget
