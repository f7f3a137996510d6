"""Lens quality: per depth, the KL from the model's final distribution and the top-1
agreement with its output, on held-out text (the tuned-lens paper's standard figure).

For every kept position t of the texts (every position after the first, as in fitting) and
every depth L, with p = softmax(post(head(norm(h_n)))) the model's own distribution and
q_L = softmax(post(head(norm(T_L(h_L))))) the lens's: KL(p ‖ q_L) = Σ_v p_v (log p_v −
log q_L,v) in nats, and whether argmax q_L = argmax p; both averaged over the positions.
At depth n every lens is the identity: KL 0 and agreement 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from ..core.coordinates import LOGIT, Lens
from ..core.readout import Readout
from .states import encode_texts, model_shape, state_batches

if TYPE_CHECKING:
    import pandas as pd
    from transformers import PreTrainedTokenizerBase

__all__ = ["LensEvaluation", "evaluate_lens"]

_BLOCK_BYTES = 64 * 2**20  # one block of [rows × V] logits and its temporaries


@dataclass(frozen=True)
class LensEvaluation:
    """Per-depth quality of a lens (and of the logit lens beside it, when asked)."""

    lens: str
    """The lens's name."""
    depths: np.ndarray
    """``(n+1,)`` depths 0 … n."""
    kl: np.ndarray
    """``(n+1,)`` mean KL(final ‖ lens) in nats."""
    top1: np.ndarray
    """``(n+1,)`` fraction of positions where the lens's top-1 token is the model's."""
    positions: int
    """How many positions the means are over."""
    logit_kl: np.ndarray | None = None
    """The logit lens's KL, when evaluated beside it."""
    logit_top1: np.ndarray | None = None
    """The logit lens's top-1 agreement, when evaluated beside it."""

    def to_frame(self) -> pd.DataFrame:
        """One row per depth: ``depth, kl, top1`` (and ``logit_kl, logit_top1``)."""
        import pandas as pd

        columns = {"depth": self.depths, "kl": self.kl, "top1": self.top1}
        if self.logit_kl is not None and self.logit_top1 is not None:
            columns.update(logit_kl=self.logit_kl, logit_top1=self.logit_top1)
        frame = pd.DataFrame(columns)
        frame.attrs.update(lens=self.lens, positions=self.positions)
        return frame


def _log_probs(readout: Readout, h: torch.Tensor) -> torch.Tensor:
    logits = readout.logits(h).double()
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


@torch.no_grad()
def _sums(
    lens: Lens, readout: Readout, states: torch.Tensor, sums: np.ndarray, agree: np.ndarray
) -> None:
    """Add each depth's KL and top-1 matches over the rows of ``states`` [n+1, R, d]."""
    n, R = states.shape[0] - 1, states.shape[1]
    rows = max(1, _BLOCK_BYTES // (8 * 3 * readout.vocab_size))
    for r0 in range(0, R, rows):
        final = _log_probs(readout, states[n, r0 : r0 + rows])
        top = final.argmax(-1)
        p = final.exp()
        for L in range(n + 1):
            h = states[L, r0 : r0 + rows]
            q = _log_probs(readout, lens.transform(h, L))
            sums[L] += float((p * (final - q)).sum())
            agree[L] += int((q.argmax(-1) == top).sum())


def evaluate_lens(
    lens: Lens,
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    texts: Sequence[str | Sequence[int] | torch.Tensor] | None = None,
    *,
    baseline: bool = True,
    batch_size: int = 16,
    skip_first: int = 1,
) -> LensEvaluation:
    """Per-depth KL(final ‖ lens) and top-1 agreement of ``lens`` on ``texts`` (default:
    the held-out evaluation corpus, see :mod:`iglens_viz.lenses.corpus`), with the logit
    lens's beside it when ``baseline``. The lens is checked against the model first."""
    adapter, n, d = model_shape(model)
    lens.check(model, n, d)
    if texts is None:
        from .fit import model_corpus

        sequences = model_corpus(model, tokenizer, "eval")
    else:
        sequences = encode_texts(tokenizer, texts)
    readout = Readout(adapter, torch.float32)
    lenses = [lens, LOGIT] if baseline and not lens.is_identity else [lens]
    sums = [np.zeros(n + 1) for _ in lenses]
    agree = [np.zeros(n + 1) for _ in lenses]
    positions = 0
    for states in state_batches(model, sequences, batch_size=batch_size, skip_first=skip_first):
        positions += states.shape[1]
        for i, each in enumerate(lenses):
            _sums(each, readout, states, sums[i], agree[i])
    count = max(positions, 1)
    kl, top1 = sums[0] / count, agree[0] / count
    if baseline:
        logit_kl, logit_top1 = (sums[-1] / count, agree[-1] / count)
    return LensEvaluation(
        lens.name,
        np.arange(n + 1),
        kl,
        top1,
        positions,
        logit_kl if baseline else None,
        logit_top1 if baseline else None,
    )
