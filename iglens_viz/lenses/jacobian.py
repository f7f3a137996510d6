"""The Jacobian lens (``jlens``): T_L(h) = J_L·h, J_L the mean Jacobian ∂h_n/∂h_L.

The estimator is ``jlens``'s (``jlens.fitting.jacobian_for_prompt``, reduction
``"future_sum"``). For one text with valid positions V = {s, …, T−2} (``skip_first`` = s,
16 in ``jlens``; the last position is left out):

    J_L(text)[i, j] = mean_{p ∈ V} Σ_{p' ∈ V} ∂h_n[p', i] / ∂h_L[p, j]

— a one-hot cotangent on output coordinate i at every valid position at once, one backward
pass, and the gradient at each valid source position averaged; by causality only p' ≥ p
contribute. J_L is the mean of J_L(text) over the texts (each text weighs the same, however
long). Exact: d backward passes per text (``dim_batch`` output coordinates per pass, the
text replicated ``dim_batch`` times), through the model's real blocks, with autograd.

Depths: ``jlens`` numbers its source layers by block (layer l is the output of block l,
0-based, i.e. our depth l + 1) and fits layers 0 … n−2, not the embeddings; here every
depth 0 … n−1 is fitted (depth 0: ∂h_n/∂h_0, the first block's input).

Sampling error: the texts used are split into two halves, alternately (A: the 1st, 3rd, …
text used; B: the 2nd, 4th, …), and ``split_half_rel_error`` per depth is
‖J_A − J_B‖_F / ‖J_L‖_F, J_A and J_B the means over each half. For independent texts
with per-text spread σ² = E‖J_L(text) − E J_L(text)‖²_F, E‖J_A − J_B‖²_F =
(1/n_A + 1/n_B)·σ² and E‖J_L − E J_L(text)‖²_F = σ²/n: with halves of equal size the error
of the mean J_L itself is about half the split-half difference. It costs one more running
float64 sum (half A; B = all − A), no Jacobian more.

Checkpoints (``checkpoint=``, ``resume=``; :func:`~.fit.fit_lens` keeps them in the cache,
:mod:`.cache`): after each text, ``{"texts_done": texts processed (the next one's index),
"used": how many had a valid position, "sums": [Σ J_L(text)] over them (float64 ``[d, d]``,
L = 0 … n−1, or None before the first), "half_sums": the same sum over half A}``. Resuming
continues at text ``texts_done`` with these sums: the same additions in the same order, so
the same lens.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from ..adapters import ModelAdapter
from ..core.capture import input_device
from ..core.hooks import Hooks, block_input, block_output_states, run_until
from ..core.model_mode import eval_mode
from ..errors import InvalidRequestError

__all__ = [
    "JLENS_SKIP_FIRST",
    "JacobianFit",
    "backward_passes",
    "fit_jacobian",
    "has_valid_position",
    "passes_done",
    "split_half_errors",
    "text_jacobians",
]

JLENS_SKIP_FIRST = 16
"""``jlens``'s ``SKIP_FIRST_N_POSITIONS``: leading positions left out of the average."""


