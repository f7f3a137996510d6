"""Resolving the ``target`` / ``contrast`` arguments into one token id per position."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

NO_TARGET = -1
"""Marks a position without a target (the last position under ``target="next"``)."""


def token_id_of(token: str, tokenizer) -> int:
    """The id of a single-token string; a clear error showing its tokenisation otherwise."""
    if tokenizer is None:
        raise ValueError(f"the target {token!r} is a string, which needs a tokenizer")
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        pieces = [tokenizer.decode([i]) for i in ids]
        raise ValueError(f"the target {token!r} is not a single token: it tokenises to "
                         f"{len(ids)} tokens {pieces} (ids {ids}). Pass one token, e.g. "
                         f"{pieces[0]!r} if any, or its id; mind the leading space.")
    return int(ids[0])


def resolve_targets(spec, input_ids: torch.Tensor, predicted: torch.Tensor, tokenizer,
                    vocab_size: int, *, what: str = "target") -> np.ndarray:
    """One target id per position (``NO_TARGET`` where there is none).

    ``spec``: ``"predicted"`` (the model's own top-1 next token), ``"next"`` (the text's
    actual next token), an int id, a single-token string, or a sequence of T ids.
    """
    T = input_ids.numel()
    if isinstance(spec, str):
        if spec == "predicted":
            return predicted.cpu().numpy().astype(np.int64)
        if spec == "next":
            out = np.full(T, NO_TARGET, dtype=np.int64)
            out[:-1] = input_ids[1:].numpy()
            return out
        ids = np.full(T, token_id_of(spec, tokenizer), dtype=np.int64)
    elif isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        ids = np.full(T, int(spec), dtype=np.int64)
    elif isinstance(spec, (Sequence, np.ndarray, torch.Tensor)):
        ids = np.asarray(torch.as_tensor(spec).cpu(), dtype=np.int64).reshape(-1)
        if ids.shape != (T,):
            raise ValueError(f"a {what} sequence needs one id per position: got {ids.size}, "
                             f"the prompt has {T} tokens")
    else:
        raise TypeError(f"{what} must be 'predicted', 'next', a token id, a single-token "
                        f"string or a sequence of {T} ids; got {type(spec).__name__}")
    valid = ids != NO_TARGET
    bad = ids[valid & ((ids < 0) | (ids >= vocab_size))]
    if bad.size:
        raise ValueError(f"{what} ids out of range [0, {vocab_size}): {bad[:5].tolist()}")
    return ids


def token_texts(tokenizer, *id_arrays) -> dict[int, str]:
    """Decoded text of every distinct id in ``id_arrays`` (``NO_TARGET`` and None skipped)."""
    arrays = [np.asarray(a).reshape(-1) for a in id_arrays if a is not None]
    ids = np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)
    ids = ids[ids != NO_TARGET]
    if tokenizer is None:
        return {int(i): f"<{int(i)}>" for i in ids}
    return {int(i): tokenizer.decode([int(i)], clean_up_tokenization_spaces=False) for i in ids}
