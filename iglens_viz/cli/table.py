"""The terminal table of an attribution (rich), one row per shown position."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich import box
from rich.table import Table
from rich.text import Text

from ..core.boundaries import is_sublayer
from ..core.prompting import wants_chat
from ..views.token_format import format_token, visible_text

if TYPE_CHECKING:
    from rich.console import JustifyMethod

    from ..core.result import AttributionResult


def _largest(values: np.ndarray, labels: Sequence[str], top_k: int) -> str:
    order = np.argsort(-np.abs(values))[:top_k]
    return "\n".join(f"{labels[j]} {values[j]:+.3f}" for j in order)


def largest_contributions(result: AttributionResult, position: int, top_k: int) -> str:
    """The ``top_k`` largest |contributions| of one position, signed, e.g. ``L21 +0.52``."""
    return _largest(
        result.contributions[position], [f"L{label}" for label in result.segment_labels], top_k
    )


def largest_components(names: Sequence[str], shares: np.ndarray, top_k: int) -> str:
    """The ``top_k`` largest |shares| of one position's ``(n, C)`` component split, e.g.
    ``L30.mlp +0.672`` or ``L30.h1 +0.101``."""
    short = [f"h{n.split(':', 1)[1]}" if n.startswith("head:") else n for n in names]
    labels = [f"L{b + 1}.{c}" for b in range(shares.shape[0]) for c in short]
    return _largest(np.nan_to_num(shares.ravel()), labels, top_k)


def mode_line(result: AttributionResult, tokenizer: Any) -> str:
    """One line saying how the prompt ran — as a user message in the tokenizer's chat
    template, or as plain text to complete — what was attributed after it, and the flag for
    the other mode (none when the tokenizer has no chat template)."""
    request = result.request
    if request.answer is not None:
        answer = "the --answer text after it, teacher-forced"
    elif request.max_new_tokens:
        n = len(result.answer_positions)
        answer = f"the model's own greedy answer after it ({n} tokens; --generate N sets the most)"
    else:
        answer = "nothing generated after it (--generate N adds the model's answer)"
    if wants_chat(request.chat, request.prompt, tokenizer):
        return (
            f"Mode: chat — the prompt is a user message in the model's chat template, then "
            f"{answer}. For plain text completion (e.g. 'The Eiffel Tower is in the city of'), "
            f"add --no-chat."
        )
    other = (
        "To ask it as a question in the model's chat template, drop --no-chat."
        if wants_chat("auto", request.prompt, tokenizer)
        else "The tokenizer has no chat template, so there is no chat mode."
    )
    return f"Mode: plain completion — the prompt is raw text, then {answer}. {other}"


def attribution_table(
    result: AttributionResult,
    positions: Sequence[int],
    top_k: int = 3,
    components: tuple[Sequence[str], np.ndarray] | None = None,
) -> Table:
    """A rich ``Table``: token, target, p_final, Δp, onset, largest contributions, |Σ−Δp|,
    and a caption giving the onset's rule (:data:`ONSET_NOTE`).

    ``components`` — ``(names, shares (P, n, C))`` for the shown positions — adds a column of
    the largest head / MLP shares. Token strings and the model's name are ``Text`` objects,
    so rich never interprets them as markup, and their control and bidi characters are
    shown as escapes (:func:`~iglens_viz.views.token_format.format_token`,
    :func:`~iglens_viz.views.token_format.visible_text`).
    """
    table = Table(
        box=box.SIMPLE_HEAD,
        title=Text(
            f"IG-Lens — {visible_text(result.model_name or result.family, keep='')} "
            f"({result.n_blocks} blocks, {result.estimator}, steps={result.steps})"
        ),
        caption=Text(ONSET_NOTE),
        caption_justify="left",
    )
    columns: list[tuple[str, JustifyMethod]] = [
        ("pos", "right"),
        ("token", "left"),
        ("target", "left"),
        ("p_final", "right"),
        ("Δp", "right"),
        ("onset*", "right"),
        ("largest\ncontributions", "left"),
    ]
    if components is not None:
        columns.append(("largest\ncomponents", "left"))
    for name, justify in columns + [("|Σ−Δp|", "right")]:
        is_text = name in ("token", "target")
        table.add_column(
            name,
            justify=justify,
            no_wrap=True,
            overflow="ellipsis",
            max_width=12 if is_text else None,
            min_width=None if is_text else max(7, len(name.split("\n")[-1])),
        )
    halves = is_sublayer(result.boundaries)
    for row, t in enumerate(positions):
        if result.target_ids[t] < 0:
            table.add_row(
                str(t), Text(format_token(result.tokens[t])), Text("—"), *[""] * (len(columns) - 2)
            )
            continue
        error = abs(result.contributions[t].sum() - result.delta_p[t])
        onset = (
            f"L{result.segment_labels[result.onset_segment[t]]}"
            if halves
            else f"L{result.onset[t]}"
        )
        cells = [
            f"{result.final_probs[t]:.3f}",
            f"{result.delta_p[t]:+.3f}",
            onset,
            largest_contributions(result, t, top_k),
        ]
        if components is not None:
            cells.append(largest_components(components[0], components[1][row], top_k))
        table.add_row(
            str(t),
            Text(format_token(result.tokens[t])),
            Text(format_token(result.target_tokens[t])),
            *cells,
            f"{error:.1e}",
        )
    return table


def answer_table(result: AttributionResult, top_k: int = 3) -> Table:
    """A rich ``Table`` of the whole answer's ledgers: one row for the answer, one for the
    ``versus`` answer and one for their difference. Each gives log p and p at the output,
    the largest segments of the log-probability ledger and of the probability ledger, the
    onsets (log, p), the measured change the log ledger adds up to (log p − log F_0; for
    the difference, the gap minus the gap at the embeddings) and |Σ ledger − measured|.
    A probability ledger that is zero at float precision (a long answer's) names no block:
    its cells say so (:data:`UNDERFLOW_NOTE`), pointing to the log ledger.
    """
    answer, versus, comparison = result.answer, result.versus, result.comparison
    if answer is None:
        raise ValueError("the result has no whole answer")
    labels = [f"L{label}" for label in result.segment_labels]
    table = Table(
        box=box.SIMPLE_HEAD,
        title=Text(f"Whole answer across the blocks ({visible_text(result.lens_name)} lens)"),
        caption_justify="left",
    )
    answer_columns: list[tuple[str, JustifyMethod]] = [
        ("answer", "left"),
        ("log p", "right"),
        ("p", "right"),
        ("largest\n(log p)", "left"),
        ("largest\n(p)", "left"),
        ("onset*\nlog, p", "right"),
        ("measured\nΔ log p", "right"),
        ("|Σ−Δ|", "right"),
    ]
    for name, justify in answer_columns:
        table.add_column(
            name,
            justify=justify,
            no_wrap=True,
            overflow="ellipsis",
            max_width=20 if name == "answer" else None,
        )

    notes = [ANSWER_ONSET_NOTE]

    def add(
        text: str,
        log_p: float,
        p: float,
        contributions: tuple[np.ndarray, np.ndarray],
        measured: float,
        onsets: tuple[int, int],
        underflow: bool,
    ) -> None:
        log_c, p_c = contributions
        if underflow and UNDERFLOW_NOTE not in notes:
            notes.append(UNDERFLOW_NOTE)
        table.add_row(
            Text(_tail(visible_text(text))),
            f"{log_p:+.3f}",
            f"{p:+.3g}" if text == _DIFFERENCE else f"{p:.3g}",
            _largest(log_c, labels, top_k),
            "0 at float\nprecision†" if underflow else _largest(p_c, labels, top_k),
            f"L{onsets[0]}, " + ("—†" if underflow else f"L{onsets[1]}"),
            f"{measured:+.4f}",
            f"{abs(log_c.sum() - measured):.1e}",
        )

    for ledger in (answer, versus):
        if ledger is not None:
            lp = ledger.lens_logprobs
            add(
                ledger.text,
                ledger.logprob,
                ledger.prob,
                (ledger.logprob_contributions, ledger.prob_contributions),
                lp[-1] - lp[0],
                (ledger.logprob_onset, ledger.onset),
                ledger.prob_underflow,
            )
    if comparison is not None:
        add(
            _DIFFERENCE,
            comparison.logprob_gap,
            comparison.prob_gap,
            (comparison.logprob_contributions, comparison.prob_contributions),
            comparison.logprob_gap - comparison.start_logprob_gap,
            (comparison.onset, comparison.prob_onset),
            comparison.prob_underflow,
        )
    table.caption = Text("\n".join(notes))
    return table


def gate_table(ledger: Any, counterfactual: str, min_share: float = 0.05) -> Table:
    """A rich ``Table`` of the block-gate game at one position: per block, the readable
    ledger (IG-Lens), where the answer-specific information arrives (the reverse staircase)
    and the shared credit (the diagonal), in probability units; only the blocks holding at
    least ``min_share`` of some ledger's total (the others' sums in a last row), then each
    ledger's total and its sentence. ``ledger`` is a
    :class:`~iglens_viz.causal.gates.GateLedger`, ``counterfactual`` the text it was played
    against (untrusted, shown escaped)."""
    t = ledger.position
    title = Text.assemble(
        f"Block-gate game at position {t} (",
        visible_text(format_token(ledger.tokens[t])),
        " → ",
        visible_text(format_token(ledger.target)),
        ") against “",
        visible_text(counterfactual),
        f"”, m = {ledger.steps}",
    )
    table = Table(box=box.SIMPLE_HEAD, title=title)
    columns = {
        "becomes readable": ledger.readable,
        "arrives": ledger.entries.get("reverse"),
        "shared credit": ledger.entries.get("diagonal"),
    }
    shown = {name: v for name, v in columns.items() if v is not None}
    table.add_column("block", justify="right")
    for name in shown:
        table.add_column(name, justify="right")
    shares = np.stack([np.abs(v) / max(abs(float(v.sum())), 1e-300) for v in shown.values()])
    keep = shares.max(0) >= min_share
    for j in np.flatnonzero(keep):
        table.add_row(ledger.labels[j], *(f"{v[j]:+.4f}" for v in shown.values()))
    if not keep.all():
        table.add_row("others", *(f"{v[~keep].sum():+.4f}" for v in shown.values()))
    table.add_row("total", *(f"{v.sum():+.4f}" for v in shown.values()), end_section=True)
    table.caption = Text("\n".join(ledger.sentences().values()))
    return table


_DIFFERENCE = "answer − versus"

ONSET_NOTE = (
    "* onset: the block with the largest signed contribution, where p(target) rises most. "
    "The largest contributions are ranked by size, rises and falls alike, so a larger fall "
    "can be listed beside the onset."
)
ANSWER_ONSET_NOTE = (
    "* onset: the block with the largest signed entry of each ledger (for answer − versus, "
    "the entry that moves the gap most towards the answer the output prefers)."
)
UNDERFLOW_NOTE = (
    "† the probability ledger is 0 at float precision: the answer's joint probability is "
    "below the smallest float64 (2.2e-308) at every depth, so it names no onset. Read the "
    "log-probability ledger: largest (log p) and its onset."
)


def _tail(text: str, width: int = 20) -> str:
    """``text``, or its last ``width − 1`` characters after an ellipsis: answers after one
    prompt often share their start."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]
