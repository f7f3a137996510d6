"""Block ablations of many prompts in padded batches, read out at the target positions only.

:func:`~iglens_viz.causal.ablation.ablate` studies one prompt and reads the model's own
logits at every position. A study ablates every block of hundreds of prompts, under several
modes, and needs one probability per target: here the ablated rows of several prompts (and
modes) share each forward pass, right-padded with an attention mask, and the pass stops at
h_n. The target probability is then the readout's f(h_n) at the target positions only, the
function IG-Lens's own last boundary reads (checked against the model's logits by every
trace), so no ``[rows × T × vocab]`` logits are computed for positions without a target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from ..core.capture import input_device, padded_batch
from ..core.hooks import Hooks, block_input, block_output_states, replace_block_output, run_until
from ..core.memory import DEFAULT_MEMORY_BUDGET, activation_rows, block_plan
from ..core.model_mode import eval_mode
from ..core.readout import Readout

if TYPE_CHECKING:
    from ..adapters import ModelAdapter

__all__ = ["AblationJob", "ablated_probabilities"]


@dataclass
class AblationJob:
    """Ablate every block of one prompt, one block per batch row."""

    input_ids: torch.Tensor
    """``[T]`` the prompt's token ids."""
    target_ids: np.ndarray
    """``[T]`` the target at each position (-1: none, not read out)."""
    updates: torch.Tensor | None = None
    """``[n, T, d]`` what replaces block L's update (``h_L := h_{L-1} + updates[L-1]``), or
    None for zero ablation (``h_L := h_{L-1}``)."""


@torch.no_grad()
def ablated_probabilities(
    model: nn.Module,
    adapter: ModelAdapter,
    readout: Readout,
    jobs: list[AblationJob],
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> list[np.ndarray]:
    """``(T, n)`` per job: the readout's target probability at h_n when each block is
    ablated (NaN where there is no target).

    Rows (job, block) run in forward passes of as many rows as ``memory_budget`` allows;
    each pass is right-padded to its longest prompt with an attention mask (a causal
    model's real positions never read the pads), so each row equals its prompt ablated
    alone up to the rounding of other kernel shapes.
    """
    n = adapter.n_blocks
    rows = [(j, block) for j in range(len(jobs)) for block in range(n)]
    out = [np.full((job.input_ids.numel(), n), np.nan) for job in jobs]
    longest = max(job.input_ids.numel() for job in jobs)
    per_pass = activation_rows(model, longest, memory_budget)
    device = input_device(model)
    for start in range(0, len(rows), per_pass):
        chunk = rows[start : start + per_pass]
        h_n = _ablated_final_states(model, adapter, jobs, chunk, device)
        _read_targets(readout, jobs, chunk, h_n, out, memory_budget)
    return out


def _ablated_final_states(
    model: nn.Module,
    adapter: ModelAdapter,
    jobs: list[AblationJob],
    chunk: list[tuple[int, int]],
    device: torch.device,
) -> torch.Tensor:
    """``[R, T_max, d]`` h_n of the chunk's rows, each with its own block ablated."""
    ids, mask = padded_batch([jobs[j].input_ids for j, _ in chunk], device)
    by_block: dict[int, list[int]] = {}
    for r, (_, block) in enumerate(chunk):
        by_block.setdefault(block, []).append(r)

    def ablate_hook(block: int) -> Callable[..., Any]:
        members = by_block.get(block)

        def hook(module, args, kwargs, output):
            if not members:
                return None
            h = block_output_states(output)
            h_in = block_input(args, kwargs)
            index = torch.as_tensor(members, device=h.device)
            new = h_in.index_select(0, index)
            given = [jobs[chunk[r][0]].updates for r in members]
            if any(u is not None for u in given):
                update = torch.zeros_like(new)
                for k, u in enumerate(given):
                    if u is not None:
                        update[k, : u.shape[1]] = u[block].to(new.device, new.dtype)
                new = new + update
            h = h.clone()
            h[index] = new.to(h.dtype)
            return replace_block_output(output, h)

        return hook

    with Hooks() as hooks, eval_mode(model):
        for i, module in enumerate(adapter.blocks):
            hooks.after(module, ablate_hook(i), with_kwargs=True)
        last = run_until(
            adapter.blocks[-1],
            lambda: model(input_ids=ids, attention_mask=mask, use_cache=False),
        )
    return block_output_states(last)


def _read_targets(
    readout: Readout,
    jobs: list[AblationJob],
    chunk: list[tuple[int, int]],
    h_n: torch.Tensor,
    out: list[np.ndarray],
    budget: int,
) -> None:
    """f(h_n) at every target position of the chunk's rows, into ``out[job][:, block]``."""
    row_index: list[int] = []
    positions: list[int] = []
    targets: list[int] = []
    for r, (j, _) in enumerate(chunk):
        where = np.flatnonzero(np.asarray(jobs[j].target_ids) >= 0)
        row_index += [r] * len(where)
        positions += where.tolist()
        targets += np.asarray(jobs[j].target_ids)[where].tolist()
    if not row_index:
        return
    states = h_n[
        torch.as_tensor(row_index, device=h_n.device), torch.as_tensor(positions, device=h_n.device)
    ]
    ids = torch.as_tensor(targets)
    rows, cols = block_plan(
        len(targets), readout.vocab_size, readout.dtype, budget, head_width=readout.head_block_width
    )
    probs = (
        torch.cat(
            [
                readout.probability(states[r : r + rows], ids[r : r + rows], block_columns=cols)
                for r in range(0, len(targets), rows)
            ]
        )
        .double()
        .cpu()
        .numpy()
    )
    for k, (r, t) in enumerate(zip(row_index, positions)):
        j, block = chunk[r]
        out[j][t, block] = probs[k]
