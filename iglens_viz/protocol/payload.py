"""An :class:`~iglens_viz.core.result.AttributionResult` as the protocol's ``result`` dict.

See ``docs/widget-protocol.md``: arrays travel as ndarray payloads (float32/int32 buffers),
token strings as plain lists (the front end inserts them as text only), everything else as
JSON scalars. NaN marks positions without a target. Every derived value the views show —
where the answer starts, what f is called, the segment labels, the non-monotone threshold,
the onsets — comes from the result here, so the browser never re-derives it.
"""

from __future__ import annotations

import numpy as np

from ..core.boundaries import depth_list
from ..core.request import MAX_STEPS
from ..core.targets import NO_TARGET
from ..core.trajectory import NONMONOTONE_THRESHOLD
from .serializers import array_to_payload

__all__ = ["components_payload", "result_payload"]


def _texts(ids, token_text) -> list[str]:
    return [token_text.get(int(i), "") if int(i) != NO_TARGET else "" for i in ids]


def result_payload(result) -> dict:
    """The protocol's ``result`` dict of an attribution (arrays as ndarray payloads)."""
    T = len(result.input_ids)
    token_text = {int(k): str(v) for k, v in result.token_text.items()}
    contrast_ids = result.contrast_ids
    return {
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
        "model_name": str(result.model_name),
        "family": str(result.family),
        "n_blocks": int(result.n_blocks),
        "request": result.request.to_dict(),
        "controls": result.request.controls(),
        "contrast_tokens": None if contrast_ids is None else _texts(contrast_ids, token_text),
        "components": None if result.component_shares is None else components_payload(
            result.component_names, result.component_segments, np.arange(T),
            result.component_shares),
    }


def components_payload(names, segments, positions, shares) -> dict:
    """The protocol's component split at ``positions``: the C component names, the segment
    of every (block, component) ``(n, C)``, and ``shares`` ``(P, n, C)`` (NaN: not
    applicable)."""
    return {
        "names": [str(name) for name in names],
        "segments": array_to_payload(np.asarray(segments, dtype=np.int32)),
        "positions": [int(p) for p in positions],
        "shares": array_to_payload(np.asarray(shares, dtype=np.float64)),
    }
