"""Ablation: how much does the target probability drop when a block, or a part of one,
adds nothing?

IG-Lens scores a block by how much more probability the readout can see after it (a
conditional marginal). Ablation asks the causal question inside the real forward pass: make
block L contribute nothing to the residual stream (``h_L := h_{L-1}``), let every later block
run on the changed stream, and measure the model's own output probability of the target.

Finer parts can be removed too (``part``): the attention's or the MLP's write to the stream,
as it enters the stream, or the write of one attention head (its slice of the output
projection's input), so a head's IG-Lens share can be set against what removing it does.

All ablations of one prompt run as one batched forward pass: the prompt is repeated along the
batch axis, and a hook on each block (or on its attention, MLP or output projection) replaces
the values of exactly those batch rows that ablate it. The batch is cut into chunks so the
``[rows × T × vocab]`` logits stay under a memory budget.

>>> res = ablate(model, tokenizer, "The capital of France is")   # doctest: +SKIP
>>> res.drop.shape                                               # doctest: +SKIP
(6, 30)
>>> heads = ablate(model, tokenizer, "The capital of France is", part="head",
...                layers=[20], heads=[0, 3])                      # doctest: +SKIP
>>> heads.column_labels                                          # doctest: +SKIP
['L20.h0', 'L20.h3']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import numpy as np
import torch
from torch import nn

from ..adapters import ModelAdapter, adapter_for
from ..core.boundaries import segment_parts
from ..core.capture import input_device
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
from ..core.memory import DEFAULT_MEMORY_BUDGET, ablation_rows, activation_rows
from ..core.model_mode import eval_mode
from ..core.readout import target_probability
from ..core.request import PromptSpec, TargetSpec
from ..core.targets import NO_TARGET, resolve_targets, token_texts
from ..errors import InvalidRequestError, UnsupportedModelError
from .positions import PositionSpec, resolve_positions

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from transformers import PreTrainedTokenizerBase

    from ..core.result import AttributionResult

__all__ = [
    "ABLATION_MODES",
    "ABLATION_PARTS",
    "AblationMode",
    "AblationPart",
    "AblationResult",
    "ablate",
]

AblationMode = Literal["zero", "mean"]
"""How a block is made to add nothing; see :data:`ABLATION_MODES`."""
ABLATION_MODES: tuple[AblationMode, ...] = get_args(AblationMode)
"""``zero``: the block's output is its input (its update is skipped); for a part, its write
is zero. ``mean``: the block's update (output − input), or the part's write, is replaced by
its mean over a reference set of prompts of the same template and token length, position by
position (``references=``); never by a mean over the prompt's own positions."""

AblationPart = Literal["block", "attn", "mlp", "head"]
"""What one ablation removes; see :data:`ABLATION_PARTS`."""
ABLATION_PARTS: tuple[AblationPart, ...] = get_args(AblationPart)
"""``block``: the whole block's update. ``attn``: the attention's write to the residual stream
as it enters it (Gemma-2/3: after the norm that follows the attention). ``mlp``: the MLP's
write, likewise. ``head``: one attention head's write (its slice of the output projection's
input), where the attention's write is linear in its heads."""

_AppliedMode = Literal[AblationMode, "given"]
"""What a result's ``mode`` reads: an :data:`AblationMode`, or ``given`` (``updates=``)."""

Label = int | tuple[int, ...]
"""A column label of :attr:`AblationResult.layers`: one 1-based block, or a group."""

LayerSpec = Iterable[int | Iterable[int]]
"""``layers=`` of :func:`ablate`: 1-based block numbers or groups (iterables) of them."""


