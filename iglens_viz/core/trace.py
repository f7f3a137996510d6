"""The cached product of one forward pass: states plus a target-independent readout map.

The full map evaluates the readout once on every (layer, position) row, in chunks sized so
the ``[rows × vocab]`` logits block stays under a memory budget. Per row it keeps the
normalised features, the log-normaliser (one logsumexp) and the top-k; every later target,
contrast or boundary set then needs only a dot product per row (see ``Readout.target_logits``).

A trace is of one :class:`~iglens_viz.core.coordinates.Lens`: its ``states`` are the path
points h̃_L = T_L(h_L) the readout reads (:func:`lens_points`) and its map is theirs, while the
residual stream h_L (``residual``) and what the component split keeps come from the one
forward pass that every lens's trace of the prompt shares. Under the logit lens the points are
the residual states themselves (the same tensor: nothing is transformed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .coordinates import LOGIT, Lens
from .memory import DEFAULT_MEMORY_BUDGET, block_plan
from .readout import Readout, target_probability

__all__ = ["DEFAULT_MEMORY_BUDGET", "Trace", "block_plan", "lens_points", "readout_map"]


@dataclass
class Trace:
    """States and readout map of one input sequence under one lens (tensors on the readout
    device)."""

    input_ids: torch.Tensor
    """``[T]`` token ids (CPU)."""
    states: torch.Tensor
    """``[S, T, d]`` the path points the readout reads, T_L(h_L) of the pre-norm residual
    states: h_0 … h_n (S = n+1), or with ``sublayers`` h_0, h_1.attn, h_1, … h_n (S = 2n+1).
    Index them by depth with :meth:`rows`. The residual states themselves under the logit
    lens (see :attr:`hidden`)."""
    features: torch.Tensor
    """``[S, T, d']`` states after final norm (and projection)."""
    log_normalizer: torch.Tensor
    """``[S, T]`` logsumexp of the post-processed logits."""
    top_ids: torch.Tensor
    """``[S, T, K]`` ids of the K most probable lens tokens."""
    top_logprobs: torch.Tensor
    """``[S, T, K]`` their log-probabilities."""
    sublayers: bool = False
    """Whether ``states`` include h_L.attn between every attention and MLP."""
    mid_states: torch.Tensor | None = None
    """``[n, T, d]`` h_L.attn of every block (sequential blocks, kept for the component
    split); a view of ``states`` in a ``sublayers`` trace, else not read out."""
    head_inputs: torch.Tensor | None = None
    """``[n, T, H·d_head]`` each block's head outputs before its output projection."""
    attn_writes: torch.Tensor | None = None
    """``[n, T, d]`` each parallel block's attention write (its output projection's output)."""
    lens: Lens = LOGIT
    """The coordinates ``states`` and the map are in."""
    residual: torch.Tensor | None = None
    """``[S, T, d]`` the residual states h when ``states`` are transformed (None under the
    logit lens, where they are ``states``)."""
    model_cache: Any = None
    """The model's key/value cache of this forward pass, kept when a request compares two
    answers (``versus=``): the second answer's pass continues the prompt from it."""

    def __post_init__(self) -> None:
        if self.sublayers and self.mid_states is None:
            self.mid_states = self.hidden[1::2]

    @property
    def hidden(self) -> torch.Tensor:
        """``[S, T, d]`` the residual states h (shared by every lens's trace of the prompt)."""
        return self.states if self.residual is None else self.residual

    @property
    def top_k(self) -> int:
        """K, the number of lens tokens kept per row."""
        return self.top_ids.shape[-1]

    def rows(self, depths: Sequence[float]) -> list[int]:
        """Row indices of ``states`` (and the map) for boundary depths (L, or L − ½ for
        h_L.attn, which only a ``sublayers`` trace has)."""
        scale = 2 if self.sublayers else 1
        out = [int(round(float(x) * scale)) for x in depths]
        if any(r != float(x) * scale for r, x in zip(out, depths)):
            raise ValueError(f"depths {list(depths)} need a sub-layer trace")
        return out

    def covers(self, *, sublayers: bool, mids: bool, heads: bool) -> bool:
        """Whether this trace holds what a request needs: sub-layer rows in the map, the
        h_L.attn states, the head outputs."""
        return (
            (self.sublayers or not sublayers)
            and (self.mid_states is not None or not mids)
            and (self.head_inputs is not None or not heads)
        )

    @property
    def predicted(self) -> torch.Tensor:
        """``[T]`` the model's own top-1 next token at each position."""
        return self.top_ids[-1, :, 0]

    def lens_probs(
        self,
        readout: Readout,
        depths: Sequence[float],
        ids: torch.Tensor,
        contrast: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[len(depths), T]`` f at boundary depths for target ``ids`` (``[T]``), minus
        p(contrast)."""
        z = self.features[self.rows(depths)]
        lse = self.log_normalizer[self.rows(depths)]
        p = target_probability(readout.target_logits(z, ids), lse)
        if contrast is not None:
            p = p - target_probability(readout.target_logits(z, contrast), lse)
        return p

    def lens_logprobs(
        self, readout: Readout, depths: Sequence[float], ids: torch.Tensor
    ) -> torch.Tensor:
        """``[len(depths), T]`` log p(ids) at boundary depths (finite where p underflows)."""
        rows = self.rows(depths)
        return readout.target_logits(self.features[rows], ids) - self.log_normalizer[rows]


@torch.no_grad()
def lens_points(lens: Lens, states: torch.Tensor, *, sublayers: bool = False) -> torch.Tensor:
    """``[S, T, d]`` the path points T_L(h_L) of residual ``states`` (rows as in
    :attr:`Trace.states`): one batched matmul per translator, a half-block row h_L.attn
    through T_{L−1} with h_{L−1}. ``states`` itself under the logit lens."""
    if lens.is_identity:
        return states
    points = torch.empty_like(states)
    scale = 2 if sublayers else 1
    for depth in range(0, states.shape[0], scale):  # h_L, then h_{L+1}.attn (also T_L)
        rows = slice(depth, depth + scale)
        points[rows] = lens.transform(states[rows], depth // scale)
    return points


@torch.no_grad()
def readout_map(
    readout: Readout, states: torch.Tensor, top_k: int, budget_bytes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features, log-normaliser, top-k ids and log-probs for every row of ``states``.

    The ``[rows × vocab]`` logits are never held whole: they stream in tiles of rows ×
    vocabulary columns (:meth:`Readout.scan`: cache-sized on a CPU, and never over the
    :func:`block_plan` of ``budget_bytes``), with a running logsumexp and a running top-k
    merged across tiles.
    """
    lead = states.shape[:-1]
    features = readout.features(states.reshape(-1, states.shape[-1]))
    n_rows, vocab = features.shape[0], readout.vocab_size
    k = min(top_k, vocab)
    rows, cols = block_plan(
        n_rows, vocab, readout.dtype, budget_bytes, head_width=readout.head_block_width
    )
    done = readout.scan(features, k, online=False, max_rows=rows, max_columns=cols)
    lse = done.log_normalizer
    if done.top_ids is not None and done.top_values is not None:  # k > 0
        top_ids, top_logprobs = done.top_ids, done.top_values.sub_(lse[:, None])
    else:
        top_ids = torch.empty(n_rows, 0, device=features.device, dtype=torch.long)
        top_logprobs = torch.empty(n_rows, 0, device=features.device, dtype=features.dtype)
    return (
        features.reshape(*lead, -1),
        lse.reshape(lead),
        top_ids.reshape(*lead, k),
        top_logprobs.reshape(*lead, k),
    )
