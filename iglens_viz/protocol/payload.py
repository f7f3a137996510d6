"""What Python sends the page: the protocol's ``result`` dict and the answers' dicts.

See ``docs/widget-protocol.md``: arrays travel as ndarray payloads (float32/int32 buffers),
token strings as plain lists (the front end inserts them as text only), everything else as
JSON scalars; a number that is not finite is null in an answer (the page's JSON has no NaN)
and NaN in an ndarray (positions without a target). Every derived value the views show —
where the answer starts, what f is called, the segment labels, the non-monotone threshold,
the onsets — comes from the result here, so the browser never re-derives it.

The answers to the page's commands are built here too (:func:`segment_ablation`,
:func:`gate_game_payload`, :func:`position_path`, :func:`components_payload`), each tagged
with the result and request it answers (:func:`answered`); the widget's command server
(:mod:`iglens_viz.widget.commands`) only runs them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..core.boundaries import depth_list
from ..core.extensions import provider
from ..core.request import MAX_STEPS
from ..core.targets import NO_TARGET, token_texts
from ..core.trajectory import NONMONOTONE_THRESHOLD
from ..errors import InvalidRequestError
from ..views.token_format import visible_text
from .serializers import array_to_payload

if TYPE_CHECKING:
    from ..core.answers import AnswerLedger
    from ..core.lens import IGLens
    from ..core.request import Estimator
    from ..core.result import AttributionResult
    from ..lenses.fit import FitProgress

__all__ = [
    "ablation_payload",
    "answered",
    "components_payload",
    "fit_payload",
    "gate_game_payload",
    "path_payload",
    "position_path",
    "result_payload",
    "segment_ablation",
]


def _texts(ids: Iterable[int], token_text: Mapping[int, str]) -> list[str]:
    return [token_text.get(int(i), "") if int(i) != NO_TARGET else "" for i in ids]


def _json_float(value: Any) -> float | None:
    """A number for JSON: a float, None where it is not finite (the page's JSON has no NaN).
    The one finite-or-null rule of every answer and ledger here."""
    value = float(value)
    return value if np.isfinite(value) else None


def _json_floats(values: ArrayLike) -> list[float | None]:
    """:func:`_json_float` of every value of ``values``, flattened."""
    return [_json_float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def result_payload(result: AttributionResult, *, result_id: str = "r0") -> dict[str, Any]:
    """The protocol's ``result`` dict of an attribution (arrays as ndarray payloads).

    ``result_id`` is its identity on the page: every answer about it (``ablation``,
    ``path``, ``components``) carries it as ``result_id``, so the page never shows an answer
    about another result. The widget gives each result it shows a new one."""
    T = len(result.input_ids)
    token_text = {int(k): str(v) for k, v in result.token_text.items()}
    contrast_ids = result.contrast_ids
    return {
        "id": str(result_id),
        "tokens": [str(t) for t in result.tokens],
        "target_tokens": [str(t) for t in result.target_tokens],
        "input_ids": array_to_payload(result.input_ids),
        "target_ids": array_to_payload(result.target_ids),
        "onset": array_to_payload(result.onset),
        "contributions": array_to_payload(result.contributions),
        "lens_probs": array_to_payload(result.lens_probs),
        "delta_p": array_to_payload(result.delta_p),
        "top_ids": array_to_payload(result.top_ids),
        "top_probs": array_to_payload(result.top_probs),
        "path_probs": None if result.path_probs is None else array_to_payload(result.path_probs),
        "token_text": {str(k): v for k, v in sorted(token_text.items())},
        "boundaries": depth_list(result.boundaries),
        "onset_segment": array_to_payload(result.onset_segment.astype(np.int32)),
        "segment_labels": result.segment_labels,
        "prompt_length": T if result.prompt_length is None else int(result.prompt_length),
        "answer_start": int(result.answer_start),
        "target_name": result.target_name,
        "nonmonotone_threshold": NONMONOTONE_THRESHOLD,
        "max_steps": MAX_STEPS,
        "estimator": str(result.estimator),
        "steps": int(result.steps),
        # The coordinates every state is read in: "logit" (the raw logit lens) or a fitted
        # lens's name, escaped as the model's name is (a saved lens's name is a file name).
        "lens": visible_text(result.lens_name, keep=""),
        # The views draw it as it is (header, exported PNG/SVG titles): escaped here once.
        "model_name": visible_text(result.model_name, keep=""),
        "family": str(result.family),
        "n_blocks": int(result.n_blocks),
        "request": result.request.to_dict(),
        "controls": result.request.controls(),
        "contrast_tokens": None if contrast_ids is None else _texts(contrast_ids, token_text),
        "components": _result_components(result),
        "lens_logprobs": _array_or_none(result.lens_logprobs),
        "answer": _ledger(result.answer),
        "versus": _ledger(result.versus),
        "comparison": _comparison(result),
        # the prompt positions that are the chat template's, not the user's text (null: the
        # prompt was not wrapped); the strip can fold them into one chip
        "template_positions": None
        if result.template_positions is None
        else [int(t) for t in result.template_positions],
    }


def _array_or_none(values: np.ndarray | None) -> dict[str, Any] | None:
    return None if values is None else array_to_payload(values)


def _ledger(ledger: AnswerLedger | None) -> dict[str, Any] | None:
    """A whole answer's ledgers (``result.answer`` / ``result.versus``), or None."""
    if ledger is None:
        return None
    return {
        "text": visible_text(ledger.text, keep=""),
        "tokens": [str(t) for t in ledger.tokens],
        "ids": array_to_payload(ledger.ids),
        "positions": array_to_payload(ledger.positions),
        "token_logprobs": array_to_payload(ledger.token_logprobs),
        "lens_logprobs": array_to_payload(ledger.lens_logprobs),
        "lens_probs": array_to_payload(ledger.lens_probs),
        "logprob_split": array_to_payload(ledger.logprob_split),
        "logprob_contributions": array_to_payload(ledger.logprob_contributions),
        "prob_contributions": array_to_payload(ledger.prob_contributions),
        "logprob": _json_float(ledger.logprob),
        "prob": _json_float(ledger.prob),
        "onset": int(ledger.onset),
        "logprob_onset": int(ledger.logprob_onset),
    }


def _comparison(result: AttributionResult) -> dict[str, Any] | None:
    """The differential ledger of the answer against ``versus``, or None."""
    comparison = result.comparison
    if comparison is None:
        return None
    return {
        "logprob_contributions": array_to_payload(comparison.logprob_contributions),
        "prob_contributions": array_to_payload(comparison.prob_contributions),
        "lens_logprob_gaps": array_to_payload(comparison.lens_logprob_gaps),
        "logprob_gap": _json_float(comparison.logprob_gap),
        "start_logprob_gap": _json_float(comparison.start_logprob_gap),
        "prob_gap": _json_float(comparison.prob_gap),
        "onset": int(comparison.onset),
        "prob_onset": int(comparison.prob_onset),
    }


def _result_components(result: AttributionResult) -> dict[str, Any] | None:
    """The result's component split at every position, or None when it has none."""
    if result.component_shares is None:
        return None
    segments = result.component_segments  # AttributeError when the split has no names
    names = result.component_names or ()  # (set whenever segments are)
    return components_payload(
        names, segments, np.arange(len(result.input_ids)), result.component_shares
    )


def components_payload(
    names: Iterable[str], segments: ArrayLike, positions: Iterable[int], shares: ArrayLike
) -> dict[str, Any]:
    """The protocol's component split at ``positions``: the C component names, the segment
    of every (block, component) ``(n, C)``, and ``shares`` ``(P, n, C)`` (NaN: not
    applicable)."""
    return {
        "names": [str(name) for name in names],
        "segments": array_to_payload(np.asarray(segments, dtype=np.int32)),
        "positions": [int(p) for p in positions],
        "shares": array_to_payload(np.asarray(shares, dtype=np.float64)),
    }


def ablation_payload(
    position: int,
    drops: ArrayLike,
    clean: float,
    labels: Sequence[str],
    *,
    parts: Sequence[str],
    target_id: int,
    contrast_id: int | None = None,
    target_name: str = "p(target)",
    mode: str = "zero",
    seconds: float = 0.0,
) -> dict[str, Any]:
    """The protocol's ``ablation`` trait: the drop of the lens value f at ``position`` when
    each segment is ablated (k numbers, plain JSON floats; None where not finite), f's clean
    value, the segment labels and what each ablation removed (``parts``: ``"block"``,
    ``"attn"`` or ``"mlp"``), the ids measured, the mode and the seconds it took."""
    values = _json_floats(drops)
    if len(values) != len(labels) or len(parts) != len(labels):
        raise ValueError(
            f"{len(values)} drops, {len(parts)} parts and {len(labels)} labels: "
            f"one of each per segment"
        )
    return {
        "position": int(position),
        "mode": str(mode),
        "drops": values,
        "clean": _json_float(clean),
        "labels": [str(label) for label in labels],
        "parts": [str(part) for part in parts],
        "target_id": int(target_id),
        "contrast_id": None if contrast_id is None else int(contrast_id),
        "target_name": str(target_name),
        "seconds": float(seconds),
    }


def path_payload(
    position: int,
    path: ArrayLike,
    terms: ArrayLike | None,
    labels: Sequence[str],
    *,
    target_id: int,
    estimator: Estimator,
    seconds: float = 0.0,
) -> dict[str, Any]:
    """The protocol's ``path`` trait: the interior path of one position, computed lazily
    (:meth:`IGLens.interior_path`). ``path`` is ``(k, m+1)``: f along each segment at
    α = 0, 1/m, …, 1; ``terms`` ``(k, m)``: the midpoint Riemann terms, or None. Plain JSON
    lists of floats (None where not finite), the segment labels (for the fit check), the
    target id, the shown result's estimator and the seconds it took."""
    points = np.asarray(path, dtype=np.float64)
    if points.ndim != 2 or points.shape[0] != len(labels) or points.shape[1] < 2:
        raise ValueError(
            f"path must be (k, m+1) with k = {len(labels)} segments, got {points.shape}"
        )
    rows = [_json_floats(row) for row in points]
    term_rows = None
    if terms is not None:
        riemann = np.asarray(terms, dtype=np.float64)
        if riemann.shape != (points.shape[0], points.shape[1] - 1):
            raise ValueError(
                f"terms must be (k, m) = {(points.shape[0], points.shape[1] - 1)}, "
                f"got {riemann.shape}"
            )
        term_rows = [_json_floats(row) for row in riemann]
    return {
        "position": int(position),
        "steps": int(points.shape[1] - 1),
        "path": rows,
        "terms": term_rows,
        "labels": [str(label) for label in labels],
        "target_id": int(target_id),
        "estimator": str(estimator),
        "seconds": float(seconds),
    }


# ------------------------------------------------------------------ the commands' answers


def answered(payload: Mapping[str, Any], *, result_id: str, request_id: str) -> dict[str, Any]:
    """An answer trait's value (``ablation``, ``gates``, ``path``, ``components``):
    ``payload`` with the id of the result it is about and of the request it answers (``""``
    for a notebook call), so the page never shows it beside another result."""
    return {**payload, "result_id": result_id, "request_id": request_id}


def fit_payload(report: FitProgress) -> dict[str, Any]:
    """``running["fit"]``: a lens fit's progress as the page shows it (its phase, count and
    time left; see :class:`iglens_viz.lenses.FitProgress`)."""
    left = report.remaining_seconds
    return {
        "kind": report.kind,
        "phase": report.phase,
        "done": report.done,
        "total": report.total,
        "unit": report.unit,
        "remaining_s": None if left is None else round(left, 1),
        "resumed_at": report.resumed_at,
    }


_DIGITS = re.compile(r"[0-9]+")


def segment_ablation(
    engine: IGLens,
    result: AttributionResult,
    position: int,
    *,
    mode: str = "zero",
    positions: str = "target",
    counterfactual: str | Sequence[int] | None = None,
    contrast: int | str | None = None,
) -> dict[str, Any]:
    """The causal check of one token as the protocol's ``ablation`` dict
    (:func:`ablation_payload`, plus ``positions``, ``direct`` and ``patching``): the drop of
    the lens value f at ``position`` when each segment of ``result`` is zero-ablated (its
    total effect, at ``positions``), its direct effect, and with a ``counterfactual`` prompt
    the patching effects; see :func:`iglens_viz.causal.check.check_segments` (the causal
    package sits above the protocol: the package's top level registers it, as it registers
    the views for the core)."""
    if mode != "zero":
        raise InvalidRequestError(f"the causal check zero-ablates (mode 'zero'), got {mode!r}")
    if isinstance(contrast, str) and _DIGITS.fullmatch(contrast):
        contrast = int(contrast)  # typed digits are an id, as in the controls
    done = provider("check_segments")(
        engine.model,
        engine.tokenizer,
        result,
        position,
        positions=positions,
        counterfactual=counterfactual,
        contrast=contrast,
    )
    payload = ablation_payload(
        done.position,
        done.drops,
        done.clean,
        result.segment_labels,
        parts=done.parts,
        target_id=done.target_id,
        contrast_id=done.contrast_id,
        target_name=result.target_name,
        mode=mode,
        seconds=done.seconds,
    )
    cf = done.counterfactual
    text = {} if cf is None else token_texts(engine.tokenizer, cf.prompt_ids, [cf.contrast_id])
    return {
        **payload,
        "positions": done.positions,
        "direct": _json_floats(done.direct),
        "patching": None
        if cf is None
        else {
            "metric": "logit_diff",
            "direction": "noising",
            "positions": "target",
            "prompt": _prompt_text(counterfactual),
            "tokens": [text[int(i)] for i in cf.prompt_ids],
            "contrast_id": cf.contrast_id,
            "contrast": text[cf.contrast_id],
            "total": _json_floats(cf.total),
            "direct": _json_floats(cf.direct),
            "clean_metric": _json_float(cf.clean_metric),
            "corrupt_metric": _json_float(cf.corrupt_metric),
            "normalized": bool(cf.normalized),
            "warnings": [str(w) for w in cf.warnings],
        },
    }


def _prompt_text(prompt: str | Sequence[int] | None) -> str:
    if prompt is None or isinstance(prompt, str):
        return prompt or ""
    return " ".join(str(int(i)) for i in prompt)


def gate_game_payload(
    engine: IGLens,
    result: AttributionResult,
    position: int,
    counterfactual: str | None,
    *,
    steps: int = 16,
) -> dict[str, Any]:
    """The block-gate game at ``position`` of ``result`` as the protocol's ``gates`` dict:
    :meth:`GateLedger.to_dict <iglens_viz.causal.gates.GateLedger.to_dict>` of the game
    against ``counterfactual`` (a question formed as the result's prompt is: the same chat
    template, then the result's answer with the subject swapped), its target the result's at
    ``position``, plus ``prompt`` (as typed), ``answer_opening`` (the counterfactual's answer
    from its start to ``position``, decoded; "" for a position in the prompt) and
    ``seconds``."""
    if counterfactual is None or not counterfactual.strip():
        raise InvalidRequestError(
            "the gate game needs a counterfactual: the same question about another subject, "
            "as many tokens long (e.g. 'What is the capital of Italy?')"
        )
    T = len(result.input_ids)
    if not 0 <= int(position) < T or int(result.target_ids[position]) < 0:
        raise InvalidRequestError(
            f"position {position} has no target in this result of {T} tokens: pick a token "
            f"whose next token is predicted"
        )
    start = time.perf_counter()
    length = result.prompt_length or T
    ledger = engine.gate_ledger(
        result.request.prompt,
        counterfactual,
        chat=result.request.chat,
        answer=result.input_ids[length:].tolist() or None,
        position=int(position),
        target=int(result.target_ids[position]),
        steps=steps,
    )
    # the counterfactual answer's opening up to the position, as the tokenizer writes it
    opening = [int(i) for i in (ledger.corrupt_ids if ledger.corrupt_ids is not None else [])]
    opening = opening[ledger.prompt_length : ledger.position + 1]
    decode = getattr(engine.tokenizer, "decode", None)
    answer_text = (
        decode(opening, clean_up_tokenization_spaces=False)
        if decode is not None
        else "".join(ledger.token_text.get(i, "") for i in opening)
    )
    return {
        **ledger.to_dict(),
        "prompt": counterfactual,
        "answer_opening": answer_text,
        "seconds": time.perf_counter() - start,
    }


def position_path(
    engine: IGLens, result: AttributionResult, position: int, steps: int = 8
) -> dict[str, Any]:
    """The interior path of ``result`` at ``position`` as the protocol's ``path`` dict
    (:func:`path_payload`): f along each segment at ``steps`` interpolation steps, and the
    midpoint Riemann terms when the result's estimator is ``riemann``; see
    :meth:`IGLens.interior_path`."""
    start = time.perf_counter()
    riemann = result.request.estimator == "riemann"
    out = engine.interior_path(result, position, steps=steps, terms=riemann)
    path, terms = out if riemann else (out, None)
    return path_payload(
        int(position) % len(result.input_ids),
        path,
        terms,
        result.segment_labels,
        target_id=int(result.target_ids[position]),
        estimator=result.request.estimator,
        seconds=time.perf_counter() - start,
    )
