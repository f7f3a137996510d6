"""An :class:`~iglens_viz.core.result.AttributionResult` as the protocol's ``result`` dict.

See ``docs/widget-protocol.md``: arrays travel as ndarray payloads (float32/int32 buffers),
token strings as plain lists (the front end inserts them as text only), everything else as
JSON scalars. NaN marks positions without a target.
"""

from __future__ import annotations

import numpy as np

from .serializers import array_to_payload

__all__ = ["boundary_spec_of", "contrast_spec_of", "result_payload", "target_spec_of"]

NO_TARGET = -1


def _uniform_id(ids) -> int | None:
    """The single id used at every position that has one, else None."""
    ids = np.asarray(ids).reshape(-1)
    used = ids[ids != NO_TARGET]
    if used.size and (used == used[0]).all():
        return int(used[0])
    return None


def target_spec_of(result) -> str:
    """A best guess at the ``target`` argument behind a result (prefills the controls).

    ``"next"`` when the targets are the text's next tokens, the id (as digits) when one id is
    used everywhere, otherwise ``"predicted"``.
    """
    ids = np.asarray(result.target_ids).reshape(-1)
    inputs = np.asarray(result.input_ids).reshape(-1)
    if len(ids) >= 2 and ids[-1] == NO_TARGET and np.array_equal(ids[:-1], inputs[1:]):
        return "next"
    uniform = _uniform_id(ids)
    if uniform is not None and len(ids) > 1 and ids[-1] != NO_TARGET:
        return str(uniform)
    return "predicted"


def contrast_spec_of(result) -> str:
    """The contrast as a spec: "" for none, the id as digits when it is one id everywhere."""
    if result.contrast_ids is None:
        return ""
    uniform = _uniform_id(result.contrast_ids)
    return str(uniform) if uniform is not None else "predicted"


def boundary_spec_of(result) -> str:
    """``"all"`` when every block is a boundary, else the comma list."""
    bounds = [int(b) for b in result.boundaries]
    if result.n_blocks and bounds == list(range(result.n_blocks + 1)):
        return "all"
    return ",".join(str(b) for b in bounds)


def _texts(ids, token_text) -> list[str]:
    return [token_text.get(int(i), "") if int(i) != NO_TARGET else "" for i in ids]


def result_payload(result, *, target_spec: str | None = None,
                   contrast_spec: str | None = None,
                   boundary_spec: str | None = None) -> dict:
    """The protocol's ``result`` dict of an attribution (arrays as ndarray payloads).

    The ``*_spec`` arguments record what produced the result (they prefill the widget's
    controls); when omitted they are inferred from the result.
    """
    T = len(result.input_ids)
    token_text = {int(k): str(v) for k, v in result.token_text.items()}
    prompt_length = T if result.prompt_length is None else int(result.prompt_length)
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
        "boundaries": [int(b) for b in result.boundaries],
        "prompt_length": prompt_length,
        "estimator": str(result.estimator),
        "steps": int(result.steps),
        "model_name": str(result.model_name),
        "family": str(result.family),
        "n_blocks": int(result.n_blocks),
        "target_spec": target_spec_of(result) if target_spec is None else str(target_spec),
        "contrast_spec": contrast_spec_of(result) if contrast_spec is None else str(contrast_spec),
        "boundary_spec": boundary_spec_of(result) if boundary_spec is None else str(boundary_spec),
        "contrast_tokens": None if contrast_ids is None else _texts(contrast_ids, token_text),
    }