@dataclass
class AblationResult:
    """Causal effect of ablating each block (or group of blocks) on a target probability.

    T is the number of positions, c the number of ablations (columns): one per entry of
    ``layers``. Positions without a target (the last one under ``target="next"``) hold NaN.
    """

    tokens: list[str]
    """The input tokens as text, one per position (untrusted: escape before display)."""
    input_ids: np.ndarray
    """``(T,)`` input token ids."""
    target_ids: np.ndarray
    """``(T,)`` the token whose probability is measured at each position (-1: none)."""
    layers: list[Label]
    """``c`` column labels: the 1-based block ablated in each column (an int), or a tuple of
    blocks ablated together when a group was asked for. ``layers=None`` gives ``[1, …, n]``,
    so column ``L - 1`` is block ``L``. For ``part="head"``: the block (an int) of each
    column, parallel to :attr:`heads`."""
    clean_probs: np.ndarray
    """``(T,)`` the model's own probability of the target with every block intact."""
    ablated_probs: np.ndarray
    """``(T, c)`` the probability of the target with the column's block(s) (or part of them)
    ablated."""
    drop: np.ndarray
    """``(T, c)`` ``clean_probs[:, None] - ablated_probs``: positive where the block (or part)
    raises the target probability in the real forward pass."""
    mode: _AppliedMode = "zero"
    """``zero`` (output := input; a part's write := 0) or ``mean`` (the update, or the part's
    write, := its mean over positions)."""
    n_blocks: int = 0
    """n, the number of decoder blocks of the model."""
    token_text: dict[int, str] = field(default_factory=dict, repr=False)
    """Decoded text of every token id the result refers to."""
    part: AblationPart = "block"
    """What each column removes: ``block``, ``attn``, ``mlp`` or ``head`` (see
    :data:`ABLATION_PARTS`)."""
    heads: list[int] | None = None
    """For ``part="head"``: the 0-based head of each column, parallel to :attr:`layers`
    (columns run block-major: every asked head of the first block, then of the next).
    None for the other parts."""
    positions: list[int] | None = None
    """The 0-based positions where the ablation acted (None: read as every position)."""
    n_references: int = 0
    """For ``mode="mean"``: how many reference prompts the means were taken over."""

    @property
    def target_tokens(self) -> list[str]:
        """``T`` target tokens as text ("" where there is none)."""
        return [self.token_text.get(int(i), "") for i in self.target_ids]

    @property
    def column_labels(self) -> list[str]:
        """``c`` labels, one per column: ``"3"`` for block 3 (``"1–4"`` for a group of
        consecutive blocks, ``"1+3"`` otherwise), ``"L3.attn"`` / ``"L3.mlp"`` for a block's
        attention / MLP write, ``"L3.h2"`` for head 2 (0-based) of block 3 (1-based)."""
        if self.part == "head":
            return [f"L{b}.h{h}" for b, h in zip(self.layers, self.heads or [])]
        blocks = [_blocks_text(label) for label in self.layers]
        if self.part == "block":
            return blocks
        return [f"L{b}.{self.part}" for b in blocks]

    def column(self, layer: int | Iterable[int], head: int | None = None) -> int:
        """The column index in ``drop`` of a 1-based block (or of a group tuple); for a
        ``part="head"`` result, of block ``layer`` and 0-based head ``head`` (both needed)."""
        key = _label(layer)
        if self.part == "head":
            if head is None:
                raise InvalidRequestError(
                    "the columns of a part='head' ablation are (block, "
                    "head) pairs: pass column(layer, head)"
                )
            for i, (b, h) in enumerate(zip(self.layers, self.heads or [])):
                if b == key and h == int(head):
                    return i
            raise KeyError(
                f"block {layer!r} head {head!r} was not ablated; columns are {self.column_labels}"
            )
        if head is not None:
            raise InvalidRequestError(
                f"head= applies to part='head' ablations only; this one ablated part={self.part!r}"
            )
        try:
            return self.layers.index(key)
        except ValueError:
            raise KeyError(f"block {layer!r} was not ablated; columns are {self.layers}") from None

    def drop_at(self, layer: int | Iterable[int], head: int | None = None) -> np.ndarray:
        """``(T,)`` drop for one block (1-based) or group; for ``part="head"``, for head
        ``head`` (0-based) of block ``layer``."""
        return self.drop[:, self.column(layer, head)]

    def segment_columns(self, attribution: AttributionResult) -> list[int]:
        """The column of each segment of ``attribution`` (an
        :class:`~iglens_viz.AttributionResult` of the same prompt): the column that ablates
        the segment's blocks together, as :func:`~iglens_viz.core.boundaries.segment_parts`
        maps them. An error when the prompts differ or a segment has no column."""
        if list(np.asarray(attribution.input_ids)) != list(self.input_ids):
            raise InvalidRequestError("the attribution and the ablation are of different prompts")
        cols = []
        for (a, b), (part, blocks) in zip(
            attribution.segments, segment_parts(attribution.boundaries)
        ):
            key = blocks[0] if len(blocks) == 1 else blocks
            if key not in self.layers and len(blocks) == 1 and blocks in self.layers:
                key = blocks
            if part != self.part or key not in self.layers:
                raise InvalidRequestError(
                    f"the attribution's segment {a}→{b} has no ablation "
                    f"column; ablate with layers matching its boundaries "
                    f"{attribution.boundaries} (columns: {self.layers})"
                )
            cols.append(self.layers.index(key))
        return cols

    def plot_vs(
        self, attribution: AttributionResult, position: int, ax: Axes | None = None
    ) -> Figure:
        """Per-block IG-Lens contribution next to the ablation drop, for one token.

        ``attribution`` is an :class:`~iglens_viz.AttributionResult` of the same prompt and
        target whose segments match this result's columns (every block for the default
        ``layers=None``). Returns the matplotlib Figure (built without pyplot). Only for
        ``part="block"`` results: the attribution's segments are whole blocks. See
        :func:`iglens_viz.views.causal.plot_ablation_vs`.
        """
        from ..views.causal import plot_ablation_vs

        return plot_ablation_vs(self, attribution, position, ax=ax)


