"""Resolving the ``target`` / ``contrast`` arguments into one token id per position."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from numpy.typing import ArrayLike

from ..errors import InvalidRequestError
from .request import TargetSpec, normalize_target

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from .readout import Readout
    from .request import AttributionRequest
    from .trace import Trace

NO_TARGET = -1
"""Marks a position without a target (the last position under ``target="next"``)."""


def token_id_of(token: str, tokenizer: PreTrainedTokenizerBase | None, what: str = "target") -> int:
    """The id of a single-token string; a clear error showing its tokenisation otherwise."""
    # Typed text such as " 4" or "-1" is a token string, not an id: say how to type an id.
    hint = (
        " (a token id is typed as bare digits, e.g. 4)"
        if re.fullmatch(r"\s*[+-]?\d+\s*", token)
        else ""
    )
    if tokenizer is None:
        raise InvalidRequestError(
            f"the {what} {token!r} is a string, which needs a tokenizer{hint}"
        )
    ids = tokenizer.encode(token, add_special_tokens=False)
    unk = getattr(tokenizer, "unk_token_id", None)
    if (
        unk is not None
        and ids == [unk]
        and token not in (tokenizer.unk_token, tokenizer.decode([unk]))
    ):
        raise InvalidRequestError(
            f"the {what} {token!r} is not in the vocabulary (it tokenises to the unknown token "
            f"{tokenizer.unk_token!r}){hint}. Pass a token of the vocabulary or its id."
        )
    if len(ids) != 1:
        pieces = [tokenizer.decode([i]) for i in ids]
        example = f"e.g. {pieces[0]!r}, " if pieces else ""
        raise InvalidRequestError(
            f"the {what} {token!r} is not a single token: it tokenises to {len(ids)} tokens "
            f"{pieces} (ids {ids}){hint}. Pass one token, {example}or its id; mind the "
            f"leading space."
        )
    return int(ids[0])


def single_token_id(
    spec: object, tokenizer: PreTrainedTokenizerBase | None, vocab: int, what: str
) -> int:
    """The id of one token given as an id (checked against ``vocab``) or a one-token string."""
    if isinstance(spec, str):
        return token_id_of(spec, tokenizer, what)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if not 0 <= int(spec) < vocab:
            raise InvalidRequestError(
                f"{what} id out of range: {int(spec)}; this model's token ids are 0..{vocab - 1}"
            )
        return int(spec)
    raise InvalidRequestError(
        f"the {what} must be one token: an id or a single-token string, not {spec!r}"
    )


def resolve_targets(
    spec: TargetSpec | np.ndarray | torch.Tensor,
    input_ids: torch.Tensor,
    predicted: torch.Tensor,
    tokenizer: PreTrainedTokenizerBase | None,
    vocab_size: int,
    *,
    what: str = "target",
) -> np.ndarray:
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
        ids = [token_id_of(spec, tokenizer, what)] * T
    elif isinstance(spec, int):
        ids = [spec] * T
    else:
        ids = list(spec)
        if len(ids) != T:
            raise InvalidRequestError(
                f"a {what} sequence needs one id per position: got "
                f"{len(ids)}, the prompt has {T} tokens"
            )
    # Checked as Python ints, before numpy: an id beyond int64 would raise OverflowError.
    bad = sorted({i for i in ids if i >= vocab_size})
    if bad:
        shown = bad[0] if len(bad) == 1 else bad[:5]
        raise InvalidRequestError(
            f"{what} id out of range: {shown}; this model's token ids are 0..{vocab_size - 1}"
        )
    return np.asarray(ids, dtype=np.int64)


def check_contrast(target_ids: np.ndarray, contrast_ids: np.ndarray) -> None:
    """Refuse a contrast that is the target itself at every position with a target.

    There f = p(target) − p(contrast) is 0 at every layer: an all-zero map whose onset (the
    first of equal zeros) would name the first segment everywhere. A contrast equal to the
    target at some positions only is allowed (those rows are zero).
    """
    both = (target_ids != NO_TARGET) & (contrast_ids != NO_TARGET)
    if both.any() and np.array_equal(target_ids[both], contrast_ids[both]):
        same = np.unique(target_ids[both])
        what = f"token id {same[0]}" if same.size == 1 else "the same token ids"
        raise InvalidRequestError(
            f"the contrast is the target itself ({what}) at every position, so "
            f"p(target) - p(contrast) is 0 everywhere: pick a different contrast token, or "
            f"none"
        )


def token_texts(
    tokenizer: PreTrainedTokenizerBase | None, *id_arrays: ArrayLike | None
) -> dict[int, str]:
    """Decoded text of every distinct id in ``id_arrays`` (``NO_TARGET`` and None skipped)."""
    arrays = [np.asarray(a).reshape(-1) for a in id_arrays if a is not None]
    ids = np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)
    ids = ids[ids != NO_TARGET]
    if tokenizer is None:
        return {int(i): f"<{int(i)}>" for i in ids}
    # decode of one sequence of ids is a str (its list[str] is the result for a batch)
    return {
        int(i): cast(str, tokenizer.decode([int(i)], clean_up_tokenization_spaces=False))
        for i in ids
    }


def predicted_ids(trace: Trace, prompt_length: int) -> torch.Tensor:
    """``[T]`` the "predicted" target: the model's top-1 next token at each position, except
    along a generated answer, where it is the token that was actually generated (greedy
    decoding with a KV cache can break near-ties differently from one full pass)."""
    predicted = trace.predicted.cpu().clone()
    predicted[prompt_length - 1 : -1] = trace.input_ids[prompt_length:]
    return predicted


@dataclass(frozen=True)
class Targets:
    """A request's target (and contrast) ids at every position, and what the readout reads."""

    ids: np.ndarray
    """``(T,)`` target ids (``NO_TARGET`` where a position has none)."""
    contrast: np.ndarray | None
    missing: np.ndarray
    """``(T,)`` bool: no target (or no contrast) at the position."""
    y: torch.Tensor
    """``[T]`` the target ids on the readout's device, a placeholder where missing."""
    c: torch.Tensor | None


def request_targets(
    request: AttributionRequest,
    input_ids: torch.Tensor,
    predicted: torch.Tensor,
    tokenizer: PreTrainedTokenizerBase | None,
    readout: Readout,
) -> Targets:
    """The request's target (and contrast) ids at every position of ``input_ids``
    (``predicted``: the "predicted" target at each, see :func:`resolve_targets`), checked
    against each other, with placeholders on the readout's device where a position has none."""
    vocab = readout.vocab_size

    def resolved(spec: Any, what: str) -> np.ndarray:
        return resolve_targets(spec, input_ids, predicted, tokenizer, vocab, what=what)

    target_ids = resolved(request.target, "target")
    contrast_ids = None if request.contrast is None else resolved(request.contrast, "contrast")
    if contrast_ids is not None:
        check_contrast(target_ids, contrast_ids)
    missing = target_ids == NO_TARGET
    if contrast_ids is not None:
        missing |= contrast_ids == NO_TARGET

    def usable(ids: np.ndarray) -> torch.Tensor:
        # A placeholder id where there is no target; masked to NaN in the result.
        return torch.as_tensor(np.where(missing, 0, ids), device=readout.device)

    c = None if contrast_ids is None else usable(contrast_ids)
    return Targets(target_ids, contrast_ids, missing, usable(target_ids), c)
