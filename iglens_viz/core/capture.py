"""One forward pass that records the pre-norm residual stream h_0 … h_n.

Hugging Face's ``output_hidden_states`` is not used: its last element already has the final
norm applied, so h_n (pre-norm) is missing from it. Instead a pre-hook on block 0 records
its input (h_0, embeddings scaled as the model scales them) and a hook on every block records
its output. Blocks return a tensor in transformers 5 and a tuple in 4.x; both are handled.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import torch
from torch import nn

from ..adapters import ModelAdapter
from .hooks import Hooks, block_input, block_output_states, by_row
from .kv_cache import cache_keyword, returned_cache
from .model_mode import eval_mode

if TYPE_CHECKING:
    from transformers import PreTrainedModel

CHECKED_POSITIONS = 8
"""Positions per sequence at which the model computes its own logits (see :class:`Capture`)."""


class Capture(NamedTuple):
    """What one forward pass recorded (tensors on the readout device, in its dtype, except
    the model's own head input and logits, in the model's dtype)."""

    states: torch.Tensor
    """``[n+1, T, d]`` h_0 … h_n, or ``[2n+1, T, d]`` with the sub-layer states interleaved."""
    unembed_input: torch.Tensor
    """``[T, d']`` the input of the model's unembedding head at every position: its final
    norm's output (projected, for OPT). Not ``head_inputs``, the attention heads' outputs."""
    checked: torch.Tensor
    """``[k]`` the positions where the model computed its own logits (:func:`checked_positions`)."""
    logits: torch.Tensor
    """``[k, V]`` the model's own logits at those positions."""
    head_inputs: torch.Tensor | None = None
    """``[n, T, H·d_head]`` each block's concatenated head outputs (its output projection's
    input), when asked for."""
    attn_writes: torch.Tensor | None = None
    """``[n, T, d]`` each block's attention output projection's output, kept for parallel
    blocks with the head inputs (sequential blocks have h_L.attn − h_{L−1} instead)."""
    cache: Any = None
    """The model's key/value cache of the whole sequence (prefix included), when asked for
    (:func:`capture_states` ``keep_cache``)."""


@dataclass(frozen=True)
class Keep:
    """What a capture keeps besides the residual states (see :func:`capture_states`)."""

    sublayers: bool = False
    """h_L.attn between every attention and MLP, interleaved with the states."""
    heads: bool = False
    """Each block's head outputs before its output projection."""
    cache: bool = False
    """The model's key/value cache of the whole sequence."""


def capture_states(
    model: nn.Module,
    adapter: ModelAdapter,
    input_ids: torch.Tensor,
    *,
    device: torch.device,
    dtype: torch.dtype,
    keep: Keep = Keep(),
    past: Any = None,
) -> Capture:
    """Run ``model`` once on ``input_ids`` (shape ``[T]``) and return a :class:`Capture`.

    ``states[L]`` is h_L, shape ``[n+1, T, d]`` on ``device`` in ``dtype``. For the numeric
    self-check of the readout (:mod:`.selfcheck`), a pre-hook on the head keeps the model's
    own head input at every position and lets the head run on :func:`checked_positions`
    only: the model's logits there (post-processed by its own code, e.g. soft-capped) cost
    k head rows instead of T (the readout map computes f(h_n) at every position anyway), and
    no ``[T × V]`` logits are ever held.

    With ``keep.sublayers``, the stream between each block's attention write and its MLP
    (h_L.attn, read as the input of the family's ``mid_state`` module) is kept too:
    ``states`` is ``[2n+1, T, d]``, ``states[2L-1]`` = h_L.attn and ``states[2L]`` = h_L.
    Parallel blocks have no such state: :class:`~iglens_viz.errors.UnsupportedModelError`.

    With ``keep.heads``, each block's head outputs before the output projection are kept
    (``head_inputs``; the same size as a residual state per block when H·d_head = d), and for
    parallel blocks the projection's output (``attn_writes``).

    With ``keep.cache``, the model's key/value cache is kept (``cache``). With ``past`` (such
    a cache, cut to a prefix by :func:`~iglens_viz.core.kv_cache.prefix_cache`),
    ``input_ids`` continue that prefix: the model runs on them only, and every tensor of the
    capture covers their positions only.
    """
    return capture_batch(
        model, adapter, [input_ids], device=device, dtype=dtype, keep=keep, past=past
    )[0]


def checked_positions(length: int, count: int = CHECKED_POSITIONS) -> torch.Tensor:
    """``count`` positions of a sequence of ``length`` (fewer if it is shorter), evenly
    spread from the first to the last."""
    return torch.linspace(0, length - 1, min(count, length)).round().long()


def padded_batch(
    sequences: list[torch.Tensor], device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, T_max]`` ids and attention mask of ``sequences``, padded on the right.

    Right padding leaves every real position as it is alone: a causal model's position t
    attends to positions ≤ t only, which are all real, and the positions count from 0 as
    they do unpadded. The pads (id 0, mask 0) are never read.
    """
    longest = max(s.numel() for s in sequences)
    ids = torch.zeros(len(sequences), longest, dtype=torch.long)
    mask = torch.zeros(len(sequences), longest, dtype=torch.long)
    for b, s in enumerate(sequences):
        ids[b, : s.numel()] = s
        mask[b, : s.numel()] = 1
    return ids.to(device), mask.to(device)


class _Recorder:
    """The buffers one batched forward pass fills through its hooks, and which of their
    rows it filled (so that an adapter that does not match the model is an error, not a
    capture of uninitialised memory)."""

    def __init__(
        self,
        adapter: ModelAdapter,
        keep: Keep,
        batch: int,
        *,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        n = adapter.n_blocks
        self.adapter, self.batch, self.device, self.dtype = adapter, batch, device, dtype
        self.stride = 2 if keep.sublayers else 1
        self.mids = adapter.require_sublayers() if keep.sublayers else ()
        self.projections = adapter.require_heads() if keep.heads else ()
        # allocated at the first store, once the widths are known
        self.buffers: dict[str, torch.Tensor] = {}
        self.seen = {"states": [False] * (self.stride * n + 1), "unembed_input": [False]}
        if keep.heads:
            self.seen["head_inputs"] = [False] * n
            if adapter.mid_modules is None:  # parallel blocks: no h_L.attn to subtract
                self.seen["attn_writes"] = [False] * n

    def attach(self, hooks: Hooks, gather: torch.Tensor) -> None:
        """Hook block 0's input (h_0), every block's output, each MLP's input (h_L.attn), each
        output projection's input (and output, for parallel blocks), and the head's input;
        the head then runs on the ``gather`` rows (``[B, k]``) only."""
        adapter = self.adapter
        hooks.before(adapter.blocks[0], self._block_input, with_kwargs=True)
        for i, block in enumerate(adapter.blocks):
            hooks.after(block, partial(self._block_output, self.stride * (i + 1)))
        for i, mid in enumerate(self.mids):
            hooks.before(mid, partial(self._mid_state, 2 * i + 1))
        for i, proj in enumerate(self.projections):
            hooks.after(proj, partial(self._projection, i))
        hooks.before(adapter.head, partial(self._head_input, gather))

    def store(self, index: int, tensor: torch.Tensor, what: str = "states") -> None:
        """Copy ``tensor`` into row ``index`` of the ``what`` buffer."""
        if what not in self.buffers:
            self.buffers[what] = torch.empty(
                (len(self.seen[what]), *tensor.shape), device=self.device, dtype=self.dtype
            )
        self.buffers[what][index].copy_(tensor)
        self.seen[what][index] = True

    def _block_input(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        self.store(0, block_input(args, kwargs))

    def _block_output(self, index: int, module: nn.Module, args: tuple, output: Any) -> None:
        self.store(index, block_output_states(output))

    def _mid_state(self, index: int, module: nn.Module, args: tuple) -> None:
        self.store(index, by_row(args[0], self.batch))

    def _projection(self, index: int, module: nn.Module, args: tuple, output: Any) -> None:
        self.store(index, by_row(args[0], self.batch), "head_inputs")
        if "attn_writes" in self.seen:
            self.store(index, by_row(output, self.batch), "attn_writes")

    def _head_input(self, gather: torch.Tensor, module: nn.Module, args: tuple) -> tuple:
        x = args[0]
        self.buffers["unembed_input"] = x.detach().to(self.device)
        self.seen["unembed_input"][0] = True
        rows = torch.arange(x.shape[0], device=x.device)[:, None]
        return (x[rows, gather.to(x.device)], *args[1:])

    def check_filled(self) -> None:
        """Raise where the pass left a row of a buffer unfilled: the adapter does not match
        the model."""
        for what, filled in self.seen.items():
            missing = [i for i, ok in enumerate(filled) if not ok]
            if missing:
                raise RuntimeError(
                    f"the forward pass did not fill {what} {missing} (of "
                    f"{len(filled)}); the adapter for {self.adapter.family.name} does "
                    f"not match this model"
                )

    def cut(self, what: str, b: int, T: int) -> torch.Tensor | None:
        """Sequence ``b``'s first ``T`` positions of an optional buffer (None if not kept)."""
        kept = self.buffers.get(what)
        return None if kept is None else kept[:, b, :T]


def _checked_rows(checked: list[torch.Tensor]) -> torch.Tensor:
    """``[B, k]`` the rows the head runs on: each sequence's checked positions, a shorter
    list repeating its last position (those logits are cut off)."""
    k = max(c.numel() for c in checked)
    return torch.stack([torch.cat([c, c[-1:].expand(k - c.numel())]) for c in checked])


def _forward(model: nn.Module, sequences: list[torch.Tensor], past: Any, keep_cache: bool) -> Any:
    """The model's output on ``sequences`` (right-padded), continuing ``past`` if given."""
    with eval_mode(model):
        ids, mask = padded_batch(sequences, input_device(model))
        cached: dict[str, Any] = {}
        if past is not None:  # the prefix's positions are attended to as well
            cached[cache_keyword(model)] = past
            mask = torch.cat([mask.new_ones(1, past.get_seq_length()), mask], dim=1)
        use_cache = keep_cache or past is not None
        return model(input_ids=ids, attention_mask=mask, use_cache=use_cache, **cached)


@torch.no_grad()
def capture_batch(
    model: nn.Module,
    adapter: ModelAdapter,
    sequences: list[torch.Tensor],
    *,
    device: torch.device,
    dtype: torch.dtype,
    keep: Keep = Keep(),
    past: Any = None,
) -> list[Capture]:
    """:func:`capture_states` of several sequences in one forward pass, right-padded with
    an attention mask (see :func:`padded_batch`); one :class:`Capture` per sequence, cut to
    its own length. Equal to one pass per sequence up to the rounding of other kernel
    shapes. ``keep.cache`` and ``past`` (see :func:`capture_states`) take one sequence."""
    if (keep.cache or past is not None) and len(sequences) != 1:
        raise ValueError("keep_cache and past take one sequence")
    recorder = _Recorder(adapter, keep, len(sequences), device=device, dtype=dtype)
    checked = [checked_positions(s.numel()) for s in sequences]
    with Hooks() as hooks:
        recorder.attach(hooks, _checked_rows(checked))
        out = _forward(model, sequences, past, keep.cache)
    recorder.check_filled()
    cache = returned_cache(out) if keep.cache else None  # one sequence
    captures = []
    for b, sequence in enumerate(sequences):
        T = sequence.numel()
        captures.append(
            Capture(
                recorder.buffers["states"][:, b, :T],
                recorder.buffers["unembed_input"][b, :T],
                checked[b],
                out.logits[b, : checked[b].numel()],
                recorder.cut("head_inputs", b, T),
                recorder.cut("attn_writes", b, T),
                cache,
            )
        )
    return captures


def joined(captures: list[Capture]) -> Capture:
    """The self-check's part of several captures as one, their positions laid end to end
    (as a batched readout map lays their rows): head inputs and logits concatenated, the
    checked positions offset. Only ``unembed_input``, ``checked`` and ``logits`` are kept:
    ``states`` is empty (shape ``[0]``) and the optional fields are None."""
    offsets = torch.tensor([0] + [c.unembed_input.shape[0] for c in captures[:-1]]).cumsum(0)
    return Capture(
        states=captures[0].states.new_empty(0),
        unembed_input=torch.cat([c.unembed_input for c in captures]),
        checked=torch.cat([c.checked + int(o) for c, o in zip(captures, offsets)]),
        logits=torch.cat([c.logits for c in captures]),
    )


@torch.no_grad()
def prompt_cache(model: nn.Module, ids: torch.Tensor) -> Any:
    """The model's key/value cache of ``ids`` (``[T]``): one forward pass, nothing recorded."""
    with eval_mode(model):
        return returned_cache(model(input_ids=ids[None].to(input_device(model)), use_cache=True))


def input_device(model: nn.Module) -> torch.device:
    """Where the model's input ids must live (the embeddings' execution device)."""
    # a transformers model: nn.Module's stubs type an unknown attribute as Tensor | Module
    embeddings = cast("PreTrainedModel", model).get_input_embeddings()
    execution_device = getattr(getattr(embeddings, "_hf_hook", None), "execution_device", None)
    if execution_device is not None:  # dispatched by accelerate (device_map="auto")
        return torch.device(execution_device)
    param = next(embeddings.parameters())
    return param.device if param.device.type != "meta" else torch.device("cpu")
