"""The block-gate game's result: :class:`GateLedger`, its ledgers and their sentences."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from ...core.extensions import provider
from ...errors import InvalidRequestError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GATE_BASELINES", "GATE_PATHS", "GateBaseline", "GateLedger", "GatePath"]

GatePath = Literal["forward", "reverse", "diagonal"]
GATE_PATHS: tuple[GatePath, ...] = get_args(GatePath)
"""The paths from all gates closed to all open: ``forward`` (block 1 first), ``reverse``
(block n first), ``diagonal`` (all together). ``"all"`` asks for the three."""
GateBaseline = Literal["counterfactual", "removal"]
GATE_BASELINES: tuple[GateBaseline, ...] = get_args(GateBaseline)
"""What a closed gate writes: the counterfactual prompt's write, or nothing."""


@dataclass
class GateLedger:
    """The block-gate game at one position of one prompt: its ledgers, in probability units.

    k is the number of gates (one per block by default, per segment or per sub-layer with
    other ``boundaries``). Every ledger in :attr:`entries` sums to :attr:`total` to float
    precision.
    """

    entries: dict[str, np.ndarray]
    """Path → ``(k,)`` the gates' credits along that path (float64, probability units)."""
    corners: dict[str, np.ndarray]
    """Staircase → ``(k+1,)`` G at its corners: ``forward[j]`` with gates 1…j open,
    ``reverse[j]`` with gates j+1…k open (so ``reverse[0]`` = G(1), ``reverse[k]`` = G(0))."""
    diagonal_values: np.ndarray | None
    """``(m+1,)`` G at a = s/m along the diagonal (None when it was not asked for)."""
    riemann: np.ndarray | None
    """``(k,)`` the diagonal's midpoint Riemann sum, ``(1/m) Σ_s ∂G/∂a_j((s − ½)/m)``: the
    classic integrated-gradients estimate beside the exact split (it sums to the total only
    up to its discretisation error)."""
    readable: np.ndarray
    """``(k,)`` IG-Lens's ledger at this position under the logit lens, f(h_{L_j}[t]) −
    f(h_{L_{j−1}}[t]) in the clean run: the removal game's forward staircase (total
    f(h_n[t]) − f(h_0[t])), kept for every baseline so the three ledgers are read together."""
    start: float
    """G(0), from a gated run with every gate closed."""
    end: float
    """G(1), from a gated run with every gate open."""
    start_reference: float
    """G(0) from a plain run: the counterfactual prompt's own probability of the target at
    t (its logits), or f(h_0[t]) for the removal game."""
    end_reference: float
    """G(1) from a plain run: the clean prompt's own probability of the target at t."""
    labels: list[str]
    """``(k,)`` the gates' labels: ``"3"`` (block 3), ``"11–15"``, ``"12.attn"``."""
    boundaries: list[float]
    """``(k+1,)`` the depths between gates (as :func:`~iglens_viz.attribute`'s)."""
    position: int
    """The 0-based position t whose blocks' writes are gated."""
    target_id: int
    """The token whose probability G reads."""
    baseline: GateBaseline
    steps: int
    """m, the diagonal's steps."""
    n_blocks: int
    clean_ids: np.ndarray
    """``(T,)`` the clean sequence (prompt, then answer if any)."""
    corrupt_ids: np.ndarray | None
    """``(T,)`` the counterfactual sequence (None for the removal game)."""
    prompt_length: int
    """Tokens of the clean sequence that are the prompt (the rest is the answer)."""
    components: pd.DataFrame | None = None
    """With ``components=True``: one row per (gate, block, component) of the diagonal:
    ``gate`` (label), ``block`` (1-based), ``component`` (``head:i``, ``mlp``, ``rest``, or
    ``attn``), ``entry``; a gate's rows sum to its diagonal entry."""
    token_text: dict[int, str] = field(default_factory=dict, repr=False)
    """Decoded text of every token id the result refers to (untrusted: escape on display)."""

    @property
    def paths(self) -> list[str]:
        """The paths computed, in the order of :data:`GATE_PATHS`."""
        return [p for p in GATE_PATHS if p in self.entries]

    @property
    def total(self) -> float:
        """G(1) − G(0), what every ledger splits."""
        return self.end - self.start

    @property
    def target(self) -> str:
        """The target token's text (untrusted)."""
        return self.token_text.get(self.target_id, "")

    @property
    def tokens(self) -> list[str]:
        """The clean sequence's tokens as text (untrusted)."""
        return [self.token_text.get(int(i), "") for i in self.clean_ids]

    @property
    def corrupt_tokens(self) -> list[str]:
        """The counterfactual sequence's tokens as text (untrusted; [] for removal)."""
        ids: Any = [] if self.corrupt_ids is None else self.corrupt_ids
        return [self.token_text.get(int(i), "") for i in ids]

    def argmax(self, path: str) -> str:
        """The label of the gate with the largest signed entry along ``path`` (``"readable"``
        for :attr:`readable`)."""
        values = self.readable if path == "readable" else self._ledger(path)
        return self.labels[int(np.argmax(values))]

    def shares(self, path: str) -> np.ndarray:
        """``(k,)`` a ledger's entries as fractions of its total (``"readable"``: of Δp)."""
        values = self.readable if path == "readable" else self._ledger(path)
        total = float(values.sum())
        return values / total if total else np.full_like(values, np.nan)

    def sentences(self, *, plain: bool = False) -> dict[str, str]:
        """One sentence per ledger, keyed ``readable``, ``arrives`` (the counterfactual
        game's reverse staircase) and ``shared`` (its diagonal), where computed: the block
        each names and its share, in the words the views use (never "computed" or
        "decides"). ``plain`` words are for a class. Token text is not included."""
        out = {"readable": _top_sentence(self, "readable", plain)}
        if "reverse" in self.entries and self.baseline == "counterfactual":
            out["arrives"] = _top_sentence(self, "reverse", plain)
        if "diagonal" in self.entries:
            out["shared"] = _shared_sentence(self, plain)
        return out

    def _ledger(self, path: str) -> np.ndarray:
        if path not in self.entries:
            raise InvalidRequestError(
                f"this ledger has no {path!r} path; it has {', '.join(self.entries)}"
                + (" and 'readable'" if path != "readable" else "")
            )
        return self.entries[path]

    def to_frame(self) -> pd.DataFrame:
        """One row per gate: its label, the readable ledger, each path's entry, and the
        Riemann sum where the diagonal was computed (pandas)."""
        import pandas as pd

        columns: dict[str, Any] = {"gate": self.labels, "readable": self.readable}
        columns.update(self.entries)
        if self.riemann is not None:
            columns["riemann"] = self.riemann
        return pd.DataFrame(columns)

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values (lists, floats, strings; token text included and
        untrusted): the ``--json`` output and the widget's payload read it."""

        def floats(values: Any) -> list[float] | None:
            return None if values is None else [float(v) for v in values]

        return {
            "position": self.position,
            "target_id": self.target_id,
            "target": self.target,
            "baseline": self.baseline,
            "steps": self.steps,
            "labels": list(self.labels),
            "boundaries": [float(b) for b in self.boundaries],
            "start": self.start,
            "end": self.end,
            "total": self.total,
            "start_reference": self.start_reference,
            "end_reference": self.end_reference,
            "readable": floats(self.readable),
            "entries": {p: floats(v) for p, v in self.entries.items()},
            "corners": {p: floats(v) for p, v in self.corners.items()},
            "diagonal_values": floats(self.diagonal_values),
            "riemann": floats(self.riemann),
            "sentences": self.sentences(),
            "plain_sentences": self.sentences(plain=True),
            "prompt_length": self.prompt_length,
            "tokens": self.tokens,
            "corrupt_tokens": self.corrupt_tokens,
        }

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """The ledgers as bars on the gate axis (matplotlib; see
        :func:`iglens_viz.views.causal.plot_gate_ledger`)."""
        return provider("plot_gate_ledger")(self, ax=ax, **kwargs)


