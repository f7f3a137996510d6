"""Does the IG-Lens onset agree with causal ablation? A many-prompt check.

For every prompt and position, :func:`validate_onset` compares the IG-Lens contributions of
the segments (by default, every block) with the drop in the target probability when that
segment is ablated in the real forward pass (:func:`iglens_viz.causal.ablate`):

- ``spearman``: rank correlation across segments between contribution and drop;
- ``hit``: ablating the onset segment (largest signed contribution) lowers the target
  probability more than the median drop of the *low-scoring* segments, the ⌊k/2⌋ segments
  with the smallest contributions (the lower half);
- ``monotone``: :func:`iglens_viz.core.trajectory.is_monotone`, the one definition every
  view uses: False when some segment moves against the overall change Δp by more than
  ``nonmonotone_threshold`` × the largest |contribution| of that token (the trajectory rises
  then partly falls, or the reverse); Δp = 0 has no direction and counts as monotone.

IG-Lens measures a conditional marginal (what the readout gains from h_L given h_{L-1}); the
ablation drop is a total effect that also flows through later blocks. Agreement is therefore
evidence, not an identity; the split by monotone/non-monotone trajectories shows where the
two disagree most.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..core.boundaries import BoundarySpec, parse_boundaries
from ..core.lens import IGLens
from ..core.request import PromptSpec, TargetSpec
from ..core.result import onset_segments
from ..core.stats import spearman
from ..core.targets import NO_TARGET
from ..core.trajectory import NONMONOTONE_THRESHOLD, is_monotone
from ..errors import InvalidRequestError
from .ablation import AblationMode
from .segments import segment_drops, segment_parts

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from pandas import DataFrame
    from torch import nn
    from transformers import PreTrainedTokenizerBase

__all__ = ["COLUMNS", "ValidationResult", "spearman", "validate_onset"]

COLUMNS = (
    "prompt",
    "position",
    "token",
    "target",
    "target_id",
    "p_final",
    "delta_p",
    "onset",
    "onset_contribution",
    "onset_drop",
    "median_low_drop",
    "hit",
    "spearman",
    "monotone",
)
"""Columns of :attr:`ValidationResult.table`, one row per (prompt, position)."""


def _median_low(contributions: np.ndarray, drops: np.ndarray) -> float:
    """Median drop of the ⌊k/2⌋ segments with the smallest contributions."""
    k = len(contributions)
    low = np.argsort(contributions, kind="stable")[: k // 2]
    return float(np.median(drops[low]))


@dataclass
class ValidationResult:
    """Onset-vs-ablation agreement over many prompts.

    N is the number of (prompt, position) rows kept, k the number of segments.
    """

    table: DataFrame
    """Tidy ``pandas.DataFrame``, one row per (prompt, position), columns :data:`COLUMNS`:
    ``prompt`` (index into the prompts), ``position``, ``token`` and ``target`` (text),
    ``target_id``, ``p_final`` (the model's probability of the target), ``delta_p``
    (f(h_n) − f(h_0)), ``onset`` (last block of the segment with the largest contribution),
    ``onset_contribution``, ``onset_drop`` (ablation drop of that segment),
    ``median_low_drop`` (median drop of the lower half of segments by contribution), ``hit``
    (``onset_drop > median_low_drop``), ``spearman`` (rank correlation of contributions and
    drops across segments; NaN if either is constant), ``monotone``."""
    contributions: np.ndarray
    """``(N, k)`` IG-Lens contributions of each row's segments."""
    drops: np.ndarray
    """``(N, k)`` ablation drops of the same segments."""
    boundaries: list[float]
    """``k+1`` segment boundaries used (ints, except L − 0.5 for h_L.attn under
    ``"sublayer"`` boundaries)."""
    mode: AblationMode = "zero"
    """The ablation mode (``zero`` or ``mean``)."""
    nonmonotone_threshold: float = NONMONOTONE_THRESHOLD
    """Fraction of a token's largest |contribution| above which an opposite-sign segment
    makes its trajectory non-monotone."""
    prompts: list[PromptSpec] = field(default_factory=list, repr=False)
    """The prompts, as given."""

    def summary(self) -> DataFrame:
        """``pandas.DataFrame`` indexed ``all`` / ``monotone`` / ``non-monotone`` with
        ``n_tokens``, ``mean_spearman`` (over tokens with a defined correlation),
        ``median_spearman``, ``hit_rate`` and ``chance_hit_rate``: the hit rate a segment
        drawn uniformly at random instead of the onset would get (the baseline to beat)."""
        import pandas as pd

        t = self.table
        low = t["median_low_drop"].to_numpy(dtype=np.float64)
        chance = (self.drops > low[:, None]).mean(axis=1) if len(t) else np.zeros(0)
        groups = {
            "all": np.ones(len(t), dtype=bool),
            "monotone": t["monotone"].to_numpy(dtype=bool),
            "non-monotone": ~t["monotone"].to_numpy(dtype=bool),
        }
        rows = {}
        for name, mask in groups.items():
            rho = t["spearman"].to_numpy(dtype=np.float64)[mask]
            hit = t["hit"].to_numpy(dtype=np.float64)[mask]
            finite = rho[np.isfinite(rho)]
            rows[name] = {
                "n_tokens": int(mask.sum()),
                "mean_spearman": float(finite.mean()) if finite.size else float("nan"),
                "median_spearman": float(np.median(finite)) if finite.size else float("nan"),
                "hit_rate": float(hit.mean()) if hit.size else float("nan"),
                "chance_hit_rate": float(chance[mask].mean()) if hit.size else float("nan"),
            }
        return pd.DataFrame.from_dict(rows, orient="index")

    def plot(self, ax: Axes | None = None) -> Figure:
        """Scatter of contribution vs ablation drop for every (token, segment), coloured by
        monotone / non-monotone trajectory. Returns the matplotlib Figure (built without
        pyplot); see :func:`iglens_viz.views.causal.plot_validation`."""
        from ..views.causal import plot_validation

        return plot_validation(self, ax=ax)


def validate_onset(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    texts: str | Iterable[PromptSpec],
    *,
    target: TargetSpec = "predicted",
    boundaries: BoundarySpec = None,
    mode: AblationMode = "zero",
    min_prob: float = 0.0,
    nonmonotone_threshold: float = NONMONOTONE_THRESHOLD,
    progress: bool = True,
    batch_size: int | None = None,
) -> ValidationResult:
    """Compare IG-Lens contributions with causal ablation drops over many prompts.

    Parameters
    ----------
    texts:
        Prompts: strings or token-id sequences (one string is treated as one prompt).
    target:
        As in :func:`iglens_viz.attribute`; the ablation measures exactly the targets IG-Lens
        resolved.
    boundaries:
        Segment boundaries in any form :func:`iglens_viz.attribute` takes; None for every
        block. A segment spanning several
        blocks is ablated by ablating all of them together; a half block (``"sublayer"``)
        by removing its attention's or its MLP's write (``part="attn"`` / ``"mlp"``), as
        :func:`~iglens_viz.core.boundaries.segment_parts` maps them.
    mode:
        Ablation mode: ``"zero"`` only. Mean ablation needs a reference set of the same
        template and length as each prompt (:func:`ablate`'s ``references``), which a list of
        unrelated prompts does not have; ``iglens study`` draws references per task.
    min_prob:
        Keep only positions whose final target probability is at least this (0 keeps all
        positions that have a target).
    nonmonotone_threshold:
        See :func:`iglens_viz.core.trajectory.is_monotone`.
    progress:
        Show a tqdm progress bar over prompts.
    batch_size:
        Ablations per forward pass (see :func:`ablate`).
    """
    import pandas as pd
    from tqdm.auto import tqdm

    if mode != "zero":
        raise InvalidRequestError(
            f"validate_onset(mode={mode!r}): only zero ablation is offered here; mean ablation "
            f"needs references of each prompt's own template and length: use ablate(model, "
            f"tokenizer, prompt, mode='mean', references=[...]) or iglens study --modes mean"
        )
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise InvalidRequestError("texts is empty: pass a list of prompts (e.g. load_prompts())")
    engine = IGLens(model, tokenizer, top_k=1, cache_size=1)
    bounds = parse_boundaries(boundaries, engine.n_blocks)
    if len(bounds) < 3:
        raise InvalidRequestError("validation needs at least two segments to compare")
    plan = segment_parts(bounds)

    rows, contributions, drops = [], [], []
    for index, text in enumerate(
        tqdm(texts, disable=not progress, desc="validate_onset", unit="prompt")
    ):
        att = engine.attribute(text, target=target, boundaries=boundaries)
        clean, dropped = segment_drops(
            model, tokenizer, att.input_ids, att.target_ids, plan, mode=mode, batch_size=batch_size
        )
        for t in range(len(att.tokens)):
            if att.target_ids[t] == NO_TARGET:
                continue
            p_final = float(clean[t])
            if p_final < min_prob:
                continue
            c = att.contributions[t]
            d = dropped[t]
            j = int(onset_segments(c[None])[0])
            low = _median_low(c, d)
            rows.append(
                {
                    "prompt": index,
                    "position": t,
                    "token": att.tokens[t],
                    "target": att.target_tokens[t],
                    "target_id": int(att.target_ids[t]),
                    "p_final": p_final,
                    "delta_p": float(att.delta_p[t]),
                    "onset": int(att.onset[t]),
                    "onset_contribution": float(c[j]),
                    "onset_drop": float(d[j]),
                    "median_low_drop": low,
                    "hit": bool(d[j] > low),
                    "spearman": spearman(c, d),
                    "monotone": is_monotone(c, att.delta_p[t], nonmonotone_threshold),
                }
            )
            contributions.append(c)
            drops.append(d)

    k = len(plan)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table = table.astype(
        {
            "prompt": "int64",
            "position": "int64",
            "target_id": "int64",
            "onset": "int64",
            "hit": "bool",
            "monotone": "bool",
        }
    )
    return ValidationResult(
        table=table,
        contributions=np.asarray(contributions, dtype=np.float64).reshape(-1, k),
        drops=np.asarray(drops, dtype=np.float64).reshape(-1, k),
        boundaries=bounds,
        mode=mode,
        nonmonotone_threshold=nonmonotone_threshold,
        prompts=list(texts),
    )
