"""The terminal table of an attribution (rich), one row per shown position."""

from __future__ import annotations

import numpy as np
from rich import box
from rich.table import Table
from rich.text import Text

from ..views.token_format import format_token


def largest_contributions(result, position: int, top_k: int) -> str:
    """The ``top_k`` largest |contributions| of one position, signed, e.g. ``L21 +0.52``."""
    row = result.contributions[position]
    labels = result.segment_labels
    order = np.argsort(-np.abs(row))[:top_k]
    return "\n".join(f"L{labels[j]} {row[j]:+.3f}" for j in order)


def attribution_table(result, positions, top_k: int = 3) -> Table:
    """A rich ``Table``: token, target, p_final, Δp, onset, largest contributions, |Σ−Δp|.

    Token strings and the model's name are ``Text`` objects, so rich never interprets them as
    markup.
    """
    table = Table(box=box.SIMPLE_HEAD, title=Text(
        f"IG-Lens — {result.model_name or result.family} "
        f"({result.n_blocks} blocks, {result.estimator}, steps={result.steps})"))
    for name, justify in [("pos", "right"), ("token", "left"), ("target", "left"),
                          ("p_final", "right"), ("Δp", "right"), ("onset", "right"),
                          ("largest\ncontributions", "left"), ("|Σ−Δp|", "right")]:
        is_text = name in ("token", "target")
        table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis",
                         max_width=12 if is_text else None,
                         min_width=None if is_text else max(7, len(name.split("\n")[-1])))
    for t in positions:
        if result.target_ids[t] < 0:
            table.add_row(str(t), Text(format_token(result.tokens[t])), Text("—"),
                          "", "", "", "", "")
            continue
        error = abs(result.contributions[t].sum() - result.delta_p[t])
        table.add_row(str(t), Text(format_token(result.tokens[t])),
                      Text(format_token(result.target_tokens[t])),
                      f"{result.final_probs[t]:.3f}", f"{result.delta_p[t]:+.3f}",
                      f"L{result.onset[t]}", largest_contributions(result, t, top_k),
                      f"{error:.1e}")
    return table
