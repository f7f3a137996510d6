"""The game's runs: plain runs that record what the gates need, and gated runs of the one
gated token over the clean prefix's key/value cache (values, and gradients with respect to the
gates)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from ...core.boundaries import is_sublayer
from ...core.capture import input_device
from ...core.components import component_names
from ...core.hooks import (
    Hooks,
    block_input,
    block_output_states,
    by_row,
    projection_input,
    replace_block_output,
    run_until,
)
from ...core.kv_cache import cache_keyword, prefix_cache, returned_cache
from ...core.memory import kv_cache_bytes, rows_within
from ...core.model_mode import eval_mode
from ..ablation import _part_modules

GRADIENT_ROW_COST = 3
"""A gated run with its backward pass, in runs without (for progress)."""


# --- the gates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gating:
    """Which modules carry the gates and which gate each module's write obeys."""

    modules: tuple[nn.Module, ...]
    """Hooked in forward order: the blocks, or each block's attention and MLP write modules."""
    whole_blocks: bool
    """A module's write is its output minus its input (a block) or its output (a write module)."""
    gate_of: torch.Tensor
    """``(M,)`` the gate of each module."""
    n_gates: int


def gating_for(adapter: Any, boundaries: list[float]) -> Gating:
    n = adapter.n_blocks
    if is_sublayer(boundaries):
        adapter.require_sublayers()
        attn, mlp = _part_modules(adapter, "attn"), _part_modules(adapter, "mlp")
        modules = tuple(m for pair in zip(attn, mlp) for m in pair)
        return Gating(modules, False, torch.arange(2 * n), 2 * n)
    ends = torch.as_tensor([float(b) for b in boundaries[1:]])
    # block L (1-based) lies in the segment whose end is the first boundary ≥ L
    gate_of = torch.searchsorted(ends, torch.arange(1, n + 1, dtype=ends.dtype))
    return Gating(tuple(adapter.blocks), True, gate_of, len(boundaries) - 1)


def module_write(gating: Gating, args: tuple, kwargs: dict, output: Any, rows: int) -> torch.Tensor:
    """``[rows, 1, d]`` what a hooked module adds to the stream at the gated position."""
    out = block_output_states(output)
    if gating.whole_blocks:
        return out - block_input(args, kwargs)
    return by_row(out, rows)


# --- plain runs ------------------------------------------------------------------------------


@dataclass
class Run:
    """What a plain run of a sequence up to t recorded at t."""

    writes: torch.Tensor  # [M, d] each gated module's write
    states: torch.Tensor  # [n+1, d] h_0 … h_n
    mids: torch.Tensor | None  # [n, d] h_L.attn (sub-layer gates)
    logits: torch.Tensor  # [V] the model's own logits
    cache: Any = None  # key/value cache of the positions before t
    attn: torch.Tensor | None = None  # [n, d] each block's attention write (components)
    z: torch.Tensor | None = None  # [n, H·d_head] output projections' inputs (components)


@torch.no_grad()
def plain_run(
    model: nn.Module,
    adapter: Any,
    gating: Gating,
    ids: torch.Tensor,
    *,
    keep_cache: bool,
    components: bool,
) -> Run:
    """Run ``ids`` (``[t+1]``) once, keeping at its last position what the game needs."""
    n = adapter.n_blocks
    kept: dict[str, dict[int, torch.Tensor]] = {"w": {}, "h": {}, "mid": {}, "attn": {}, "z": {}}

    def at_last(x: torch.Tensor) -> torch.Tensor:
        return by_row(x, 1)[0, -1].detach().clone()

    def recordmodule_write(i: int) -> Callable[..., None]:
        def hook(module, args, kwargs, output):
            kept["w"][i] = module_write(gating, args, kwargs, output, 1)[0, -1].detach().clone()

        return hook

    def record(kind: str, i: int) -> Callable[..., None]:
        def hook(module, args, output):
            kept[kind][i] = at_last(block_output_states(output))

        return hook

    def record_z(i: int) -> Callable[..., None]:
        def hook(module, args, kwargs):
            kept["z"][i] = at_last(projection_input(args, kwargs)[0])

        return hook

    def first_input(module, args, kwargs):
        kept["h"][0] = at_last(block_input(args, kwargs))

    def record_mid(i: int) -> Callable[..., None]:
        def hook(module, args):
            kept["mid"][i] = at_last(args[0])

        return hook

    def last_row_only(module, args):  # the head runs on position t alone
        return (args[0][:, -1:], *args[1:])

    with Hooks() as hooks, eval_mode(model):
        hooks.before(adapter.blocks[0], first_input, with_kwargs=True)
        for i, module in enumerate(gating.modules):
            hooks.after(module, recordmodule_write(i), with_kwargs=True)
        for i, block in enumerate(adapter.blocks):
            hooks.after(block, record("h", i + 1))
        if not gating.whole_blocks:
            for i, mid in enumerate(adapter.require_sublayers()):
                hooks.before(mid, record_mid(i))
        if components:
            for i, module in enumerate(_part_modules(adapter, "attn")):
                hooks.after(module, record("attn", i))
            if adapter.heads_split:
                for i, module in enumerate(adapter.require_heads()):
                    hooks.before(module, record_z(i), with_kwargs=True)
        hooks.before(adapter.head, last_row_only)
        batch = ids[None].to(input_device(model))
        out = model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=keep_cache)
    cache = None
    if keep_cache and ids.numel() > 1:
        cache = prefix_cache(returned_cache(out), ids.numel() - 1)

    def stacked(kind: str, count: int) -> torch.Tensor | None:
        return torch.stack([kept[kind][i] for i in range(count)]) if kept[kind] else None

    return Run(
        writes=cast(torch.Tensor, stacked("w", len(gating.modules))),
        states=cast(torch.Tensor, stacked("h", n + 1)),
        mids=stacked("mid", n),
        logits=out.logits[0, -1].detach(),
        cache=cache,
        attn=stacked("attn", n),
        z=stacked("z", n),
    )


