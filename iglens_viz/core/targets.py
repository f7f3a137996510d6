"""Resolving the ``target`` / ``contrast`` arguments into one token id per position."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import InvalidRequestError
from .request import normalize_target

NO_TARGET = -1
"""Marks a position without a target (the last position under ``target="next"``)."""


def token_id_of(token: str, tokenizer) -> int:
    """The id of a single-token string; a clear error showing its tokenisation otherwise."""
    if tokenizer is None:
        raise InvalidRequestError(f"the target {token!r} is a string, which needs a tokenizer")
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        pieces = [tokenizer.decode([i]) for i in ids]
        hint = f"e.g. {pieces[0]!r}, " if pieces else ""
        raise InvalidRequestError(
            f"the target {token!r} is not a single token: it tokenises to {len(ids)} tokens "
            f"{pieces} (ids {ids}). Pass one token, {hint}or its id; mind the leading space.")
    return int(ids[0])


def resolve_targets(spec, input_ids: torch.Tensor, predicted: torch.Tensor, tokenizer,
                    vocab_size: int, *, what: str = "target") -> np.ndarray:
    """One target id per position (``NO_TARGET`` where there is none).

    ``spec`` is any :data:`~iglens_viz.core.request.TargetSpec`: ``"predicted"`` (the ids in
    ``predicted``), ``"next"`` (the text's actual next token), an int id, a single-token
    string, or a sequence of T ids (-1: no target at that position).
    """
    spec = normalize_target(spec, what)
    T = input_ids.numel()
    if spec == "predicted":
        return np.asarray(predicted.cpu(), dtype=np.int64).copy()
    if spec == "next":
        out = np.full(T, NO_TARGET, dtype=np.int64)
        out[:-1] = input_ids[1:].numpy()
        return out
    if isinstance(spec, str):
        ids = np.full(T, token_id_of(spec, tokenizer), dtype=np.int64)
    elif isinstance(spec, int):
        ids = np.full(T, spec, dtype=np.int64)
    else:
        ids = np.asarray(spec, dtype=np.int64)
        if ids.shape != (T,):
            raise InvalidRequestError(f"a {what} sequence needs one id per position: got "
                                      f"{ids.size}, the prompt has {T} tokens")
    bad = ids[ids >= vocab_size]
    if bad.size:
        raise InvalidRequestError(f"{what} ids out of range [0, {vocab_size}): "
                                  f"{bad[:5].tolist()}")
    return ids


def token_texts(tokenizer, *id_arrays) -> dict[int, str]:
    """Decoded text of every distinct id in ``id_arrays`` (``NO_TARGET`` and None skipped)."""
    arrays = [np.asarray(a).reshape(-1) for a in id_arrays if a is not None]
    ids = np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)
    ids = ids[ids != NO_TARGET]
    if tokenizer is None:
        return {int(i): f"<{int(i)}>" for i in ids}
    return {int(i): tokenizer.decode([int(i)], clean_up_tokenization_spaces=False) for i in ids}
