"""Activation patching with counterfactual prompts: which block carries the answer?

Two prompts of the same template and token length, a *clean* one ("The capital of France
is", answer " Paris") and a *corrupt* one ("The capital of Italy is", answer " Rome"). A
metric M is read at the last position (the answer position): the logit difference
``logit(target) − logit(contrast)`` (default) or the target probability. Block L's *update*
``Δ_L = h_L − h_{L−1}`` (or its attention's or MLP's write to the stream, ``parts=``) is
replaced at some positions by the other prompt's ``Δ′_L``:

- ``direction="noising"``: run the clean prompt, patch in the corrupt prompt's update;
  effect ``(M_clean − M_patched) / (M_clean − M_corrupt)``;
- ``direction="denoising"``: run the corrupt prompt, patch in the clean prompt's update;
  effect ``(M_patched − M_corrupt) / (M_clean − M_corrupt)``;
- ``effect="total"``: every later block runs on the patched stream;
- ``effect="direct"``: later blocks frozen, ``h_n′ = h_n − Δ_L + Δ′_L`` at the positions,
  read through the final norm and head: a readout only, no forward pass after the patch.

:func:`attribution_patch` is the linear baseline (Nanda 2023; Kramár et al. 2024): the
gradient of M with respect to the stream at block L's output, in the run that is patched,
times ``Δ′_L − Δ_L``, normalised the same way. See ``docs/patching.md``.

All blocks of a pair are patched in batched forward passes (one patched run per batch row,
as :func:`~iglens_viz.causal.ablate` does), stopped at h_n and read out at the last position
only; pairs of different lengths share passes, right-padded with an attention mask.

>>> res = patch(model, tokenizer, "The capital of France is", "The capital of Italy is",
...             target=" Paris", contrast=" Rome")                   # doctest: +SKIP
>>> res.argmax, res.effects.round(2)                                 # doctest: +SKIP
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import numpy as np
import torch
from torch import nn

from ..adapters import ModelAdapter, adapter_for
from ..core.capture import input_device, padded_batch
from ..core.hooks import (
    Hooks,
    block_input,
    block_output_states,
    by_row,
    projection_input,
    replace_block_output,
    run_until,
)
from ..core.inputs import to_input_ids
from ..core.memory import DEFAULT_MEMORY_BUDGET, activation_rows
from ..core.model_mode import eval_mode
from ..core.readout import Readout
from ..core.request import PromptSpec
from ..core.targets import single_token_id, token_texts
from ..errors import InvalidRequestError
from .ablation import _part_modules
from .positions import PositionSpec, resolve_positions

if TYPE_CHECKING:
    import pandas as pd
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "PATCH_DIRECTIONS",
    "PATCH_EFFECTS",
    "PATCH_METHODS",
    "PATCH_METRICS",
    "PATCH_PARTS",
    "PatchDirection",
    "PatchEffect",
    "PatchMethod",
    "PatchMetric",
    "PatchPart",
    "PatchResult",
    "attribution_patch",
    "patch",
]

PatchDirection = Literal["noising", "denoising"]
PATCH_DIRECTIONS: tuple[PatchDirection, ...] = get_args(PatchDirection)
"""``noising``: run clean, patch in corrupt's update; ``denoising``: run corrupt, patch in
clean's."""
PatchEffect = Literal["total", "direct"]
PATCH_EFFECTS: tuple[PatchEffect, ...] = get_args(PatchEffect)
"""``total``: later blocks run on the patched stream; ``direct``: later blocks frozen (a
readout of ``h_n − Δ_L + Δ′_L``)."""
PatchMetric = Literal["logit_diff", "prob"]
PATCH_METRICS: tuple[PatchMetric, ...] = get_args(PatchMetric)
"""``logit_diff``: logit(target) − logit(contrast) (needs a contrast); ``prob``: p(target)."""
PatchPart = Literal["block", "attn", "mlp", "head", "state"]
PATCH_PARTS: tuple[PatchPart, ...] = get_args(PatchPart)
"""``block``: the block's update; ``attn`` / ``mlp``: that sub-layer's write as it enters the
stream (the modules :func:`~iglens_viz.causal.ablate`'s parts hook); ``head``: one attention
head's write ``W_o[:, head] z_head`` (its slice of the output projection's input), where the
attention's write is linear in its heads; ``state``: the residual stream after block L, h_L
itself (resid-post patching), ``effect="total"`` and ``method="activation"`` only."""
PatchMethod = Literal["activation", "attribution"]
PATCH_METHODS: tuple[PatchMethod, ...] = get_args(PatchMethod)
"""``activation``: patched runs; ``attribution``: the first-order (gradient) estimate."""