def own_probability(logits: torch.Tensor, target: int) -> float:
    """The model's own probability of ``target`` from its logits (float64 softmax)."""
    return float(torch.softmax(logits.double(), dim=-1)[target])


# --- gated runs ------------------------------------------------------------------------------


@dataclass
class Game:
    """Everything a gated run needs besides the gates."""

    model: nn.Module
    adapter: Any
    readout: Any
    gating: Gating
    token: int  # the clean token at t
    target: int
    baseline: torch.Tensor  # [M, d] each module's closed-gate write
    cache: Any  # the clean prefix's key/value cache (None at t = 0)
    prefix: int  # t
    memory_budget: int
    report: Callable[[int, int], None] | None = None
    """Told ``(done, total)`` rows after every chunk (a gradient row counts as 3)."""
    total: int = 0
    done: int = 0

    def ran(self, rows: int) -> None:
        """Count ``rows`` more run and report it."""
        self.done += rows
        if self.report is not None:
            self.report(self.done, self.total)

    def chunk_rows(self) -> int:
        """Gated rows per pass: as many as their copies of the prefix cache fit in budget."""
        per_row = kv_cache_bytes(self.model, self.prefix) * 2 + 1  # the cache and its update
        return rows_within(self.memory_budget, per_row)


@dataclass
class Probes:
    """What a gated run with gradients kept, for the component split."""

    stream: dict[int, torch.Tensor] = field(default_factory=dict)  # zero probes after blocks
    writes: dict[int, torch.Tensor] = field(default_factory=dict)  # blocks' re-run writes
    attn: dict[int, torch.Tensor] = field(default_factory=dict)
    z: dict[int, torch.Tensor] = field(default_factory=dict)


def gated_final_states(
    game: Game, gates: torch.Tensor, probes: Probes | None = None
) -> torch.Tensor:
    """``[B, d]`` h_n[t] of B gated runs, gate values ``gates [B, k]`` (differentiable in
    ``gates`` when it requires grad). With ``probes``, zero probes are added after every
    block and the re-run writes kept, for the component split."""
    model, adapter, gating = game.model, game.adapter, game.gating
    B = gates.shape[0]
    per_module = gates[:, gating.gate_of]  # [B, M]

    def gate(i: int) -> Callable[..., Any]:
        def hook(module, args, kwargs, output):
            out = block_output_states(output)
            write = module_write(gating, args, kwargs, output, B)
            b = game.baseline[i].to(write)
            a = per_module[:, i, None, None].to(write)
            gated = b + a * (write - b)
            if probes is not None and gating.whole_blocks:
                probes.writes[i] = write[:, -1]
            new = block_input(args, kwargs) + gated if gating.whole_blocks else gated
            return replace_block_output(output, new.reshape(out.shape))

        return hook

    def probe(i: int) -> Callable[..., Any]:
        def hook(module, args, output):
            out = block_output_states(output)
            zero = torch.zeros_like(out, requires_grad=True)
            cast(Probes, probes).stream[i] = zero
            return replace_block_output(output, out + zero)

        return hook

    def keep(table: dict[int, torch.Tensor], i: int) -> Callable[..., None]:
        def hook(module, args, output):
            table[i] = by_row(block_output_states(output), B)[:, -1]

        return hook

    def keep_z(i: int) -> Callable[..., None]:
        def hook(module, args, kwargs):
            cast(Probes, probes).z[i] = by_row(projection_input(args, kwargs)[0], B)[:, -1]

        return hook

    device = input_device(model)
    ids = torch.full((B, 1), game.token, dtype=torch.long, device=device)
    mask = torch.ones(B, game.prefix + 1, dtype=torch.long, device=device)
    extra: dict[str, Any] = {}
    if game.cache is not None:
        rows_cache = copy.deepcopy(game.cache)
        rows_cache.batch_repeat_interleave(B)
        extra = {cache_keyword(model): rows_cache, "use_cache": True}
    with Hooks() as hooks, eval_mode(model):
        for i, module in enumerate(gating.modules):
            hooks.after(module, gate(i), with_kwargs=True)
        if probes is not None:
            for i, block in enumerate(adapter.blocks):
                hooks.after(block, probe(i))
            for i, module in enumerate(_part_modules(adapter, "attn")):
                hooks.after(module, keep(probes.attn, i))
            if adapter.heads_split:
                for i, module in enumerate(adapter.require_heads()):
                    hooks.before(module, keep_z(i), with_kwargs=True)
        output = run_until(
            adapter.blocks[-1], lambda: model(input_ids=ids, attention_mask=mask, **extra)
        )
    return block_output_states(output)[:, -1]