# --- sentences -------------------------------------------------------------------------------


def _blocks_label(labels: list[str], start: int, stop: int) -> str:
    """``"block 24"`` or ``"blocks 25–30"`` for gates ``start … stop − 1``."""
    if stop - start == 1:
        return f"{'blocks' if '–' in labels[start] else 'block'} {labels[start]}"
    first, last = labels[start].split("–")[0], labels[stop - 1].split("–")[-1]
    return f"blocks {first}–{last}"


_TOP_WORDS = {
    "readable": (
        "readable: {where} ({share} of Δp, IG-Lens)",
        "Becomes readable: read through the model's last layer, the answer's probability rises "
        "most in {where} ({share} of its rise).",
    ),
    "reverse": (
        "the answer-specific information arrives: {where} ({share}, patching)",
        "Arrives: swapping the question for the other one shows where the information that "
        "picks this answer arrives at this token: {where} ({share}).",
    ),
}
"""A one-block ledger's sentence, in research words and a class's, per ledger."""


def _top_sentence(ledger: GateLedger, path: str, plain: bool) -> str:
    """The sentence of the gate with the largest entry along ``path`` and its share."""
    values = ledger.readable if path == "readable" else ledger.entries[path]
    j = int(np.argmax(values))
    where = _blocks_label(ledger.labels, j, j + 1)
    return _TOP_WORDS[path][plain].format(where=where, share=_percent(ledger.shares(path)[j]))


def _shared_sentence(ledger: GateLedger, plain: bool) -> str:
    shares = ledger.shares("diagonal")
    k = len(shares)
    j = int(np.argmax(ledger.entries["diagonal"]))
    parts = [f"{_blocks_label(ledger.labels, j, j + 1)} {_percent(shares[j])}"]
    if j + 1 < k:
        parts.append(f"{_blocks_label(ledger.labels, j + 1, k)} {_percent(shares[j + 1 :].sum())}")
    if j > 0:
        parts.append(f"{_blocks_label(ledger.labels, 0, j)} {_percent(shares[:j].sum())}")
    listed = ", ".join(parts)
    if plain:
        return f"Credit: sharing it between blocks that work together gives {listed}."
    return f"shared credit: {listed}"


def _percent(share: float) -> str:
    return "n/a" if not np.isfinite(share) else f"{100 * share:.0f}%"