TokenSpec = int | str
"""A single token: its id, or a string that is one token."""


@dataclass
class PatchResult:
    """The effect of patching each block (or sub-layer) of one clean/corrupt pair.

    c is the number of patched parts: one per block (``parts="block"`` or ``"state"``), per block's
    attention / MLP write, or per (block, head) for ``parts="head"`` (block-major). Raw
    metrics are float64; effects are normalised by ``clean_metric − corrupt_metric`` (NaN,
    with :attr:`normalized` false and a warning, where that difference is too small to divide
    by).
    """

    effects: np.ndarray
    """``(c,)`` normalised effects: noising ``(M_clean − M_patched) / (M_clean − M_corrupt)``,
    denoising ``(M_patched − M_corrupt) / (M_clean − M_corrupt)``. 1 means the part's update
    alone carries the whole metric difference, 0 nothing."""
    raw_effects: np.ndarray
    """``(c,)`` the same without the division: ``M_clean − M_patched`` (noising) or
    ``M_patched − M_corrupt`` (denoising), in metric units."""
    patched: np.ndarray
    """``(c,)`` the metric of each patched run (for ``method="attribution"``: its linear
    estimate ``M_run + g·(Δ′ − Δ)``)."""
    clean_metric: float
    """M of the clean prompt."""
    corrupt_metric: float
    """M of the corrupt prompt."""
    labels: list[str]
    """``(c,)`` ``"3"`` for block 3 (1-based), ``"L3.attn"`` / ``"L3.mlp"`` for its writes,
    ``"L3.h2"`` for its head 2 (0-based), ``"h3"`` for the state after block 3."""
    layers: list[int]
    """``(c,)`` the 1-based block of each part."""
    positions: list[int]
    """The 0-based positions where the updates were replaced."""
    clean_ids: np.ndarray
    """``(T,)`` the clean prompt's ids."""
    corrupt_ids: np.ndarray
    """``(T,)`` the corrupt prompt's ids."""
    target_id: int
    """The clean prompt's answer token."""
    contrast_id: int | None
    """The corrupt prompt's answer token (None for ``metric="prob"`` without one)."""
    parts: PatchPart = "block"
    direction: PatchDirection = "noising"
    effect: PatchEffect = "total"
    metric: PatchMetric = "logit_diff"
    method: PatchMethod = "activation"
    n_blocks: int = 0
    heads: list[int] | None = None
    """For ``parts="head"``: the 0-based head of each part, parallel to :attr:`layers`."""
    normalized: bool = True
    """Whether ``M_clean − M_corrupt`` is large enough to normalise by (else effects NaN)."""
    warnings: list[str] = field(default_factory=list)
    """What the run found worth saying (the undefined normalisation)."""
    token_text: dict[int, str] = field(default_factory=dict, repr=False)
    """Decoded text of every token id the result refers to (untrusted: escape on display)."""

    @property
    def clean_tokens(self) -> list[str]:
        """The clean prompt's tokens as text."""
        return [self.token_text.get(int(i), "") for i in self.clean_ids]

    @property
    def corrupt_tokens(self) -> list[str]:
        """The corrupt prompt's tokens as text."""
        return [self.token_text.get(int(i), "") for i in self.corrupt_ids]

    @property
    def argmax(self) -> int | None:
        """The 1-based block whose part has the largest effect (None when every effect is
        NaN, e.g. an undefined normalisation: then see :attr:`raw_effects`)."""
        index = self.argmax_index
        return None if index is None else self.layers[index]

    @property
    def argmax_index(self) -> int | None:
        """The index in :attr:`effects` of the largest effect (None when all are NaN)."""
        values = self.effects if self.normalized else np.full_like(self.effects, np.nan)
        if values.size == 0 or np.isnan(values).all():
            return None
        return int(np.nanargmax(values))

    def to_frame(self) -> pd.DataFrame:
        """One row per part: label, block, effect, raw effect, patched metric (pandas)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "label": self.labels,
                "layer": self.layers,
                "effect": self.effects,
                "raw_effect": self.raw_effects,
                "patched": self.patched,
            }
        )


# --- arguments -------------------------------------------------------------------------------


def _check_choice(value: object, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise InvalidRequestError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def _is_batch(prompts: object) -> bool:
    """Whether ``prompts`` lists several prompts (strings, or id sequences) rather than
    being one prompt (a string, a list of ids, a 1-D or ``[1, T]`` tensor)."""
    if isinstance(prompts, (str, torch.Tensor, np.ndarray)) or not isinstance(prompts, Sequence):
        return False
    return len(prompts) > 0 and all(
        isinstance(p, (str, Sequence, torch.Tensor, np.ndarray)) for p in prompts
    )


def _per_pair(spec: Any, count: int, what: str) -> list[Any]:
    """One token spec per pair: a list of ``count`` of them, or one for all."""
    if isinstance(spec, (list, tuple)):
        if len(spec) != count:
            raise InvalidRequestError(
                f"{what} lists {len(spec)} tokens for {count} pairs: give one per pair, or one "
                f"token for all"
            )
        return list(spec)
    return [spec] * count


# --- the runs --------------------------------------------------------------------------------


@dataclass
class _Pair:
    """One pair's runs: what each module wrote in the clean and corrupt runs."""

    clean: torch.Tensor  # [T] ids
    corrupt: torch.Tensor  # [T] ids
    target: int
    contrast: int | None
    positions: list[int]
    writes: torch.Tensor  # [2, c, T, d]: clean's and corrupt's Δ_L (or sub-layer writes)
    h_last: torch.Tensor  # [2, d]: h_n at the last position, clean and corrupt
    metric: tuple[float, float] = (math.nan, math.nan)  # M_clean, M_corrupt
    z: torch.Tensor | None = None  # [2, n, T, H·d_head]: the output projections' inputs

    @property
    def T(self) -> int:
        return self.clean.numel()


