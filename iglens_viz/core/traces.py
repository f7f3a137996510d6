"""The forward passes an :class:`~iglens_viz.core.lens.IGLens` has run: one
:class:`~iglens_viz.core.trace.Trace` per (prompt, lens), kept least recently used first out.

A trace holds the residual states of one forward pass and their readout map (the logsumexp
and top-k of every row, under a lens's coordinates). Asking again about a prompt reuses it; a
prompt seen under another lens lends its forward pass, and only the map is computed; a
continuation (``versus=``) runs the model on its new tokens only, from the prefix's key/value
cache. Every new run checks the model's own output and the readout against it
(:mod:`.selfcheck`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

import torch
from torch import nn

from ..adapters import ModelAdapter
from ..errors import InvalidRequestError, ReadoutMismatchError
from .capture import Capture, Keep, capture_batch, capture_states, joined, prompt_cache
from .coordinates import LOGIT, Lens
from .kv_cache import prefix_cache
from .readout import Readout
from .selfcheck import check_model_states, check_readout, check_readout_map
from .trace import Trace, lens_points, readout_map

__all__ = ["LRU", "TraceCache"]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class LRU(Generic[_K, _V]):
    """At most ``size`` entries, the least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        """The entry of ``key`` (None when absent); not counted as a use."""
        return self._entries.get(key)

    def put(self, key: _K, value: _V) -> None:
        """Keep ``value`` as the most recently used entry, dropping the oldest beyond size."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def items(self) -> list[tuple[_K, _V]]:
        """The entries, oldest first."""
        return list(self._entries.items())

    def keys(self) -> list[_K]:
        """The keys, oldest first."""
        return list(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class TraceCache:
    """Traces of one model by (prompt ids, lens), with what it takes to make them.

    ``top_k`` lens tokens are kept at every row (at least 1: the "predicted" target);
    ``memory_budget`` bounds one readout block (see :mod:`.memory`); ``size`` traces are kept.
    """

    def __init__(
        self,
        model: nn.Module,
        adapter: ModelAdapter,
        readout: Readout,
        *,
        top_k: int,
        memory_budget: int,
        size: int,
    ) -> None:
        self.model, self.adapter, self.readout = model, adapter, readout
        self.top_k = top_k
        self.memory_budget = memory_budget
        self._entries: LRU[tuple[tuple[int, ...], Lens], Trace] = LRU(size)

    @property
    def size(self) -> int:
        """How many traces are kept."""
        return self._entries.size

    @size.setter
    def size(self, value: int) -> None:
        self._entries.size = int(value)

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[tuple[tuple[int, ...], Lens]]:
        """The cached (prompt ids, lens) pairs, oldest first."""
        return self._entries.keys()

    def clear(self) -> None:
        """Forget every trace (frees their memory)."""
        self._entries.clear()

    def get(
        self,
        ids: torch.Tensor,
        lens: Lens = LOGIT,
        *,
        sublayers: bool = False,
        components: bool = False,
        keep_cache: bool = False,
    ) -> Trace:
        """Run the model once on ``ids`` (``[T]``, checked) or return the cached run, and read out
        every row.

        ``sublayers`` keeps h_L.attn between every attention and MLP (and reads it out);
        ``components`` keeps what the component split needs (each block's head outputs, and
        h_L.attn where blocks are sequential). A cached run that lacks them is replaced.
        ``lens`` sets the coordinates of the path points and the map; a cached run of the
        prompt under another lens lends its forward pass, and only the map is computed.
        ``keep_cache`` keeps the model's key/value cache of a new run (``model_cache``),
        from which :meth:`continued` runs a continuation.

        A new run checks the model's own output and the readout against it (see
        :mod:`iglens_viz.core.selfcheck`): :class:`~iglens_viz.errors.ModelOutputError` when
        the forward pass produced NaN/Inf; :class:`~iglens_viz.errors.ReadoutMismatchError`
        when f(h_n) differs from the model's own output at some position by more than
        rounding can explain (a warning instead for a bf16/fp16 model). T_n is the identity
        under every lens, so the check is the same.
        """
        key = (tuple(ids.tolist()), lens)
        cached = self._entries.get(key)
        if sublayers:
            self.adapter.require_sublayers()
        mids = components and self.adapter.mid_modules is not None
        heads = components and self.adapter.heads_split
        # At least the top-1 is always kept: it is the "predicted" target.
        top_k = max(1, self.top_k)
        enough_k = cached is not None and cached.top_k >= min(top_k, self.readout.vocab_size)
        if (
            cached is not None
            and enough_k
            and cached.covers(sublayers=sublayers, mids=mids, heads=heads)
        ):
            self._entries.put(key, cached)
            return cached
        shared = self._shared_run(key[0], sublayers=sublayers, mids=mids, heads=heads)
        if shared is not None:  # another lens's trace of this prompt: its forward pass
            trace = self._lensed(shared, lens, top_k)
            self._entries.put(key, trace)
            return trace
        if cached is not None:  # run again, keeping what it kept too
            sublayers = sublayers or cached.sublayers
            mids = mids or cached.mid_states is not None
            heads = heads or cached.head_inputs is not None
        captured = self._capture(ids, Keep(sublayers or mids, heads, keep_cache))
        states, mid_states = _split_mid_states(captured.states, mids and not sublayers)
        if (
            cached is not None
            and enough_k
            and cached.sublayers == sublayers
            and torch.equal(cached.hidden, states)
        ):
            # The same forward pass again (now keeping more): its checked map still holds.
            points, states = cached.states, cached.hidden
            map_ = (
                cached.features,
                cached.log_normalizer,
                cached.top_ids,
                cached.top_logprobs,
            )
        else:
            points, map_ = self._checked_map(states, captured, top_k, lens, sublayers)
        trace = Trace(
            ids,
            points,
            *map_,
            sublayers=sublayers,
            mid_states=mid_states,
            head_inputs=captured.head_inputs,
            attn_writes=captured.attn_writes,
            lens=lens,
            residual=None if points is states else states,
            model_cache=captured.cache,
        )
        self._entries.put(key, trace)
        return trace

    def _capture(self, ids: torch.Tensor, keep: Keep, past: Any = None) -> Capture:
        """:func:`capture_states` of ``ids`` on this cache's model, onto its readout's device
        and dtype, keeping ``keep``, continuing ``past`` (a prefix's cache) when given."""
        return capture_states(
            self.model,
            self.adapter,
            ids,
            device=self.readout.device,
            dtype=self.readout.dtype,
            keep=keep,
            past=past,
        )

    def continued(self, trace: Trace, start: int, ids: torch.Tensor) -> Trace:
        """The trace of ``trace.input_ids[:start]`` followed by ``ids``, running the model on
        ``ids`` only: the prefix's keys and values come from ``trace.model_cache`` (or, for a
        trace kept without it, from one pass over the prefix alone), its states and readout
        map from ``trace``. Equal to :meth:`get` of the whole sequence up to the rounding of
        the shorter attention kernels; under ``trace``'s lens, keeping what it kept.

        This is how ``versus=`` runs its second answer: the shared prompt is computed once.
        """
        T = trace.input_ids.numel()
        if not 0 < start <= T or ids.dim() != 1 or ids.numel() == 0:
            raise InvalidRequestError(
                f"continued() takes a prefix length 1 … {T} (got {start}) and a non-empty 1-D "
                f"tensor of ids (got shape {tuple(ids.shape)})"
            )
        prefix = trace.input_ids[:start]
        whole = torch.cat([prefix, ids])
        key = (tuple(whole.tolist()), trace.lens)
        mids, heads = trace.mid_states is not None, trace.head_inputs is not None
        cached = self._entries.get(key)
        if cached is not None and cached.covers(sublayers=trace.sublayers, mids=mids, heads=heads):
            self._entries.put(key, cached)
            return cached
        full = trace.model_cache
        if full is None:  # a trace from the cache, run without keep_cache
            full = prompt_cache(self.model, prefix)
        past = prefix_cache(full, start)
        captured = self._capture(ids, Keep(trace.sublayers or mids, heads), past)
        states, mid_states = _split_mid_states(captured.states, mids and not trace.sublayers)
        points, map_ = self._checked_map(states, captured, trace.top_k, trace.lens, trace.sublayers)
        prefix_map = (trace.features, trace.log_normalizer, trace.top_ids, trace.top_logprobs)

        def joined_up(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
            return torch.cat([before[:, :start], after], dim=1)

        def optional(
            before: torch.Tensor | None, after: torch.Tensor | None
        ) -> torch.Tensor | None:
            return None if before is None or after is None else joined_up(before, after)

        features, log_normalizer, top_ids, top_logprobs = (
            joined_up(before, after) for before, after in zip(prefix_map, map_)
        )
        result = Trace(
            whole,
            joined_up(trace.states, points),
            features,
            log_normalizer,
            top_ids,
            top_logprobs,
            sublayers=trace.sublayers,
            mid_states=optional(None if trace.sublayers else trace.mid_states, mid_states),
            head_inputs=optional(trace.head_inputs, captured.head_inputs),
            attn_writes=optional(trace.attn_writes, captured.attn_writes),
            lens=trace.lens,
            residual=optional(trace.residual, states),
        )
        self._entries.put(key, result)
        return result

    def _shared_run(
        self, ids: tuple[int, ...], *, sublayers: bool, mids: bool, heads: bool
    ) -> Trace | None:
        """A cached trace of ``ids`` (under any lens) whose forward pass holds what a
        request needs, or None."""
        for (other, _), trace in reversed(self._entries.items()):
            if other == ids and trace.covers(sublayers=sublayers, mids=mids, heads=heads):
                return trace
        return None

    def _lensed(self, shared: Trace, lens: Lens, top_k: int) -> Trace:
        """The trace of ``shared``'s forward pass under ``lens``: its own points and map,
        the same residual states and split inputs (not copied)."""
        states = shared.hidden
        points = lens_points(lens, states, sublayers=shared.sublayers)
        return Trace(
            shared.input_ids,
            points,
            *self._map(points, top_k),
            sublayers=shared.sublayers,
            mid_states=shared.mid_states,
            head_inputs=shared.head_inputs,
            attn_writes=shared.attn_writes,
            lens=lens,
            residual=None if points is states else states,
            model_cache=shared.model_cache,
        )

    def many(self, ids: list[torch.Tensor]) -> list[Trace]:
        """:meth:`get` of several prompts' ids under the logit lens, batched: the ones not
        cached run as one right-padded forward pass with an attention mask, and their rows
        share one readout map (the readout is row by row, so putting prompts side by side
        changes only the kernels' shapes). Equal to one :meth:`get` per prompt up to that
        rounding.

        For many prompts at once, as a study runs them; keep ``size`` at least the number of
        prompts for an attribution to find them afterwards. A prompt whose readout fails the
        self-check is traced again alone, so the error names its own positions.
        """
        top_k = max(1, self.top_k)
        todo: list[int] = []
        made: dict[int, Trace] = {}
        for i, x in enumerate(ids):
            cached = self._entries.get((tuple(x.tolist()), LOGIT))
            if cached is None or cached.top_k < min(top_k, self.readout.vocab_size):
                todo.append(i)
        if todo:
            captured = capture_batch(
                self.model,
                self.adapter,
                [ids[i] for i in todo],
                device=self.readout.device,
                dtype=self.readout.dtype,
            )
            lengths = [ids[i].numel() for i in todo]
            states = torch.cat([c.states for c in captured], dim=1)
            try:
                _, map_ = self._checked_map(states, joined(captured), top_k)
            except ReadoutMismatchError:
                return [self.get(x) for x in ids]
            del captured
            start = 0
            for i, T in zip(todo, lengths):
                part = slice(start, start + T)
                start += T
                features, log_normalizer, top_ids, top_logprobs = (m[:, part] for m in map_)
                made[i] = Trace(
                    ids[i], states[:, part], features, log_normalizer, top_ids, top_logprobs
                )
                self._entries.put((tuple(ids[i].tolist()), LOGIT), made[i])
        return [made[i] if i in made else self.get(x) for i, x in enumerate(ids)]

    def _checked_map(
        self,
        states: torch.Tensor,
        captured: Capture,
        top_k: int,
        lens: Lens = LOGIT,
        sublayers: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The path points of ``states`` under ``lens`` (:func:`lens_points`) and their
        readout map (see :func:`readout_map`), checked against the model's own output in
        ``captured`` (see :meth:`trace`)."""
        # The model's own output must be finite, and the readout of h_n must reproduce it at
        # every position (h_n is read as it is under every lens).
        what = type(self.model).__name__
        check_model_states(
            states,
            what,
            self.readout,
            captured.logits.dtype,
            model_name=getattr(self.model.config, "name_or_path", None),
        )
        points = lens_points(lens, states, sublayers=sublayers)
        map_ = self._map(points, top_k, check=False)
        check_readout(
            self.readout,
            map_[0][-1],
            captured,
            what=what,
            adapter_name=self.adapter.family.name,
            width=states.shape[-1],
            budget_bytes=self.memory_budget,
        )
        check_readout_map(self.readout, map_[0], map_[1], what)
        return points, map_

    def _map(
        self, points: torch.Tensor, top_k: int, *, check: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The readout map of ``points`` (:func:`readout_map`), its finiteness checked
        (:func:`check_readout_map`) unless ``check`` is False."""
        map_ = readout_map(self.readout, points, top_k, self.memory_budget)
        if check:
            check_readout_map(self.readout, map_[0], map_[1], type(self.model).__name__)
        return map_


def _split_mid_states(
    states: torch.Tensor, split: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A capture's states, and its h_L.attn rows apart when they are kept for the component
    split only (``split``: not read out)."""
    if not split:
        return states, None
    return states[0::2].contiguous(), states[1::2].contiguous()
