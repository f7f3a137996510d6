"""The widget's causal check of one token: total and direct effect of each segment, and the
counterfactual patching effects of each block.

IG-Lens's contribution of a segment is what the final norm and head can newly read after
its update: a direct reading at the answer position. :func:`check_segments` sets beside it

- the **total effect**: the drop of f when the segment is zero-ablated — at the answer
  position only (``positions="target"``, the default) or at every position (``"all"``) —
  with every later block running on the changed stream (:func:`~iglens_viz.causal.ablate`);
- the **direct effect**: later blocks frozen, ``f(h_n) − f(h_n − Δ)`` with Δ the segment's
  update at the answer position, read through the final norm and head (a readout only; the
  same for both ``positions``: nothing else reaches the readout at that position);
- given a counterfactual (corrupt) prompt of the same token length and its answer token,
  the normalised noising effects of :func:`~iglens_viz.causal.patch` at the answer
  position, total and direct, under the logit difference of target and contrast.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

import numpy as np
import torch

from ..adapters import adapter_for
from ..core.boundaries import segment_parts
from ..core.capture import input_device
from ..core.inputs import is_position_index, to_input_ids
from ..core.model_mode import eval_mode
from ..core.readout import Readout
from ..errors import InvalidRequestError
from .ablation import AblationPart, _part_modules
from .patching import PatchResult, _capture_pair, patch
from .segments import segment_drops

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from ..core.request import PromptSpec
    from ..core.result import AttributionResult

__all__ = [
    "CHECK_POSITIONS",
    "CausalCheck",
    "CheckPositions",
    "CounterfactualCheck",
    "check_segments",
    "direct_drops",
]

CheckPositions = Literal["target", "all"]
"""Where the causal check's ablation acts: the answer position only, or every position."""
CHECK_POSITIONS: tuple[CheckPositions, ...] = get_args(CheckPositions)


class CounterfactualCheck(NamedTuple):
    """The patching effects of one clean/corrupt pair, one per segment (noising, the
    answer position, metric logit_diff)."""

    prompt_ids: list[int]
    """The corrupt prompt's ids, cut at the answer position (as the clean prompt is)."""
    contrast_id: int
    """The corrupt prompt's answer token."""
    total: np.ndarray
    """``(k,)`` normalised effect with the rest of the forward pass running."""
    direct: np.ndarray
    """``(k,)`` normalised effect with the later blocks frozen (a readout)."""
    clean_metric: float
    """logit(target) − logit(contrast) on the clean prompt."""
    corrupt_metric: float
    """The same on the corrupt prompt."""
    normalized: bool
    """Whether ``clean_metric − corrupt_metric`` could be divided by (else NaN effects)."""
    warnings: list[str]


class CausalCheck(NamedTuple):
    """The causal check of one token: per segment, the total and the direct effect of its
    zero ablation, and with a counterfactual the patching effects."""

    position: int
    positions: CheckPositions
    drops: np.ndarray
    """``(k,)`` total effect: drop of f with the later blocks running."""
    direct: np.ndarray
    """``(k,)`` direct effect: ``f(h_n) − f(h_n − Δ)`` at the position."""
    clean: float
    parts: list[str]
    target_id: int
    contrast_id: int | None
    counterfactual: CounterfactualCheck | None
    seconds: float


@torch.no_grad()
def direct_drops(
    model: nn.Module,
    ids: Sequence[int],
    plan: Sequence[tuple[AblationPart, tuple[int, ...]]],
    target: int,
    contrast: int | None = None,
) -> tuple[float, np.ndarray]:
    """``(f(h_n), (k,) f(h_n) − f(h_n − Δ_j))`` at the last position of ``ids``: the direct
    effect of each segment of ``plan`` (:func:`~iglens_viz.core.boundaries.segment_parts`),
    Δ_j its update there (the sum of its blocks' updates, or its attention's / MLP's write),
    later blocks frozen and h read through the final norm and head. f is p(target), minus
    p(contrast) with a contrast."""
    adapter = adapter_for(model)
    dtype = next(model.parameters()).dtype
    readout = Readout(adapter, torch.float64 if dtype == torch.float64 else torch.float32)
    device = input_device(model)
    x = torch.as_tensor(list(ids), dtype=torch.long)
    writes: dict[str, torch.Tensor] = {}
    h_n = None
    with eval_mode(model):
        for part in dict.fromkeys(what for what, _ in plan):
            modules = _part_modules(adapter, part)
            # the clean run twice: the pair capture of patch(), with no corrupt prompt
            w, h_last, _ = _capture_pair(model, adapter, modules, part, x, x, device)
            writes[part], h_n = w[0, :, -1], h_last[0]
    assert h_n is not None, "a plan has at least one segment"
    rows = [h_n] + [h_n - writes[part][[b - 1 for b in blocks]].sum(0) for part, blocks in plan]
    h = torch.stack(rows).to(readout.dtype)
    ids_t = torch.full((len(rows),), target, dtype=torch.long)
    other = None if contrast is None else torch.full((len(rows),), contrast, dtype=torch.long)
    f = readout.probability(h, ids_t, other).double().cpu().numpy()
    return float(f[0]), f[0] - f[1:]


def _token(spec: int | str, tokenizer: PreTrainedTokenizerBase | None, vocab: int) -> int:
    from ..core.targets import single_token_id

    return single_token_id(spec, tokenizer, vocab, "contrast")