def _label(layer: int | Iterable[int]) -> Label:
    if isinstance(layer, (int, np.integer)) and not isinstance(layer, bool):
        return int(layer)
    # a bool is an int to the type checker; iterating one raises TypeError, as for any
    # other non-iterable
    return tuple(int(b) for b in cast("Iterable[int]", layer))


def _blocks_text(label: Label) -> str:
    """``"3"`` for one block, ``"1–4"`` for consecutive blocks, ``"1+3"`` otherwise."""
    if isinstance(label, int):
        return str(label)
    blocks = sorted(label)
    if len(blocks) == 1:
        return str(blocks[0])
    if blocks == list(range(blocks[0], blocks[-1] + 1)):
        return f"{blocks[0]}\u2013{blocks[-1]}"
    return "+".join(str(b) for b in label)


def _parse_layers(
    layers: LayerSpec | None, n: int, part: str = "block"
) -> tuple[list[Label], list[frozenset[int]]]:
    """Column labels and the set of 0-based blocks each column ablates (one block each, an
    int label, for ``part="head"``)."""
    if layers is None:
        return list(range(1, n + 1)), [frozenset([i]) for i in range(n)]
    if isinstance(layers, (str, bytes)) or not isinstance(layers, (Iterable, np.ndarray)):
        raise InvalidRequestError(
            f"layers must be None or a list of 1-based block numbers (or "
            f"of groups of them), not {type(layers).__name__}"
        )
    labels, groups = [], []
    for item in layers:
        if isinstance(item, (bool, str, bytes)) or not isinstance(
            item, (int, np.integer, Iterable)
        ):
            raise InvalidRequestError(
                f"each entry of layers must be a block number or a group "
                f"of block numbers, got {item!r}"
            )
        label = _label(item)
        blocks = [label] if isinstance(label, int) else list(label)
        if not blocks:
            raise InvalidRequestError("an ablation group must name at least one block")
        bad = [b for b in blocks if not 1 <= b <= n]
        if bad:
            raise InvalidRequestError(
                f"blocks are numbered 1 … {n} (block L maps h_(L-1) to h_L); got {bad}"
            )
        if part == "head" and not isinstance(label, int):
            raise InvalidRequestError(
                f"part='head' ablates one head of one block per column; "
                f"layers must list single block numbers, got the group "
                f"{item!r}"
            )
        labels.append(label)
        groups.append(frozenset(b - 1 for b in blocks))
    return labels, groups


def _parse_heads(heads: Iterable[int] | None, n_heads: int) -> list[int]:
    """The 0-based heads to ablate in each asked block (``None``: all of them)."""
    if heads is None:
        return list(range(n_heads))
    if isinstance(heads, (str, bytes)) or not isinstance(heads, (Iterable, np.ndarray)):
        raise InvalidRequestError(
            f"heads must be None or a list of 0-based head indices, not {type(heads).__name__}"
        )
    out = []
    for item in heads:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise InvalidRequestError(
                f"each entry of heads must be a 0-based head index, got {item!r}"
            )
        if not 0 <= int(item) < n_heads:
            raise InvalidRequestError(
                f"heads are numbered 0 … {n_heads - 1} ({n_heads} heads per block); got {int(item)}"
            )
        out.append(int(item))
    return out


