"""The cached product of one forward pass: states plus a target-independent readout map.

The full map evaluates the readout once on every (layer, position) row, in chunks sized so
the ``[rows × vocab]`` logits block stays under a memory budget. Per row it keeps the
normalised features, the log-normaliser (one logsumexp) and the top-k; every later target,
contrast or boundary set then needs only a dot product per row (see ``Readout.target_logits``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .readout import Readout

DEFAULT_MEMORY_BUDGET = 256 * 2**20
"""Bytes allowed for one chunk's logits and their temporaries."""

# A chunk holds the logits plus about two more [rows × vocab] temporaries (softmax/topk).
_LOGIT_COPIES = 3


def rows_per_chunk(vocab_size: int, dtype: torch.dtype, budget_bytes: int,
                   copies: int = _LOGIT_COPIES) -> int:
    """How many readout rows fit in ``budget_bytes`` (at least one)."""
    itemsize = torch.finfo(dtype).bits // 8
    return max(1, int(budget_bytes) // (vocab_size * itemsize * copies))


@dataclass
class Trace:
    """States and readout map of one input sequence (tensors on the readout device)."""

    input_ids: torch.Tensor
    """``[T]`` token ids (CPU)."""
    states: torch.Tensor
    """``[n+1, T, d]`` pre-norm residual states h_0 … h_n."""
    features: torch.Tensor
    """``[n+1, T, d']`` states after final norm (and projection)."""
    log_normalizer: torch.Tensor
    """``[n+1, T]`` logsumexp of the post-processed logits."""
    top_ids: torch.Tensor
    """``[n+1, T, K]`` ids of the K most probable lens tokens."""
    top_logprobs: torch.Tensor
    """``[n+1, T, K]`` their log-probabilities."""

    @property
    def top_k(self) -> int:
        """K, the number of lens tokens kept per row."""
        return self.top_ids.shape[-1]

    @property
    def predicted(self) -> torch.Tensor:
        """``[T]`` the model's own top-1 next token at each position."""
        return self.top_ids[-1, :, 0]

    def lens_probs(self, readout: Readout, layers, ids: torch.Tensor,
                   contrast: torch.Tensor | None = None) -> torch.Tensor:
        """``[len(layers), T]`` f(h_L) for target ``ids`` (``[T]``), minus p(contrast)."""
        z = self.features[layers]
        lse = self.log_normalizer[layers]
        p = torch.exp(readout.target_logits(z, ids) - lse)
        if contrast is not None:
            p = p - torch.exp(readout.target_logits(z, contrast) - lse)
        return p


@torch.no_grad()
def readout_map(readout: Readout, states: torch.Tensor, top_k: int, budget_bytes: int,
                progress=None) -> tuple[torch.Tensor, ...]:
    """Features, log-normaliser, top-k ids and log-probs for every row of ``states``."""
    lead = states.shape[:-1]
    flat = states.reshape(-1, states.shape[-1])
    k = min(top_k, readout.vocab_size)
    chunk = rows_per_chunk(readout.vocab_size, readout.dtype, budget_bytes)
    features, lse, top_ids, top_lp = [], [], [], []
    for start in range(0, flat.shape[0], chunk):
        z = readout.features(flat[start:start + chunk])
        logits = readout.logits_from_features(z)
        norm = torch.logsumexp(logits, dim=-1)
        values, ids = logits.topk(k, dim=-1) if k else (logits[:, :0], logits[:, :0].long())
        features.append(z)
        lse.append(norm)
        top_ids.append(ids)
        top_lp.append(values - norm[:, None])
        del logits
        if progress is not None:
            progress(z.shape[0])
    return (torch.cat(features).reshape(*lead, -1), torch.cat(lse).reshape(lead),
            torch.cat(top_ids).reshape(*lead, k), torch.cat(top_lp).reshape(*lead, k))