def _metric(
    readout: Readout, h: torch.Tensor, target: int, contrast: int | None, metric: str
) -> torch.Tensor:
    """M at states ``h[..., d]``: logit(target) − logit(contrast), or p(target), float64."""
    ids = torch.full(h.shape[:-1], target, dtype=torch.long)
    if metric == "prob":
        return readout.probability(h, ids).double()
    assert contrast is not None, "logit_diff comes with a contrast"
    z = readout.features(h)
    other = torch.full(h.shape[:-1], contrast, dtype=torch.long)
    return (readout.target_logits(z, ids) - readout.target_logits(z, other)).double()


def _write_of(part: str, args: tuple, kwargs: dict, output: Any, rows: int) -> torch.Tensor:
    """``[rows, T, d]`` what a hooked module adds to the stream: a block's update
    (output − input), or a write module's output; for ``part="state"``, the block's output
    h_L itself."""
    out = block_output_states(output)
    if part == "state":
        return out
    if part == "block":
        return out - block_input(args, kwargs)
    return by_row(out, rows)


@torch.no_grad()
def _capture_pair(
    model: nn.Module,
    adapter: ModelAdapter,
    modules: Sequence[nn.Module],
    part: str,
    clean: torch.Tensor,
    corrupt: torch.Tensor,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One pass of [clean; corrupt]: ``[2, c, T, d]`` each part's write to the stream,
    ``[2, d]`` h_n at the last position and, for heads, ``[2, n, T, H·d_head]`` the output
    projections' inputs."""
    ids = torch.stack([clean, corrupt]).to(device)
    writes: dict[int, torch.Tensor] = {}

    def keep(index: int) -> Callable[..., Any]:
        if part == "head":

            def before(module, args, kwargs):
                writes[index] = by_row(projection_input(args, kwargs)[0], 2).detach()

            return before

        def hook(module, args, kwargs, output):
            writes[index] = _write_of(part, args, kwargs, output, 2).detach()

        return hook

    with Hooks() as hooks:
        for i, module in enumerate(modules):
            if part == "head":
                hooks.before(module, keep(i), with_kwargs=True)
            else:
                hooks.after(module, keep(i), with_kwargs=True)
        last = run_until(
            adapter.blocks[-1],
            lambda: model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False),
        )
    h_n = block_output_states(last)[:, -1].detach()
    stacked = torch.stack([writes[i] for i in range(len(modules))], dim=1)
    if part != "head":
        return stacked, h_n, None
    return _head_writes(adapter, stacked), h_n, stacked


def _head_writes(adapter: ModelAdapter, z: torch.Tensor) -> torch.Tensor:
    """``[2, n·H, T, d]`` each head's write ``W_o[:, head] z_head`` to the stream, from the
    output projections' inputs ``z [2, n, T, H·d_head]`` (block-major, as the parts)."""
    H = adapter.n_heads
    out = []
    for i in range(z.shape[1]):
        w = adapter.output_projection(i)  # [d, H·d_head]
        zi = z[:, i].reshape(*z.shape[:1], z.shape[2], H, -1)  # [2, T, H, d_head]
        wi = w.reshape(w.shape[0], H, -1).to(zi.dtype)  # [d, H, d_head]
        out.append(torch.einsum("bthk,dhk->bhtd", zi, wi))
    return torch.cat(out, dim=1)