def _part_modules(adapter: ModelAdapter, part: str) -> tuple[nn.Module, ...]:
    """The modules whose hooks ablate ``part``: blocks, write modules or output projections."""
    if part == "block":
        return adapter.blocks
    name = adapter.family.name
    if adapter.post_norm:
        raise UnsupportedModelError(
            f"part={part!r} is not supported for post-norm {name} (config "
            f"do_layer_norm_before=False, e.g. OPT-350m): a norm follows each residual sum, so "
            f"the attention's and the MLP's outputs are not terms of the residual stream and "
            f"'removing their write' is undefined; ablate whole blocks (part='block') instead"
        )
    if part == "head":
        if not adapter.heads_split:
            raise UnsupportedModelError(
                f"part='head' is not available for {name}: a norm sits between the attention's "
                f"output projection and the residual stream, so the attention's write is not "
                f"a sum of one write per head and one head cannot be removed alone; use "
                f"part='attn' to remove the block's whole attention write"
            )
        return adapter.require_heads()
    modules = adapter.attn_write_modules if part == "attn" else adapter.mlp_write_modules
    if not modules:
        raise UnsupportedModelError(
            f"{name} has no {part}_write module in the family table; add it to its entry in "
            f"iglens_viz/adapters/families.py"
        )
    return modules