def _counterfactual(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    result: AttributionResult,
    p: int,
    plan: Sequence[tuple[AblationPart, tuple[int, ...]]],
    prompt: PromptSpec,
    contrast: int | str | None,
) -> CounterfactualCheck:
    """The patching effects of ``prompt`` against the result's prompt cut at position p."""
    if any(len(blocks) != 1 for _, blocks in plan):
        raise InvalidRequestError(
            "counterfactual patching replaces one block's update (or one attention or MLP "
            "write) at a time: recompute with boundaries 'all' or 'sublayer' to patch"
        )
    vocab = adapter_for(model).head.weight.shape[0]
    corrupt = to_input_ids(prompt, tokenizer, model.config, vocab)
    T = len(result.input_ids)
    m = corrupt.numel()
    if m not in (p + 1, T):
        whole = "" if p + 1 == T else f", the whole input {T}"
        raise InvalidRequestError(
            f"the counterfactual prompt has {m} tokens, the clean prompt {p + 1} (up to the "
            f"answer position [{p}]{whole}): patching replaces updates position by position, "
            f"so give a prompt of the same template whose subject is as many tokens long"
        )
    corrupt_ids = [int(i) for i in corrupt[: p + 1]]
    clean_ids = [int(i) for i in result.input_ids[: p + 1]]
    target = int(result.target_ids[p])
    if contrast is None or contrast == "":
        with torch.no_grad(), eval_mode(model):
            batch = torch.as_tensor([corrupt_ids]).to(input_device(model))
            logits = model(input_ids=batch, attention_mask=torch.ones_like(batch)).logits
        contrast_id = int(logits[0, -1].argmax())
    else:
        contrast_id = _token(contrast, tokenizer, vocab)
    kinds = sorted({what for what, _ in plan}, key=["block", "attn", "mlp"].index)
    out: dict[str, np.ndarray] = {}
    first: PatchResult | None = None
    for effect in ("total", "direct"):
        values = np.empty(len(plan))
        for part in kinds:
            res = patch(
                model,
                tokenizer,
                clean_ids,
                corrupt_ids,
                target=target,
                contrast=contrast_id,
                parts=part,
                positions="target",
                direction="noising",
                effect=effect,
                metric="logit_diff",
            )
            assert isinstance(res, PatchResult)
            first = first or res
            for j, (what, blocks) in enumerate(plan):
                if what == part:
                    values[j] = res.effects[blocks[0] - 1]
        out[effect] = values
    assert first is not None
    return CounterfactualCheck(
        corrupt_ids,
        contrast_id,
        out["total"],
        out["direct"],
        first.clean_metric,
        first.corrupt_metric,
        first.normalized,
        list(first.warnings),
    )


def check_segments(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    result: AttributionResult,
    position: int,
    *,
    positions: CheckPositions = "target",
    counterfactual: PromptSpec | None = None,
    contrast: int | str | None = None,
) -> CausalCheck:
    """The causal check of one token of ``result`` (an attribution of ``model``).

    The forward passes run on the input ids up to ``position`` (causal attention: later
    tokens cannot change it), so the answer position is the last one. Per segment (the
    mapping of :func:`~iglens_viz.core.boundaries.segment_parts`):

    - ``drops``, the total effect: f_clean − f with the segment zero-ablated at the answer
      position only (``positions="target"``) or at every position (``"all"``), every later
      block running on the changed stream;
    - ``direct``, the direct effect: :func:`direct_drops`, later blocks frozen.

    With a contrast f = p(target) − p(contrast), the quantity the contributions split.
    ``counterfactual`` (a corrupt prompt of the clean prompt's token length up to the
    position, or of the whole input's, cut there) adds :func:`~iglens_viz.causal.patch`'s
    normalised noising effects at the answer position, total and direct, with metric
    ``logit_diff`` between the position's target and ``contrast`` (the corrupt prompt's
    answer: a token id or one-token string; None: the model's top-1 on the corrupt
    prompt); only for single-block or sub-layer segments.
    """
    if positions not in CHECK_POSITIONS:
        raise InvalidRequestError(
            f"the causal check ablates at positions 'target' (the answer position) or 'all', "
            f"got {positions!r}"
        )
    T = len(result.input_ids)
    if not is_position_index(position) or not int(position) < T:
        raise InvalidRequestError(
            f"position {position!r} is not a position of this result (0 … {T - 1})"
        )
    p = int(position)
    target = int(result.target_ids[p])
    if target < 0:
        raise InvalidRequestError(f"position {p} has no target: there is no probability to ablate")
    own_contrast = None if result.contrast_ids is None else int(result.contrast_ids[p])
    if own_contrast is not None and own_contrast < 0:
        own_contrast = None
    plan = segment_parts(result.boundaries)
    ids = [int(i) for i in result.input_ids[: p + 1]]
    start = time.perf_counter()
    drops = np.zeros(len(plan))
    clean = 0.0
    for sign, token in ((1.0, target), (-1.0, own_contrast)):
        if token is None:
            continue
        at_answer = [-1] * (len(ids) - 1) + [token]  # measured at the answer position only
        unablated, dropped = segment_drops(
            model, tokenizer, ids, at_answer, plan, positions=positions
        )
        drops += sign * dropped[-1]
        clean += sign * float(unablated[-1])
    _, direct = direct_drops(model, ids, plan, target, own_contrast)
    cf = None
    if isinstance(counterfactual, str) and not counterfactual.strip():
        counterfactual = None
    if counterfactual is not None:
        cf = _counterfactual(model, tokenizer, result, p, plan, counterfactual, contrast)
    elif contrast is not None and contrast != "":
        raise InvalidRequestError(
            "a contrast without a counterfactual prompt: the contrast is the corrupt "
            "prompt's answer; give the counterfactual prompt too"
        )
    return CausalCheck(
        p,
        positions,
        drops,
        direct,
        clean,
        [what for what, _ in plan],
        target,
        own_contrast,
        cf,
        time.perf_counter() - start,
    )
