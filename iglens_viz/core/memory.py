"""Memory plans: how many rows fit in a byte budget.

Every planner of the package sizes its chunks with one rule, :func:`rows_within`: as many
rows of a given cost as the budget holds, at least one, at most what there is. The plans:

- :func:`block_plan`: rows × vocabulary columns of one logits block (the readout map, the
  interior path and Riemann gradients, the study's lens readings, the batched ablation's
  readout).
- :func:`ablation_rows`: batch rows of one forward pass of :func:`~iglens_viz.causal.ablate`
  (their ``[rows × T × vocab]`` logits).
- :func:`activation_rows`: batch rows of one forward pass of the study's batched ablation
  (the model's activations, which stop at h_n).
- the readout's tiles (:func:`~iglens_viz.core.readout.tile_plan`) are sized from the CPU's
  caches within a :func:`block_plan`, by the same rule.
- :func:`kv_cache_bytes`: one row's copy of a prompt's key/value cache (the gate game's rows).

And the floor under every budget: :func:`min_memory_budget`, one row's readout tile.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .readout import Readout

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "ablation_rows",
    "activation_rows",
    "block_plan",
    "budget_with_floor",
    "kv_cache_bytes",
    "min_memory_budget",
    "rows_within",
]

DEFAULT_MEMORY_BUDGET = 256 * 2**20
"""Bytes allowed for one chunk's logits and their temporaries."""

# A block holds the logits plus about two more temporaries (logsumexp, top-k); an ablation's
# logits likewise (log-softmax, gather).
_LOGIT_COPIES = 3
# Vocabulary blocks narrower than this waste the matmul; rows give way first.
_MIN_BLOCK_COLUMNS = 4096


def rows_within(budget: int, per_row: int, limit: int | None = None) -> int:
    """How many rows costing ``per_row`` each fit in ``budget`` (any unit, the same for
    both): at least one, whatever the budget, and at most ``limit`` (when given)."""
    rows = max(1, int(budget) // max(1, int(per_row)))
    return rows if limit is None else min(int(limit), rows)


def block_plan(
    n_rows: int,
    vocab_size: int,
    dtype: torch.dtype,
    budget_bytes: int,
    copies: int = _LOGIT_COPIES,
    head_width: int = 0,
    row_width: int = 0,
) -> tuple[int, int]:
    """(rows, vocabulary columns) of one logits block that fits in ``budget_bytes``.

    A block of r rows × c columns costs ``itemsize · (c · (copies · r + head_width) +
    r · row_width)`` bytes: the logits and ``copies − 1`` temporaries of their size, the head
    rows of those columns when they are upcast to the readout dtype (``head_width = d'``; 0
    when the head is read in place), and per-row vectors such as interpolated states
    (``row_width``). Rows come first: the more rows share a block, the fewer times the head
    weight is read (it is read once per row chunk). Columns shrink to fit, down to one; one
    row and one column is the floor whatever the budget.
    """
    itemsize = torch.finfo(dtype).bits // 8
    cells = max(1, int(budget_bytes) // itemsize)
    min_cols = min(vocab_size, _MIN_BLOCK_COLUMNS)
    rows = rows_within(cells - min_cols * head_width, copies * min_cols + row_width, n_rows)
    cols = rows_within(cells - rows * row_width, copies * rows + head_width, vocab_size)
    return rows, cols


def ablation_rows(n_tokens: int, vocab_size: int, budget_bytes: int) -> int:
    """Batch rows of one ablation forward pass: each holds ``[T × vocab]`` float32 logits
    and two temporaries of their size (log-softmax, gather)."""
    return rows_within(budget_bytes, n_tokens * vocab_size * 4 * _LOGIT_COPIES)


def activation_rows(model: torch.nn.Module, n_tokens: int, budget_bytes: int) -> int:
    """Batch rows of ``n_tokens`` tokens whose activations fit in ``budget_bytes``: per
    token about 8 residual-width and 3 MLP-width temporaries, and two attention rows per
    head, in the model's dtype."""
    config = model.config
    d = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 1024)
    ffn = int(getattr(config, "intermediate_size", 0) or getattr(config, "ffn_dim", 0) or 4 * d)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0) or 16)
    itemsize = next(model.parameters()).element_size()
    return rows_within(budget_bytes, itemsize * n_tokens * (8 * d + 3 * ffn + 2 * heads * n_tokens))


def kv_cache_bytes(model: torch.nn.Module, n_tokens: int) -> int:
    """Bytes of the model's key/value cache of ``n_tokens`` positions: per block and token
    a key and a value of ``n_kv_heads × d_head``, in the model's dtype."""
    config = model.config
    d = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 1024)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0) or 16)
    kv_heads = int(getattr(config, "num_key_value_heads", 0) or heads)
    d_head = int(getattr(config, "head_dim", 0) or d // heads)
    blocks = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or 1)
    itemsize = next(model.parameters()).element_size()
    return 2 * blocks * kv_heads * d_head * itemsize * max(1, int(n_tokens))


# One row's readout tile: the narrowest vocabulary block the readout's CPU tiles use
# (readout._MIN_TILE_COLUMNS), with the logits-sized temporaries of a gradient pass
# (estimators._GRADIENT_COPIES) and about five state-wide vectors per row.
_FLOOR_COLUMNS = 512
_FLOOR_COPIES = 4
_FLOOR_ROW_VECTORS = 5


def min_memory_budget(readout: Readout, width: int = 0) -> int:
    """The smallest ``memory_budget`` an :class:`~iglens_viz.core.lens.IGLens` runs with:
    bytes for one row's readout tile, ``min(V, 512)`` vocabulary columns of logits and their
    temporaries (plus the head rows of those columns when a bf16/fp16 head is upcast) and a
    few per-row vectors of ``width`` (the residual width d; d' when 0).

    Below it every row would stream the vocabulary a few columns at a time, and a call
    takes hours instead of seconds.
    """
    itemsize = torch.finfo(readout.dtype).bits // 8
    columns = min(readout.vocab_size, _FLOOR_COLUMNS)
    per_column = _FLOOR_COPIES + readout.head_block_width
    return itemsize * (
        columns * per_column + _FLOOR_ROW_VECTORS * max(int(width), readout.feature_size)
    )


def budget_with_floor(budget: int, readout: Readout, model: torch.nn.Module) -> int:
    """``budget``, or :func:`min_memory_budget` with a warning when it is below that."""
    width = getattr(getattr(model, "config", None), "hidden_size", 0)
    floor = min_memory_budget(readout, width if isinstance(width, int) else 0)
    if budget >= floor:
        return budget
    meant = (
        f"; if you meant {budget} MB, pass memory_budget={budget} * 2**20" if budget < 2**16 else ""
    )
    warnings.warn(
        f"memory_budget={budget} bytes is below one readout row's tile "
        f"({floor} bytes for this model's {readout.vocab_size}-token vocabulary in "
        f"{readout.dtype}); using {floor}. The budget is in bytes{meant}",
        UserWarning,
        stacklevel=3,
    )
    return floor