@dataclass(frozen=True)
class _PatchedRows:
    """The batch rows of patched runs: row r is (pair, part); the hooks that write the donor
    prompt's values into each row's part at its pair's positions."""

    part: str
    pairs: list[_Pair]
    rows: list[tuple[int, int]]
    base: int
    T_max: int
    n_heads: int

    @property
    def donor(self) -> int:
        """The prompt whose values are written in: the other one."""
        return 1 - self.base

    def members(self, index: int) -> list[int]:
        """The rows that patch module ``index`` (a block, or a block's heads)."""
        return [r for r, (_, i) in enumerate(self.rows) if i // self.n_heads == index]

    def head_hook(self, index: int) -> Callable[..., Any]:
        """A pre-hook on block ``index``'s output projection: each of its rows' head slice
        replaced by the donor's at the pair's positions."""
        mine_rows, pairs, T_max, H = self.members(index), self.pairs, self.T_max, self.n_heads
        if not mine_rows:
            return lambda *a: None
        where = torch.zeros(len(mine_rows), T_max, H, 1, dtype=torch.bool)
        for k, r in enumerate(mine_rows):
            j, col = self.rows[r]
            where[k, pairs[j].positions, col % H] = True

        def hook(module, args, kwargs):
            x, put = projection_input(args, kwargs)
            z = by_row(x, len(self.rows)).clone()
            values = torch.zeros(len(mine_rows), T_max, z.shape[-1], dtype=z.dtype)
            for k, r in enumerate(mine_rows):
                pair = pairs[self.rows[r][0]]
                assert pair.z is not None, "a head patch captures the projections' inputs"
                values[k, : pair.T] = pair.z[self.donor, index].to(z.dtype)
            index_t = torch.as_tensor(mine_rows, device=z.device)
            shape = (len(mine_rows), T_max, H, -1)
            new = torch.where(
                where.to(z.device), values.to(z.device).reshape(shape), z[index_t].reshape(shape)
            )
            z[index_t] = new.reshape(len(mine_rows), T_max, -1)
            return put(z.reshape(x.shape))

        return hook

    def write_hook(self, index: int) -> Callable[..., Any]:
        """A hook on module ``index`` (a block or a write module): each of its rows' update,
        state or write replaced by the donor's at the pair's positions."""
        mine_rows, pairs = self.members(index), self.pairs
        if not mine_rows:
            return lambda *a: None
        where = torch.zeros(len(mine_rows), self.T_max, 1, dtype=torch.bool)
        for k, r in enumerate(mine_rows):
            where[k, pairs[self.rows[r][0]].positions] = True

        def hook(module, args, kwargs, output):
            out = block_output_states(output)
            values = torch.zeros(len(mine_rows), self.T_max, out.shape[-1], dtype=out.dtype)
            for k, r in enumerate(mine_rows):  # the donor writes, padded to the batch's length
                pair = pairs[self.rows[r][0]]
                values[k, : pair.T] = pair.writes[self.donor, index].to(out.dtype)
            values = values.to(out.device)
            index_t = torch.as_tensor(mine_rows, device=out.device)
            sel = where.to(out.device)
            if self.part in ("block", "state"):
                new = out.clone()
                # a block's update (h_L − h_{L−1}) or the state h_L itself
                donated = (
                    block_input(args, kwargs)[index_t] + values if self.part == "block" else values
                )
                new[index_t] = torch.where(sel, donated, out[index_t])
                return replace_block_output(output, new)
            write = by_row(out, len(self.rows)).clone()
            write[index_t] = torch.where(sel, values, write[index_t])
            return replace_block_output(output, write.reshape(out.shape))

        return hook


@torch.no_grad()
def _patched_final_states(
    plan: _Plan, pairs: list[_Pair], rows: list[tuple[int, int]]
) -> torch.Tensor:
    """``[R]`` rows (pair, part): the run of the pair's prompt ``plan.base`` (0 clean, 1
    corrupt) with that part's write replaced by the other prompt's at the pair's positions;
    returns h_n at each row's last position ``[R, d]``."""
    base, part = plan.base, plan.parts
    ids, mask = padded_batch(
        [(pairs[j].clean, pairs[j].corrupt)[base] for j, _ in rows], plan.device
    )
    n_heads = plan.adapter.n_heads if part == "head" else 1
    patched = _PatchedRows(part, pairs, rows, base, ids.shape[1], n_heads)
    with Hooks() as hooks:
        for i, module in enumerate(plan.modules):
            if part == "head":
                hooks.before(module, patched.head_hook(i), with_kwargs=True)
            else:
                hooks.after(module, patched.write_hook(i), with_kwargs=True)
        h_n = block_output_states(
            run_until(
                plan.adapter.blocks[-1],
                lambda: plan.model(input_ids=ids, attention_mask=mask, use_cache=False),
            )
        )
    last = torch.as_tensor([pairs[j].T - 1 for j, _ in rows], device=h_n.device)
    return h_n[torch.arange(len(rows), device=last.device), last]


def _gradients(
    model: nn.Module,
    adapter: ModelAdapter,
    modules: Sequence[nn.Module],
    part: str,
    readout: Readout,
    pair: _Pair,
    base: int,
    metric: str,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The run of the pair's prompt ``base``: ``[c, T, d]`` dM/d(each module's write), the
    gradient of the stream right after it (for a block: dM/dh_L; for a head: the output
    projection's output), and ``[d]`` dM/dh_n at the last position (the direct path's
    gradient)."""
    ids = (pair.clean, pair.corrupt)[base].unsqueeze(0).to(device)
    probes: dict[int, torch.Tensor] = {}

    def probe(index: int) -> Callable[..., Any]:
        def hook(module, args, output):
            out = block_output_states(output)
            zero = torch.zeros_like(out, requires_grad=True)
            probes[index] = zero
            return replace_block_output(output, out + zero)

        return hook

    with torch.enable_grad(), Hooks() as hooks:
        for i, module in enumerate(modules):
            hooks.after(module, probe(i))  # heads: the output projection's output
        h = block_output_states(
            run_until(
                adapter.blocks[-1],
                lambda: model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False),
            )
        )
        last = torch.zeros_like(h[:, -1], requires_grad=True)  # dM/dh_n at the last position
        m = _metric(readout, (h[:, -1] + last)[0], pair.target, pair.contrast, metric)
        inputs = [probes[i] for i in range(len(modules))] + [last]
        grads = torch.autograd.grad(m, inputs, allow_unused=True)
    per_module = [
        torch.zeros_like(pair.writes[base, 0]) if g is None else by_row(g, 1)[0].detach()
        for g in grads[:-1]
    ]
    last_grad = grads[-1]
    assert last_grad is not None, "M depends on h_n"
    stacked = torch.stack(per_module)
    if part == "head":  # a head's write enters the stream with the projection's output
        stacked = stacked.repeat_interleave(adapter.n_heads, dim=0)
    return stacked, last_grad[0].detach()


# --- the public functions --------------------------------------------------------------------


def patch(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    clean: PromptSpec | Sequence[PromptSpec],
    corrupt: PromptSpec | Sequence[PromptSpec],
    *,
    target: TokenSpec | Sequence[TokenSpec],
    contrast: TokenSpec | Sequence[TokenSpec] | None = None,
    parts: PatchPart = "block",
    positions: PositionSpec = "target",
    direction: PatchDirection = "noising",
    effect: PatchEffect = "total",
    metric: PatchMetric = "logit_diff",
    method: PatchMethod = "activation",
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> PatchResult | list[PatchResult]:
    """Patch each block's update (or its attention's / MLP's write) between a clean and a
    corrupt prompt and measure the metric at the answer position.

    Parameters
    ----------
    model, tokenizer:
        A decoder-only ``*ForCausalLM`` of a supported family and its tokenizer (``None``
        for id prompts and id tokens).
    clean, corrupt:
        Two prompts (text or ids) of the same token length: the same template with another
        subject. Or two lists of prompts, pair by pair (each pair of one length; pairs may
        differ): a list of results comes back, every pair's patched runs sharing batched
        passes.
    target, contrast:
        The clean prompt's answer and the corrupt prompt's answer: single tokens (an id, or
        a string that is one token, mind the leading space); one per pair or one for all.
        ``metric="logit_diff"`` needs a contrast.
    parts:
        ``"block"`` (the update Δ_L = h_L − h_{L−1}), ``"attn"`` or ``"mlp"`` (that
        sub-layer's write as it enters the stream; not for post-norm models, as in
        :func:`~iglens_viz.causal.ablate`), or ``"head"``: every head of every block, its
        slice of the output projection's input replaced (so exactly its write
        ``W_o[:, head] z_head`` changes; not where a norm follows the projection, Gemma-2/3).
        ``"state"``: the residual state after block L, h_L itself, replaced by the other
        run's h_L at the positions (resid-post patching; every family, total effect and
        activation patching only). Denoising the state at the last block at the last
        position gives effect 1 by construction (h_n there is the clean run's).
    positions:
        Where the update is replaced: ``"target"`` (the last position, default), ``"all"``,
        ``"all_but_first"``, or a list of 0-based positions (see
        :func:`~iglens_viz.causal.positions.resolve_positions`).
    direction:
        ``"noising"``: run the clean prompt with the corrupt prompt's update patched in;
        ``"denoising"``: run the corrupt prompt with the clean prompt's update.
    effect:
        ``"total"``: the rest of the forward pass runs on the patched stream; ``"direct"``:
        later blocks frozen, ``h_n′ = h_n − Δ_L + Δ′_L`` at the positions, read through the
        final norm and head (zero when the positions leave out the last one).
    metric:
        ``"logit_diff"``: logit(target) − logit(contrast) at the last position (after the
        model's soft-capping, as its own logits); ``"prob"``: the target probability there.
    method:
        ``"activation"`` (patched runs) or ``"attribution"`` (the linear estimate; see
        :func:`attribution_patch`).
    memory_budget:
        Bytes for one batched pass's activations (:func:`~iglens_viz.core.memory.activation_rows`).

    Returns
    -------
    PatchResult or list of PatchResult
        One per pair (a list for lists of prompts). Effects are normalised by
        ``M_clean − M_corrupt``; where that is ~0 (below ``1000 · eps`` of the readout dtype
        times ``max(1, |M_clean|, |M_corrupt|)``) they are NaN, the result's ``normalized``
        is false and a :class:`RuntimeWarning` says so; ``raw_effects`` stay.
    """
    _check_options(parts, direction, effect, metric, method)
    batched = _is_batch(clean)
    specs = _pair_specs(clean, corrupt, target, contrast, batched)
    plan = _Plan.of(model, parts, direction, effect, metric, method)
    pairs = [
        _pair(plan, tokenizer, spec, positions, f" of pair {k}" if batched else "")
        for k, spec in enumerate(specs)
    ]
    with eval_mode(model):
        for pair in pairs:
            pair.writes, pair.h_last, pair.z = _capture_pair(
                model, plan.adapter, plan.modules, parts, pair.clean, pair.corrupt, plan.device
            )
            with torch.no_grad():
                m = _metric(plan.readout, pair.h_last, pair.target, pair.contrast, metric).cpu()
            pair.metric = (float(m[0]), float(m[1]))
        if method == "attribution":
            patched = [_attribution_estimate(plan, pair) for pair in pairs]
        elif effect == "direct":
            patched = [_direct_effect(plan, pair) for pair in pairs]
        else:
            patched = _total_effects(plan, pairs, memory_budget)
    results = []
    for pair, values in zip(pairs, patched):  # (a loop: the warnings' stack level is patch's)
        results.append(_result(plan, pair, values, tokenizer))
    return results if batched else results[0]


def _check_options(parts: str, direction: str, effect: str, metric: str, method: str) -> None:
    """Refuse an option :func:`patch` does not know, or a combination it cannot run."""
    _check_choice(parts, PATCH_PARTS, "part")
    _check_choice(direction, PATCH_DIRECTIONS, "direction")
    _check_choice(effect, PATCH_EFFECTS, "effect")
    _check_choice(metric, PATCH_METRICS, "metric")
    _check_choice(method, PATCH_METHODS, "method")
    if parts == "state" and (effect != "total" or method != "activation"):
        raise InvalidRequestError(
            "parts='state' (the residual state h_L patched whole) has a total effect only: "
            "with later blocks frozen the readout of a patched h_L is not a direct path "
            "(h_n carries every earlier block's writes too), and attribution patching of a "
            "state is not implemented; use effect='total' and method='activation', or "
            "parts='block' for the direct effect and the linear estimate of an update"
        )


def _pair_specs(
    clean: Any, corrupt: Any, target: Any, contrast: Any, batched: bool
) -> list[tuple[Any, Any, Any, Any]]:
    """(clean, corrupt, target, contrast) of every pair, the forms checked."""
    if batched != _is_batch(corrupt):
        raise InvalidRequestError(
            "clean and corrupt must both be one prompt, or both lists of prompts (one per pair)"
        )
    cleans = list(cast("Sequence[PromptSpec]", clean)) if batched else [clean]
    corrupts = list(cast("Sequence[PromptSpec]", corrupt)) if batched else [corrupt]
    if len(cleans) != len(corrupts):
        raise InvalidRequestError(
            f"{len(cleans)} clean prompts but {len(corrupts)} corrupt ones: give one per pair"
        )
    if not cleans:
        raise InvalidRequestError("no pairs: pass a clean and a corrupt prompt")
    targets = _per_pair(target, len(cleans), "target") if batched else [target]
    contrasts = _per_pair(contrast, len(cleans), "contrast") if batched else [contrast]
    return list(zip(cleans, corrupts, targets, contrasts))


@dataclass(frozen=True)
class _Plan:
    """What every pair's runs share: the model, the parts patched, and how the metric is
    read and the effect measured."""

    model: nn.Module
    adapter: ModelAdapter
    modules: Sequence[nn.Module]
    readout: Readout
    device: torch.device
    parts: PatchPart
    direction: PatchDirection
    effect: PatchEffect
    metric: PatchMetric
    method: PatchMethod

    @classmethod
    def of(
        cls,
        model: nn.Module,
        parts: Any,
        direction: Any,
        effect: Any,
        metric: Any,
        method: Any,
    ) -> _Plan:
        adapter = adapter_for(model)
        modules = adapter.blocks if parts == "state" else _part_modules(adapter, parts)
        dtype = next(model.parameters()).dtype
        readout = Readout(adapter, torch.float64 if dtype == torch.float64 else torch.float32)
        device = input_device(model)
        return cls(
            model, adapter, modules, readout, device, parts, direction, effect, metric, method
        )

    @property
    def base(self) -> int:
        """The run that is patched: 0 the clean one (noising), 1 the corrupt one."""
        return 0 if self.direction == "noising" else 1

    @property
    def columns(self) -> list[tuple[int, int]]:
        """(1-based block, head or -1) of every patched part."""
        n = self.adapter.n_blocks
        if self.parts == "head":
            return [(b, h) for b in range(1, n + 1) for h in range(self.adapter.n_heads)]
        return [(b, -1) for b in range(1, n + 1)]

    @property
    def labels(self) -> list[str]:
        """Every part's label (:attr:`PatchResult.labels`)."""
        if self.parts == "head":
            return [f"L{b}.h{h}" for b, h in self.columns]
        if self.parts in ("block", "state"):
            return [str(b) if self.parts == "block" else f"h{b}" for b, _ in self.columns]
        return [f"L{b}.{self.parts}" for b, _ in self.columns]


def _pair(
    plan: _Plan,
    tokenizer: PreTrainedTokenizerBase | None,
    spec: tuple[Any, Any, Any, Any],
    positions: PositionSpec,
    which: str,
) -> _Pair:
    """One pair's ids and tokens, checked (``which`` names it in errors)."""
    model, vocab = plan.model, plan.adapter.head.weight.shape[0]
    clean, corrupt, target, contrast = spec
    a = to_input_ids(cast(PromptSpec, clean), tokenizer, model.config, vocab)
    b = to_input_ids(cast(PromptSpec, corrupt), tokenizer, model.config, vocab)
    if a.numel() != b.numel():
        raise InvalidRequestError(
            f"the clean and corrupt prompts{which} must have the same token length to be "
            f"patched position by position: the clean one has {a.numel()} tokens, the "
            f"corrupt one {b.numel()}; pick a corrupt prompt of the same template whose "
            f"subject is as many tokens long"
        )
    t_id = single_token_id(target, tokenizer, vocab, "target")
    o_id = None if contrast is None else single_token_id(contrast, tokenizer, vocab, "contrast")
    if plan.metric == "logit_diff" and o_id is None:
        raise InvalidRequestError(
            "metric='logit_diff' needs a contrast: the corrupt prompt's answer token "
            "(contrast=...), or use metric='prob'"
        )
    if o_id is not None and o_id == t_id and plan.metric == "logit_diff":
        raise InvalidRequestError(
            f"the contrast is the target itself (token id {t_id}): logit(target) − "
            f"logit(contrast) is 0 everywhere; pick the corrupt prompt's answer"
        )
    return _Pair(a, b, t_id, o_id, resolve_positions(positions, a.numel()), torch.empty(0), a[:0])


def _attribution_estimate(plan: _Plan, pair: _Pair) -> np.ndarray:
    """``(c,)`` the linear estimate of every part's patched metric (attribution patching)."""
    base = plan.base
    grads, grad_last = _gradients(
        plan.model,
        plan.adapter,
        plan.modules,
        plan.parts,
        plan.readout,
        pair,
        base,
        plan.metric,
        plan.device,
    )
    diff = (pair.writes[1 - base] - pair.writes[base]).to(grads.device, grads.dtype)
    if plan.effect == "total":
        change = (grads[:, pair.positions] * diff[:, pair.positions]).sum((-1, -2))
    elif pair.T - 1 in pair.positions:
        change = diff[:, -1].to(grad_last.dtype) @ grad_last
    else:
        change = torch.zeros(len(plan.columns))
    return pair.metric[base] + change.double().cpu().numpy()


def _direct_effect(plan: _Plan, pair: _Pair) -> np.ndarray:
    """``(c,)`` the metric read from h_n with each part's write swapped (later blocks frozen)."""
    base = plan.base
    h = pair.h_last[base].expand(len(plan.columns), -1)
    if pair.T - 1 in pair.positions:
        w = pair.writes[:, :, -1].to(h.dtype)  # [2, c, d]
        h = h - w[base] + w[1 - base]
    with torch.no_grad():
        metric = _metric(plan.readout, h, pair.target, pair.contrast, plan.metric)
    return metric.cpu().numpy()


def _total_effects(plan: _Plan, pairs: list[_Pair], memory_budget: int) -> list[np.ndarray]:
    """``(c,)`` per pair: the metric of a patched run per part, every pair's runs batched."""
    c = len(plan.columns)
    patched = [np.empty(c) for _ in pairs]
    rows = [(j, i) for j in range(len(pairs)) for i in range(c)]
    per_pass = activation_rows(plan.model, max(p.T for p in pairs), memory_budget)
    for start in range(0, len(rows), per_pass):
        chunk = rows[start : start + per_pass]
        h_last = _patched_final_states(plan, pairs, chunk)
        for r, (j, i) in enumerate(chunk):
            with torch.no_grad():
                value = _metric(
                    plan.readout, h_last[r], pairs[j].target, pairs[j].contrast, plan.metric
                )
            patched[j][i] = float(value)
    return patched


def _result(
    plan: _Plan, pair: _Pair, values: np.ndarray, tokenizer: PreTrainedTokenizerBase | None
) -> PatchResult:
    """One pair's :class:`PatchResult`: its effects normalised (NaN where the two prompts'
    metrics are too close to divide by, with a warning)."""
    eps = torch.finfo(plan.readout.dtype).eps
    m_clean, m_corrupt = pair.metric
    raw = m_clean - values if plan.direction == "noising" else values - m_corrupt
    denom = m_clean - m_corrupt
    ok = abs(denom) > 1000 * eps * max(1.0, abs(m_clean), abs(m_corrupt))
    notes = []
    if not ok:
        notes.append(
            f"M_clean − M_corrupt = {denom:.3g} is ~0 ({plan.metric}: clean {m_clean:.6g}, "
            f"corrupt {m_corrupt:.6g}): the normalised effects are undefined (NaN); "
            f"raw_effects hold the unnormalised ones"
        )
        warnings.warn(notes[-1], RuntimeWarning, stacklevel=3)
    clean_ids, corrupt_ids = pair.clean.numpy(), pair.corrupt.numpy()
    tokens = [pair.target] + ([] if pair.contrast is None else [pair.contrast])
    columns = plan.columns
    return PatchResult(
        effects=raw / denom if ok else np.full(len(raw), np.nan),
        raw_effects=raw,
        patched=values,
        clean_metric=m_clean,
        corrupt_metric=m_corrupt,
        labels=plan.labels,
        layers=[b for b, _ in columns],
        positions=pair.positions,
        clean_ids=clean_ids,
        corrupt_ids=corrupt_ids,
        target_id=pair.target,
        contrast_id=pair.contrast,
        parts=plan.parts,
        direction=plan.direction,
        effect=plan.effect,
        metric=plan.metric,
        method=plan.method,
        n_blocks=plan.adapter.n_blocks,
        heads=[h for _, h in columns] if plan.parts == "head" else None,
        normalized=ok,
        warnings=notes,
        token_text=token_texts(tokenizer, clean_ids, corrupt_ids, np.asarray(tokens)),
    )


def attribution_patch(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    clean: PromptSpec | Sequence[PromptSpec],
    corrupt: PromptSpec | Sequence[PromptSpec],
    *,
    target: TokenSpec | Sequence[TokenSpec],
    contrast: TokenSpec | Sequence[TokenSpec] | None = None,
    parts: PatchPart = "block",
    positions: PositionSpec = "target",
    direction: PatchDirection = "noising",
    effect: PatchEffect = "total",
    metric: PatchMetric = "logit_diff",
) -> PatchResult | list[PatchResult]:
    """Attribution patching: :func:`patch`'s effects to first order, from one forward and one
    backward pass per pair.

    ``M_patched,L ≈ M_run + Σ_{t ∈ positions} ∇_{h_L[t]} M · (Δ′_L[t] − Δ_L[t])``: the
    gradient of M with respect to the stream right after block L (after the sub-layer's
    write for ``parts="attn"``/``"mlp"``) in the run that is patched (the clean run for
    noising, the corrupt run for denoising), times the change the patch makes. With
    ``effect="direct"`` the gradient is the readout's at h_n (the direct path only). The
    estimate replaces ``patched`` and is normalised as :func:`patch` normalises.
    """
    return patch(
        model,
        tokenizer,
        clean,
        corrupt,
        target=target,
        contrast=contrast,
        parts=parts,
        positions=positions,
        direction=direction,
        effect=effect,
        metric=metric,
        method="attribution",
    )