@contextlib.contextmanager
def _frozen(model: nn.Module) -> Iterator[None]:
    """No parameter of ``model`` requires a gradient inside the block (restored after)."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def _states_with_graph(
    model: nn.Module, adapter: ModelAdapter, ids: torch.Tensor
) -> list[torch.Tensor]:
    """h_0 … h_n of ``ids`` ``[B, T]`` in one forward pass with autograd: h_0 (the first
    block's input) is made a leaf that requires a gradient, so every later state is a
    function of it in the graph."""
    states: list[Any] = [None] * (adapter.n_blocks + 1)

    def before_first(module, args, kwargs):
        h = block_input(args, kwargs).detach().requires_grad_(True)
        states[0] = h
        if args:
            return (h, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": h}

    def after(index):
        def hook(module, args, output):
            states[index] = block_output_states(output)

        return hook

    with Hooks() as hooks:
        hooks.before(adapter.blocks[0], before_first, with_kwargs=True)
        for i, block in enumerate(adapter.blocks):
            hooks.after(block, after(i + 1))
        # the head's logits are not needed: stop after the last block
        run_until(adapter.blocks[-1], lambda: model(input_ids=ids, use_cache=False))
    return states


def text_jacobians(
    model: nn.Module,
    adapter: ModelAdapter,
    ids: torch.Tensor,
    *,
    skip_first: int = JLENS_SKIP_FIRST,
    dim_batch: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> dict[int, torch.Tensor] | None:
    """J_L(text) ``[d, d]`` (float64, CPU) of every depth L < n for one text ``ids``
    ``[T]`` (see the module's text), or None when it has no valid position (T ≤
    ``skip_first`` + 1). ``progress(done, total)`` is called after each of its backward
    passes (it may raise to stop)."""
    T = ids.numel()
    if not has_valid_position(T, skip_first):
        return None
    valid = torch.arange(skip_first, T - 1)
    n = adapter.n_blocks
    with eval_mode(model), _frozen(model), torch.enable_grad():
        batch = ids.reshape(1, -1).expand(dim_batch, -1).to(input_device(model))
        states = _states_with_graph(model, adapter, batch)
        target = states[n]
        d = target.shape[-1]
        sources = states[:n]
        out = {L: torch.zeros(d, d, dtype=torch.float64) for L in range(n)}
        rows = torch.arange(dim_batch, device=target.device)
        at = valid.to(target.device)
        starts = list(range(0, d, dim_batch))
        for k, start in enumerate(starts):
            count = min(dim_batch, d - start)
            cotangent = torch.zeros_like(target)
            cotangent[rows[:count, None], at[None, :], start + rows[:count, None]] = 1.0
            grads = torch.autograd.grad(
                target, sources, grad_outputs=cotangent, retain_graph=k < len(starts) - 1
            )
            for L, grad in enumerate(grads):
                out[L][start : start + count] = grad[:count, at].double().mean(1).cpu()
            if progress is not None:
                progress(k + 1, len(starts))
    return out


def has_valid_position(length: int, skip_first: int) -> bool:
    """Whether a text of ``length`` tokens has a position the Jacobian lens averages over
    (positions ``skip_first`` … length − 2): longer than ``skip_first`` + 1 tokens."""
    return length - 1 > skip_first


class JacobianFit(NamedTuple):
    """What :func:`fit_jacobian` returns."""

    matrices: dict[int, torch.Tensor]
    """J_L ``[d, d]`` (float32) of every depth L < n."""
    texts: int
    """How many texts had a valid position (and were averaged)."""
    split_half_rel_error: list[float] | None
    """Per depth L, ‖J_A − J_B‖_F / ‖J_L‖_F for the means J_A and J_B over the two halves
    of those texts (alternate ones); None with fewer than 2 texts (see the module's text)."""


def fit_jacobian(
    model: nn.Module,
    adapter: ModelAdapter,
    sequences: Sequence[torch.Tensor],
    *,
    skip_first: int = JLENS_SKIP_FIRST,
    dim_batch: int = 8,
    progress: Callable[[int, int], None] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    resume: Mapping[str, Any] | None = None,
) -> JacobianFit:
    """J_L ``[d, d]`` (float32) of every depth L < n, the mean of :func:`text_jacobians`
    over the texts that have a valid position (the others, ``skip_first`` + 1 tokens or
    fewer, are skipped), how many did, and the split-half relative error of that mean (a
    :class:`JacobianFit`). ``progress(done, total)`` is called after each backward pass,
    counted over the texts used (:func:`backward_passes` per text; a text's last one after
    its checkpoint). It may raise to stop the fit: the checkpoint of the texts finished
    stays.

    ``checkpoint(state)``, when given, is called after each text with the running state
    (see the module's text; to be written out during the call); ``resume``: such a state,
    from a fit with the same arguments and sequences — the fit continues at the next text
    and ends with the same numbers as one never stopped."""
    if dim_batch < 1:
        raise InvalidRequestError(f"dim_batch must be >= 1, got {dim_batch}")
    usable = [has_valid_position(s.numel(), skip_first) for s in sequences]
    if not any(usable):
        raise InvalidRequestError(
            f"no text is longer than {skip_first + 1} tokens: the Jacobian lens averages "
            f"over positions {skip_first} … T−2 of each text (skip_first={skip_first}); "
            f"pass longer texts or a smaller skip_first"
        )
    per_text = backward_passes(model, dim_batch)
    sums: list[torch.Tensor] | None = None
    halves: list[torch.Tensor] | None = None  # the sum over the texts used 0, 2, 4, …
    used = 0
    start = 0
    if resume is not None:
        start, used = int(resume["texts_done"]), int(resume["used"])
        sums, halves = resume["sums"], resume["half_sums"]
    total = per_text * sum(usable)
    for i in range(start, len(sequences)):
        before = passes_done(sequences, i, skip_first, per_text)

        def report(done: int, passes: int, before: int = before) -> None:
            if progress is not None and done < passes:  # the text's last: once it is kept
                progress(before + done, total)

        jac = text_jacobians(
            model,
            adapter,
            sequences[i],
            skip_first=skip_first,
            dim_batch=dim_batch,
            progress=report,
        )
        if jac is not None:
            if sums is None or halves is None:
                sums = [jac[L] for L in range(len(jac))]
                halves = [torch.zeros_like(s) for s in sums]
            else:
                sums = [s + jac[L] for L, s in enumerate(sums)]
            if used % 2 == 0:
                halves = [h + jac[L] for L, h in enumerate(halves)]
            used += 1
        if checkpoint is not None:
            checkpoint({"texts_done": i + 1, "used": used, "sums": sums, "half_sums": halves})
        if progress is not None and jac is not None:
            progress(before + per_text, total)
    if sums is None or halves is None:  # pragma: no cover - a usable text was found above
        raise InvalidRequestError("the Jacobian checkpoint holds no text")
    return JacobianFit(
        {L: (s / used).float() for L, s in enumerate(sums)},
        used,
        split_half_errors(sums, halves, used),
    )


def backward_passes(model: nn.Module, dim_batch: int) -> int:
    """The backward passes :func:`text_jacobians` makes per text: ⌈d / ``dim_batch``⌉."""
    from .states import model_shape

    return -(-model_shape(model)[2] // dim_batch)


def passes_done(
    sequences: Sequence[torch.Tensor], texts_done: int, skip_first: int, per_text: int
) -> int:
    """The backward passes made for the first ``texts_done`` texts (those with a valid
    position): where a fit resumed from a checkpoint of ``texts_done`` texts stands."""
    return per_text * sum(has_valid_position(s.numel(), skip_first) for s in sequences[:texts_done])


def split_half_errors(
    sums: Sequence[torch.Tensor], halves: Sequence[torch.Tensor], used: int
) -> list[float] | None:
    """‖J_A − J_B‖_F / ‖J‖_F per depth from the float64 sum over all ``used`` texts
    (``sums``) and over the texts used 0, 2, 4, … (``halves``, half A; half B the rest);
    None when ``used`` < 2."""
    if used < 2:
        return None
    n_a = (used + 1) // 2
    n_b = used - n_a
    out = []
    for total, a in zip(sums, halves, strict=True):
        mean = total / used
        diff = a / n_a - (total - a) / n_b
        norm = float(torch.linalg.matrix_norm(mean))
        out.append(float(torch.linalg.matrix_norm(diff)) / norm if norm > 0 else math.inf)
    return out