class _AblationHooks:
    """Hooks that, for the current chunk, ablate module i in the rows listed for it.

    ``part="block"``: a forward hook on each block replaces its output (``rows[i]``: a bool
    mask over batch rows). ``attn`` / ``mlp``: a forward hook on each write module replaces
    its output (the write) likewise. ``head``: a forward pre-hook on each output projection
    replaces head slices of its input (``rows[i]``: a ``[rows, H]`` bool mask).
    """

    def __init__(
        self,
        blocks: Sequence[nn.Module],
        mode: _AppliedMode,
        part: str = "block",
        updates: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        means: torch.Tensor | None = None,
    ) -> None:
        self.blocks = blocks
        self.mode = mode
        self.part = part
        self.updates = updates  # [n, T, d]: given block updates (mode "given")
        self.positions = positions  # [T] bool: where the ablation acts (None: everywhere)
        self.means = means  # [n, T, width]: the references' mean update / write / head input
        self.rows: dict[int, torch.Tensor] = {}  # module index -> bool mask over batch rows
        self.hooks = Hooks()

    def _where(self, mask: torch.Tensor, x: torch.Tensor, extra: int) -> torch.Tensor:
        """The bool mask ``[rows, T, 1 …]`` of the rows (``mask [rows]`` or ``[rows, H]``,
        ``extra`` trailing axes after it) and positions that are replaced in ``x``."""
        mask = mask.to(x.device)
        # [rows] → [rows, 1] (every position); [rows, H] → [rows, 1, H]
        mask = mask.view(-1, 1) if mask.dim() == 1 else mask.unsqueeze(1)
        if self.positions is not None:
            pos = self.positions.to(x.device).view(1, -1, *([1] * (mask.dim() - 2)))
            mask = mask & pos
        return mask.view(*mask.shape, *([1] * extra))

    def _mean(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """The references' mean of module ``index``'s value, shaped like one row of ``x``."""
        assert self.means is not None, "mean mode comes with its reference means"
        return self.means[index].to(x.device, x.dtype).reshape(x.shape[1:])

    def __enter__(self) -> _AblationHooks:
        try:
            for i, module in enumerate(self.blocks):
                if self.part == "block":
                    self.hooks.after(module, self._hook(i), with_kwargs=True)
                elif self.part == "head":
                    self.hooks.before(module, self._head_hook(i), with_kwargs=True)
                else:
                    self.hooks.after(module, self._write_hook(i))
        except BaseException:  # what was registered before the failure goes again
            self.hooks.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.hooks.remove()

    def _hook(self, index: int) -> Callable[..., Any]:
        def hook(module, args, kwargs, output):
            mask = self.rows.get(index)
            if mask is None:
                return None
            out = block_output_states(output)
            inp = block_input(args, kwargs)
            if self.mode == "zero":
                replacement = inp
            elif self.mode == "given":
                assert self.updates is not None, "mode 'given' comes with its updates"
                replacement = inp + self.updates[index].to(inp.device, inp.dtype)
            else:
                replacement = inp + self._mean(index, inp)
            where = self._where(mask, out, out.dim() - 2)
            return replace_block_output(output, torch.where(where, replacement.to(out.dtype), out))

        return hook

    def _replacement(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """What replaces ``x`` (``[rows, T, …]``): zero, or the references' mean at each
        position."""
        if self.mode == "zero":
            return torch.zeros((), dtype=x.dtype, device=x.device)
        return self._mean(index, x)

    def _write_hook(self, index: int) -> Callable[..., Any]:
        def hook(module, args, output):
            mask = self.rows.get(index)
            if mask is None:
                return None
            out = block_output_states(output)
            write = by_row(out, mask.numel())
            where = self._where(mask, write, write.dim() - 2)
            new = torch.where(where, self._replacement(index, write), write)
            return replace_block_output(output, new.reshape(out.shape))

        return hook

    def _head_hook(self, index: int) -> Callable[..., Any]:
        def hook(module, args, kwargs):
            mask = self.rows.get(index)  # [rows, H]
            if mask is None:
                return None
            x, put = projection_input(args, kwargs)
            rows, n_heads = mask.shape
            z = by_row(x, rows)
            z = z.reshape(*z.shape[:-1], n_heads, z.shape[-1] // n_heads)  # [rows, T, H, d_h]
            where = self._where(mask, z, 1)  # [rows, T, H, 1]
            new = torch.where(where, self._replacement(index, z), z)
            return put(new.reshape(x.shape))

        return hook


def _given_updates(updates: torch.Tensor | np.ndarray, part: str, n: int, T: int) -> torch.Tensor:
    """``updates`` checked: ``[n, T, d]`` block updates, only for whole blocks."""
    if part != "block":
        raise InvalidRequestError(
            f"updates= replaces whole blocks' updates; part={part!r} ablates a part"
        )
    updates = torch.as_tensor(updates)
    if updates.dim() != 3 or updates.shape[:2] != (n, T) or not updates.is_floating_point():
        raise InvalidRequestError(
            f"updates must be a float array [n={n}, T={T}, d] of block "
            f"updates, got shape {tuple(updates.shape)}"
        )
    return updates


def target_probs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` softmax probability of ``ids`` (``[T]``) from logits ``[B, T, V]``, float64.

    ``exp(l_y − logsumexp(l))`` as the readout forms it
    (:func:`~iglens_viz.core.readout.target_probability`): the logsumexp runs in float32
    (float64 for float64 logits), one batch row at a time; the subtraction and the exp run in
    float64. Not ``log_softmax``: its float32 kernel carries ~2e-5 error in log space on some
    CPUs (AVX2), ~100× rounding.
    """
    work = logits.dtype if logits.dtype in (torch.float32, torch.float64) else torch.float32
    index = ids.to(logits.device).view(1, -1, 1).expand(logits.shape[0], -1, 1)
    target = logits.gather(-1, index).squeeze(-1).to(torch.float64)
    lse = torch.stack([torch.logsumexp(row.to(work), dim=-1) for row in logits])
    return target_probability(target, lse)


def _forward(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits


def _check_ablation(
    part: str,
    heads: Any,
    mode: str,
    references: Any,
    updates: Any,
    batch_size: Any,
) -> None:
    """Refuse a combination of :func:`ablate`'s arguments that asks for nothing coherent."""
    if part not in ABLATION_PARTS:
        raise InvalidRequestError(
            f"unknown ablation part {part!r}; choose one of {', '.join(ABLATION_PARTS)}"
        )
    if heads is not None and part != "head":
        whole = "blocks" if part == "block" else f"{part} writes"
        raise InvalidRequestError(
            f"heads= selects heads for part='head'; part={part!r} ablates whole {whole}"
        )
    if mode not in ABLATION_MODES:
        raise InvalidRequestError(
            f"unknown ablation mode {mode!r}; choose one of {', '.join(ABLATION_MODES)}"
        )
    if references is not None and (mode != "mean" or updates is not None):
        raise InvalidRequestError(
            "references= gives the reference prompts of mode='mean' (without updates=); "
            f"this ablation has mode={mode!r}" + (" and updates=" if updates is not None else "")
        )
    if mode == "mean" and references is None and updates is None:
        raise InvalidRequestError(
            "mode='mean' needs a reference set: pass references=[...], prompts of the same "
            "template and the same token length as this one (e.g. the same sentence with "
            "other subjects); each update is replaced by the references' mean at the same "
            "position. (The mean over the prompt's own positions, used before, mixes later "
            "positions and the first token into every position and is no longer offered.)"
        )
    if batch_size is not None and (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise InvalidRequestError(f"batch_size must be None or an integer >= 1, got {batch_size!r}")


def _columns(
    layers: Any, heads: Any, part: str, adapter: ModelAdapter
) -> tuple[list[Any], list[frozenset[int]], list[int] | None]:
    """The result's columns: their labels, the blocks each ablates (0-based) and, for
    ``part="head"``, the head each ablates (every listed head of every layer group)."""
    labels, groups = _parse_layers(layers, adapter.n_blocks, part)
    if part != "head":
        return labels, groups, None
    head_list = _parse_heads(heads, adapter.n_heads)
    labels = [b for b in labels for _ in head_list]
    column_heads = [h for _ in groups for h in head_list]
    return labels, [g for g in groups for _ in head_list], column_heads


@dataclass(frozen=True)
class _Columns:
    """The ablated runs of :func:`ablate`: one batch row per column."""

    groups: list[frozenset[int]]
    heads: list[int] | None
    n_heads: int

    def probabilities(
        self,
        model: nn.Module,
        hooks: _AblationHooks,
        batch_ids: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
    ) -> np.ndarray:
        """``(T, columns)`` the target's probability with each column's parts ablated,
        ``batch_size`` rows a pass."""
        T = batch_ids.shape[-1]
        ablated = np.empty((T, len(self.groups)), dtype=np.float64)
        for start in range(0, len(self.groups), batch_size):
            chunk = self.groups[start : start + batch_size]
            hooks.rows = self._rows(chunk, start)
            logits = _forward(model, batch_ids.expand(len(chunk), -1))
            probs = target_probs(logits, y)  # [rows, T]
            ablated[:, start : start + len(chunk)] = probs.T.double().cpu().numpy()
            del logits, probs
        return ablated

    def _rows(self, chunk: list[frozenset[int]], start: int) -> dict[int, torch.Tensor]:
        """Per block, the rows of this chunk that ablate it (``[rows]`` bool), or for heads
        the head each of those rows ablates (``[rows, H]``)."""
        rows = {
            block: torch.tensor([block in g for g in chunk])
            for block in sorted(set().union(*chunk))
        }
        if self.heads is None:
            return rows
        chunk_heads = torch.as_tensor(self.heads[start : start + len(chunk)])
        for block, mine in rows.items():
            index = mine.nonzero().squeeze(1)
            mask = torch.zeros(len(chunk), self.n_heads, dtype=torch.bool)
            mask[index, chunk_heads[index]] = True
            rows[block] = mask
        return rows


def _reference_ids(
    references: Sequence[PromptSpec],
    tokenizer: PreTrainedTokenizerBase | None,
    config: object,
    vocab: int,
    T: int,
) -> torch.Tensor:
    """``[R, T]`` the reference prompts' ids; an error unless each has the prompt's length."""
    if isinstance(references, (str, bytes)) or not isinstance(references, Sequence):
        raise InvalidRequestError(
            "references must be a list of prompts (texts or id lists) of the same template "
            f"and token length as the prompt, not {type(references).__name__}"
        )
    rows = [to_input_ids(r, tokenizer, config, vocab) for r in references]
    if not rows:
        raise InvalidRequestError(
            "references is empty: mean ablation needs at least one reference prompt"
        )
    bad = [(k, r.numel()) for k, r in enumerate(rows) if r.numel() != T]
    if bad:
        shown = ", ".join(f"#{k}: {length}" for k, length in bad[:5])
        raise InvalidRequestError(
            f"every reference prompt must have the prompt's token length ({T}) so that means "
            f"are taken position by position (never across positions); these do not: {shown}"
        )
    return torch.stack(rows)


@torch.no_grad()
def _reference_means(
    model: nn.Module, modules: Sequence[nn.Module], part: str, ids: torch.Tensor, budget: int
) -> torch.Tensor:
    """``[n, T, width]`` the mean over the reference prompts ``ids [R, T]`` of each module's
    value at each position: a block's update (output − input), a write module's output, or
    an output projection's input (``part="head"``: the concatenated head outputs)."""
    sums: dict[int, torch.Tensor] = {}
    R, T = ids.shape
    per_pass = activation_rows(model, T, budget)
    device = input_device(model)

    def add(index: int, value: torch.Tensor) -> None:
        total = value.double().sum(0)
        sums[index] = total if index not in sums else sums[index] + total

    def keep(index: int) -> Callable[..., Any]:
        def hook(module, args, kwargs, output):
            out = block_output_states(output)
            if part == "block":
                value = out - block_input(args, kwargs)
            else:
                value = by_row(out, current["rows"])
            add(index, value)

        return hook

    def keep_input(index: int) -> Callable[..., Any]:
        def hook(module, args, kwargs):
            x, _ = projection_input(args, kwargs)
            add(index, by_row(x, current["rows"]))

        return hook

    current = {"rows": 0}
    with Hooks() as hooks:
        for i, module in enumerate(modules):
            if part == "head":
                hooks.before(module, keep_input(i), with_kwargs=True)
            else:
                hooks.after(module, keep(i), with_kwargs=True)
        for start in range(0, R, per_pass):
            chunk = ids[start : start + per_pass].to(device)
            current["rows"] = chunk.shape[0]
            run_until(modules[-1], functools.partial(_forward, model, chunk))  # nothing later
    return torch.stack([sums[i] / R for i in range(len(modules))])


@torch.no_grad()
def ablate(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    text: PromptSpec,
    target: TargetSpec = "predicted",
    layers: LayerSpec | None = None,
    mode: AblationMode = "zero",
    batch_size: int | None = None,
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    part: AblationPart = "block",
    heads: Iterable[int] | None = None,
    updates: torch.Tensor | np.ndarray | None = None,
    positions: PositionSpec = "all",
    references: Sequence[PromptSpec] | None = None,
) -> AblationResult:
    """Drop in each position's target probability when a block, or one part of it (its
    attention, its MLP, one attention head), adds nothing to the stream.

    Parameters
    ----------
    model, tokenizer:
        A decoder-only ``*ForCausalLM`` of a supported family and its tokenizer (``None`` is
        fine for id input and id targets).
    text:
        A string, a list of token ids, or a 1-D / ``[1, T]`` tensor.
    target:
        Resolved exactly as in IG-Lens: ``"predicted"`` (the clean run's top-1 next token),
        ``"next"``, a token id, a single-token string, or a sequence of T ids.
    layers:
        ``None`` for every block (column ``L - 1`` is block ``L``), or a list whose entries
        are 1-based block numbers or groups of them (a tuple/range, ablated together in one
        pass; for ``part="attn"``/``"mlp"`` the part of every block of the group). The result
        keeps only the asked columns, labelled in ``.layers``. For ``part="head"`` single
        blocks only (groups are an error).
    mode:
        ``"zero"``: the block's output is replaced by its input (``h_L := h_{L-1}``); for a
        part, its write (or the head's slice of the output projection's input) is zero.
        ``"mean"``: the block's update ``h_L - h_{L-1}`` (or the part's write, or the head's
        slice) is replaced, position by position, by its mean over ``references``: prompts
        of the same template and the same token length (never by a mean over the prompt's
        own positions, which mixes later positions and the first token into every one).
        In both modes every later computation of the block and every later block run on the
        changed stream.
    batch_size:
        Ablations per forward pass; ``None`` picks as many as keep the ``[rows × T × vocab]``
        logits under ``memory_budget`` bytes.
    part:
        What each column removes (see :data:`ABLATION_PARTS`):

        * ``"block"`` (default): the whole block, as above.
        * ``"attn"``: the attention's write to the residual stream, as it enters the stream
          (Gemma-2/3: after the norm that follows the attention; parallel blocks, GPT-J,
          Phi-1/2, GPT-NeoX: the attention's term of the sum). The MLP of a sequential block
          then reads the stream without it.
        * ``"mlp"``: the MLP's write likewise (Gemma-2/3: after its post-norm; OPT: ``fc2``).
        * ``"head"``: one attention head's write: its slice of the output projection's input
          (the concatenated head outputs) is zeroed (or replaced by its mean over positions),
          so exactly ``W_o[:, head] z_head`` leaves the write (a bias stays). Only where the
          attention's write is linear in its heads; Gemma-2/3 (a norm after the output
          projection) raise :class:`UnsupportedModelError`: use ``"attn"`` there.

        Post-norm models (OPT with ``do_layer_norm_before=False``) support only ``"block"``:
        a norm after each residual sum leaves no sub-layer write in the stream.
    heads:
        For ``part="head"``: ``None`` for every head, or a list of 0-based head indices. The
        columns are every (block in ``layers``, head in ``heads``) pair, block-major;
        ``.layers`` holds each column's block and ``.heads`` its head. An error for other
        parts.
    updates:
        For ``part="block"``: an ``[n, T, d]`` array that replaces each ablated block's update
        instead of ``mode`` (``h_L := h_{L-1} + updates[L-1]``; the result's ``mode`` reads
        ``"given"``): e.g. the mean update of *other* prompts at the same positions, or another
        prompt's updates (resample ablation; see :mod:`iglens_viz.studies`).
    positions:
        Where the ablation acts: ``"all"`` (default, every position), ``"target"`` (the last
        position only), ``"all_but_first"``, or a list of 0-based positions (see
        :func:`~iglens_viz.causal.positions.resolve_positions`); elsewhere the block (part)
        runs as it is. Positions before the first ablated one keep their clean probability
        (causal attention).
    references:
        For ``mode="mean"`` (required there, an error otherwise): the reference prompts, each
        of the prompt's token length, whose clean runs give the mean update (write, head
        output) at each position.

    Returns
    -------
    AblationResult
    """
    _check_ablation(part, heads, mode, references, updates, batch_size)
    adapter = adapter_for(model)
    n = adapter.n_blocks
    modules = _part_modules(adapter, part)
    vocab = adapter.head.weight.shape[0]
    ids = to_input_ids(text, tokenizer, model.config, vocab)
    applied: _AppliedMode = mode
    given = None
    if updates is not None:
        given = _given_updates(updates, part, n, ids.numel())
        applied = "given"
    labels, groups, column_heads = _columns(layers, heads, part, adapter)
    T = ids.numel()
    where = resolve_positions(positions, T)
    position_mask = None if len(where) == T else torch.zeros(T, dtype=torch.bool)
    if position_mask is not None:
        position_mask[where] = True
    means = None
    ref_ids = None
    if applied == "mean":
        assert references is not None, "checked above"
        ref_ids = _reference_ids(references, tokenizer, model.config, vocab, T)

    with eval_mode(model):
        if ref_ids is not None:
            means = _reference_means(model, modules, part, ref_ids, memory_budget)
        batch_ids = ids.unsqueeze(0).to(input_device(model))
        clean_logits = _forward(model, batch_ids)  # [1, T, V]
        predicted = clean_logits[0].argmax(-1).cpu()
        target_ids = resolve_targets(target, ids, predicted, tokenizer, clean_logits.shape[-1])
        missing = target_ids == NO_TARGET
        y = torch.as_tensor(np.where(missing, 0, target_ids))
        clean = target_probs(clean_logits, y)[0].double().cpu().numpy()
        del clean_logits

        batch_size = int(
            ablation_rows(T, vocab, memory_budget) if batch_size is None else batch_size
        )
        with _AblationHooks(modules, applied, part, given, position_mask, means) as hooks:
            run = _Columns(groups, column_heads, adapter.n_heads)
            ablated = run.probabilities(model, hooks, batch_ids, y, batch_size)

    clean[missing] = np.nan
    ablated[missing] = np.nan
    input_ids = ids.numpy()
    text_of = token_texts(tokenizer, input_ids, target_ids)
    return AblationResult(
        tokens=[text_of[int(i)] for i in input_ids],
        input_ids=input_ids,
        target_ids=target_ids,
        layers=labels,
        clean_probs=clean,
        ablated_probs=ablated,
        drop=clean[:, None] - ablated,
        mode=applied,
        n_blocks=n,
        token_text=text_of,
        part=part,
        heads=column_heads,
        positions=where,
        n_references=0 if ref_ids is None else int(ref_ids.shape[0]),
    )