def values_at(game: Game, gates: torch.Tensor) -> np.ndarray:
    """``(R,)`` G at every row of ``gates [R, k]`` (float64), in chunks that fit the budget."""
    out = []
    step = game.chunk_rows()
    with torch.no_grad():
        for r0 in range(0, gates.shape[0], step):
            h = gated_final_states(game, gates[r0 : r0 + step])
            out.append(game.readout.probability(h, game.target).double().cpu())
            game.ran(h.shape[0])
    return torch.cat(out).numpy() if out else np.zeros(0)


@dataclass
class Gradients:
    """First-order terms at the diagonal's midpoints."""

    gates: np.ndarray  # [m, k] ∂G/∂a_j
    components: np.ndarray | None = None  # [m, n, C] ∂G/∂h_L · (w_c − b_c)


def gradients_at(
    game: Game, points: torch.Tensor, component_baseline: torch.Tensor | None
) -> Gradients:
    """∂G/∂a at each row of ``points [m, k]`` (one backward pass per chunk of rows); with
    ``component_baseline`` (``[n, C, d]``), each block's components' first-order terms."""
    grads, parts = [], []
    step = game.chunk_rows()
    for r0 in range(0, points.shape[0], step):
        gates = points[r0 : r0 + step].clone().requires_grad_(True)
        probes = Probes() if component_baseline is not None else None
        with torch.enable_grad():
            h = gated_final_states(game, gates, probes)
            value = game.readout.probability(h, game.target).sum()
            inputs = [gates] + (
                [probes.stream[i] for i in range(game.adapter.n_blocks)] if probes else []
            )
            found = torch.autograd.grad(value, inputs, allow_unused=True)
        grads.append(found[0].double().cpu())
        if probes is not None and component_baseline is not None:
            stream = [
                torch.zeros_like(h) if g is None else by_row(g, h.shape[0])[:, -1]
                for g in found[1:]
            ]
            parts.append(component_terms(game, probes, stream, component_baseline))
        game.ran(GRADIENT_ROW_COST * gates.shape[0])
    return Gradients(torch.cat(grads).numpy(), torch.cat(parts).numpy() if parts else None)


def component_writes(
    adapter: Any, write: torch.Tensor, attn: torch.Tensor, z: torch.Tensor | None, block: int
) -> torch.Tensor:
    """``[..., C, d]`` one block's component writes (the columns of :func:`component_names`):
    per head ``W_o[:, head] z_head``, the MLP (the block's write less its attention's) and the
    attention's remainder (its bias); or the attention and the MLP."""
    mlp = write - attn
    if not adapter.heads_split:
        return torch.stack([attn, mlp], dim=-2)
    H = adapter.n_heads
    z = cast(torch.Tensor, z)  # kept wherever the heads split
    w_o = adapter.output_projection(block).detach().to(z)  # [d, H·d_head]
    heads = torch.einsum(
        "...hk,dhk->...hd", z.reshape(*z.shape[:-1], H, -1), w_o.reshape(-1, H, w_o.shape[-1] // H)
    )
    rest = attn - heads.sum(-2)
    return torch.cat([heads, mlp[..., None, :], rest[..., None, :]], dim=-2)


def component_terms(
    game: Game, probes: Probes, stream: list[torch.Tensor], baseline: torch.Tensor
) -> torch.Tensor:
    """``[B, n, C]`` ∂G/∂h_L[t] · (w_c − b_c) for every block's components."""
    out = []
    for L in range(game.adapter.n_blocks):
        writes = component_writes(
            game.adapter,
            probes.writes[L].detach(),
            probes.attn[L].detach(),
            probes.z[L].detach() if L in probes.z else None,
            L,
        )  # [B, C, d]
        diff = writes - baseline[L].to(writes)
        out.append((diff * stream[L].detach().to(writes)[:, None, :]).sum(-1))
    return torch.stack(out, dim=1).double().cpu()


def baseline_components(adapter: Any, corrupt_run: Run | None, clean_run: Run) -> torch.Tensor:
    """``[n, C, d]`` each block's component writes with its gate closed: the counterfactual
    run's (zeros for the removal game)."""
    if corrupt_run is None:
        C = len(component_names(adapter))
        return clean_run.states.new_zeros(adapter.n_blocks, C, clean_run.states.shape[-1])
    return torch.stack(
        [
            component_writes(
                adapter,
                corrupt_run.writes[L],
                cast(torch.Tensor, corrupt_run.attn)[L],
                None if corrupt_run.z is None else corrupt_run.z[L],
                L,
            )
            for L in range(adapter.n_blocks)
        ]
    )
