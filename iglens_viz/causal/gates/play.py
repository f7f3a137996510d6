"""Playing the game at one position: the inputs and their checks, the paths' gate values,
and the ledgers split from the runs (:func:`gate_ledger`, :func:`ledger_for`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import torch
from torch import nn

from ...core.boundaries import BoundarySpec, is_sublayer, parse_boundaries, segment_labels
from ...core.components import component_names
from ...core.estimators import progress_reporter
from ...core.lens import IGLens
from ...core.request import AttributionRequest, PromptSpec
from ...core.targets import single_token_id, token_texts
from ...core.wrappers import unwrap_model
from ...errors import InvalidRequestError, UnsupportedModelError
from .ledger import GATE_BASELINES, GATE_PATHS, GateBaseline, GateLedger, GatePath
from .runs import (
    GRADIENT_ROW_COST,
    Game,
    Run,
    baseline_components,
    gating_for,
    gradients_at,
    own_probability,
    plain_run,
    values_at,
)

if TYPE_CHECKING:
    import pandas as pd
    from transformers import PreTrainedTokenizerBase

__all__ = ["MAX_GATE_STEPS", "gate_ledger", "ledger_for", "split_steps", "swap_subject"]

MAX_GATE_STEPS = 1000
"""The most diagonal steps a ledger takes (each costs two single-token runs)."""


def split_steps(changes: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``[m, K]`` each step's observed change ``changes[s]`` split over K parts with first-order
    terms ``terms [m, K]``: each part gets its term, and the step's remainder (what the first
    order misses, O(1/m³) a step) is shared in proportion to |term| (equally where every
    term is 0). Rows sum to their change exactly, whatever the terms.

    Not the proportional rule (change · term / Σ terms): where a step's terms nearly cancel,
    its weights grow without bound and turn rounding into large entries (on a tiny Llama the
    64-step diagonal moved by 0.009 that way, ten times the 16-step error).
    """
    remainder = changes - terms.sum(1)
    size = np.abs(terms)
    total = size.sum(1, keepdims=True)
    share = np.where(total > 0, size / np.where(total > 0, total, 1.0), 1.0 / terms.shape[1])
    return terms + remainder[:, None] * share


def _staircase_rows(k: int, reverse: bool) -> torch.Tensor:
    """``[k+1, k]`` the gates at a staircase's corners (see :attr:`GateLedger.corners`)."""
    j = torch.arange(k + 1)[:, None]
    gate = torch.arange(k)[None, :]
    return (gate >= j if reverse else gate < j).double()


def _component_frame(
    game: Game, gate_steps: np.ndarray, terms: np.ndarray, labels: list[str]
) -> pd.DataFrame:
    """The diagonal's entries split over each gate's blocks and components: each step's amount
    of a gate (``gate_steps [m, k]``) split by :func:`split_steps` over the first-order terms
    of its components (``terms [m, n, C]``, per unit of gate)."""
    import pandas as pd

    names = component_names(game.adapter)
    gate_of = game.gating.gate_of.numpy()
    m = terms.shape[0]
    rows = []
    for j, label in enumerate(labels):
        blocks = np.flatnonzero(gate_of == j)
        inside = terms[:, blocks, :].reshape(m, -1) / m
        entry = split_steps(gate_steps[:, j], inside).sum(0).reshape(len(blocks), len(names))
        for b, block in enumerate(blocks):
            for c, name in enumerate(names):
                rows.append((label, int(block) + 1, name, float(entry[b, c])))
    return pd.DataFrame(rows, columns=["gate", "block", "component", "entry"])


def _readable(readout: Any, run: Run, target: int, boundaries: list[float]) -> np.ndarray:
    """IG-Lens's ledger at t under the logit lens: first differences of f at the boundaries'
    states in the clean run (h_L at depth L, h_L.attn at depth L − ½)."""
    states = [
        run.states[int(b)] if float(b).is_integer() else cast(torch.Tensor, run.mids)[int(b)]
        for b in boundaries
    ]
    with torch.no_grad():
        f = readout.probability(torch.stack(states), target).double().cpu().numpy()
    return np.diff(f)


def _resolve_inputs(
    ig: IGLens, prompt: PromptSpec, corrupt: PromptSpec | None, **preparation: Any
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """The clean sequence (its prompt, then its answer), the counterfactual one and the clean
    prompt's length. The counterfactual is its prompt formed as the clean one's (the same
    template), then the clean answer with the prompts' differing tokens swapped wherever they
    recur in it (:func:`swap_subject`)."""
    clean, prompt_length = ig.prepare(AttributionRequest(prompt, **preparation))
    if corrupt is None:
        return clean, None, prompt_length
    chat = preparation.get("chat", False)
    other, _ = ig.prepare(AttributionRequest(corrupt, chat=chat))
    answer = swap_subject(clean[prompt_length:], clean[:prompt_length], other)
    return clean, torch.cat([other, answer]), prompt_length


def swap_subject(answer: torch.Tensor, clean: torch.Tensor, corrupt: torch.Tensor) -> torch.Tensor:
    """``answer`` with the clean prompt's subject replaced by the counterfactual's wherever it
    recurs: the subject is the span from the prompts' first to their last differing token
    (prompts of one length; otherwise, or without a difference, the answer as it is).

    "The capital of Vietnam is Hoi An." after "What is the capital of Vietnam?" becomes "The
    capital of Italy is Hoi An." after "What is the capital of Italy?": the counterfactual run
    reads its own subject in the answer's opening words too, as it would have written them.
    """
    if clean.numel() != corrupt.numel():
        return answer
    differ = torch.nonzero(clean != corrupt).flatten()
    if not differ.numel():
        return answer
    a, b = int(differ[0]), int(differ[-1]) + 1
    old, new = clean[a:b], corrupt[a:b]
    out, i, size = answer.clone(), 0, b - a
    while i + size <= out.numel():
        if torch.equal(out[i : i + size], old):
            out[i : i + size] = new
            i += size
        else:
            i += 1
    return out


def _describe(tokenizer: Any, ids: torch.Tensor, start: int, count: int = 4) -> str:
    pieces = token_texts(tokenizer, ids[start : start + count].numpy())
    shown = [pieces.get(int(i), "") for i in ids[start : start + count]]
    return ", ".join(repr(p) for p in shown) + (" …" if ids.numel() > start + count else "")


def _check_counterfactual(
    tokenizer: Any, clean: torch.Tensor, corrupt: torch.Tensor, position: int
) -> None:
    """Refuse a counterfactual the game cannot pair with the clean sequence, saying why."""
    shorter = min(clean.numel(), corrupt.numel())
    differ = torch.nonzero(clean[:shorter] != corrupt[:shorter]).flatten()
    first = int(differ[0]) if differ.numel() else shorter
    if clean.numel() != corrupt.numel():
        raise InvalidRequestError(
            f"the clean sequence has {clean.numel()} tokens and the counterfactual "
            f"{corrupt.numel()}: the game pairs their blocks' writes position by position, so "
            f"they need the same length. They differ from position {first}: clean "
            f"{_describe(tokenizer, clean, first)} / counterfactual "
            f"{_describe(tokenizer, corrupt, first)}. Pick a counterfactual whose subject is "
            f"as many tokens long"
        )
    if not differ.numel():
        raise InvalidRequestError(
            "the counterfactual is the clean sequence itself: the game's total would be 0; "
            "change its subject"
        )
    if int(clean[position]) != int(corrupt[position]):
        raise InvalidRequestError(
            f"the clean and counterfactual sequences differ at the gated position {position} "
            f"itself ({_describe(tokenizer, clean, position, 1)} / "
            f"{_describe(tokenizer, corrupt, position, 1)}): the game gates the blocks' writes "
            f"there, not the token, so that token must be the same in both; gate a later "
            f"position (the prompt's last, by default)"
        )


def _check_choice(value: object, choices: Sequence[str], what: str) -> None:
    if not isinstance(value, str) or value not in choices:
        raise InvalidRequestError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def _check_steps(steps: object) -> int:
    if (
        isinstance(steps, bool)
        or not isinstance(steps, (int, np.integer))
        or not 1 <= steps <= MAX_GATE_STEPS
    ):
        raise InvalidRequestError(
            f"steps must be an integer from 1 to {MAX_GATE_STEPS} (the diagonal's steps), "
            f"got {steps!r}"
        )
    return int(steps)


@dataclass(frozen=True)
class _Question:
    """One position's game, its inputs checked: the sequences, the gates, the options."""

    clean: torch.Tensor
    corrupt: torch.Tensor | None
    prompt_length: int
    position: int
    paths: tuple[GatePath, ...]
    baseline: GateBaseline
    steps: int
    boundaries: list[float]
    components: bool


def _position(position: object, T: int) -> int:
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
        raise InvalidRequestError(
            f"position must be an integer (0-based, or negative from the end), got {position!r}"
        )
    t = int(position) + (T if int(position) < 0 else 0)
    if not 0 <= t < T:
        raise InvalidRequestError(
            f"position {position} is outside the sequence of {T} tokens; use 0 … {T - 1} or "
            f"-1 … -{T}"
        )
    return t


def _baseline(baseline: object, corrupt: object) -> GateBaseline:
    if baseline is None:
        return "removal" if corrupt is None else "counterfactual"
    _check_choice(baseline, GATE_BASELINES, "baseline")
    if baseline == "counterfactual" and corrupt is None:
        raise InvalidRequestError(
            "baseline='counterfactual' needs a counterfactual prompt (corrupt=...), e.g. the "
            "same question about another subject; or use baseline='removal'"
        )
    if baseline == "removal" and corrupt is not None:
        raise InvalidRequestError(
            "baseline='removal' closes every gate onto a write of 0 and reads no "
            "counterfactual: drop corrupt=..., or use baseline='counterfactual'"
        )
    return cast(GateBaseline, baseline)


def _question(
    ig: IGLens, prompt: PromptSpec, corrupt: PromptSpec | None, options: dict[str, Any]
) -> _Question:
    """Every argument of :func:`ledger_for` checked, the sequences prepared."""
    path = options["path"]
    _check_choice(path, (*GATE_PATHS, "all"), "path")
    baseline = _baseline(options["baseline"], corrupt)
    steps = _check_steps(options["steps"])
    clean, other, prompt_length = _resolve_inputs(
        ig,
        prompt,
        corrupt,
        chat=options["chat"],
        answer=options["answer"],
        max_new_tokens=options["max_new_tokens"],
    )
    t = _position(options["position"], clean.numel())
    if other is not None:
        _check_counterfactual(ig.tokenizer, clean, other, t)
    bounds = parse_boundaries(options["boundaries"], ig.adapter.n_blocks)
    components = bool(options["components"])
    if components and is_sublayer(bounds):
        raise InvalidRequestError(
            "components=True splits whole blocks' gates over their heads and MLP; use block "
            "boundaries ('all', 'every:K' or a list) with it, not 'sublayer'"
        )
    if components and ig.adapter.post_norm:
        raise UnsupportedModelError(
            f"components=True is not supported for post-norm {ig.adapter.family.name}: a "
            f"norm follows each residual sum, so the attention's and MLP's outputs are not "
            f"terms of the stream"
        )
    paths = GATE_PATHS if path == "all" else (cast(GatePath, path),)
    return _Question(clean, other, prompt_length, t, paths, baseline, steps, bounds, components)


@dataclass
class _Played:
    """What the paths' runs gave."""

    start: float
    end: float
    corners: dict[str, np.ndarray]
    entries: dict[str, np.ndarray]
    diagonal_values: np.ndarray | None = None
    riemann: np.ndarray | None = None
    components: pd.DataFrame | None = None


def _rows(q: _Question, k: int) -> tuple[torch.Tensor, dict[GatePath, slice]]:
    """``[R, k]`` the gate values of every no-gradient run the paths need (both ends first,
    then each path's interior points) and where each path's interior lies."""
    parts = [torch.stack([torch.zeros(k), torch.ones(k)]).double()]
    where, offset = {}, 2
    for path in q.paths:
        if path == "diagonal":
            inner = torch.arange(1, q.steps, dtype=torch.float64)[:, None].expand(-1, k) / q.steps
        else:
            inner = _staircase_rows(k, path == "reverse")[1:-1]
        parts.append(inner)
        where[path] = slice(offset, offset + len(inner))
        offset += len(inner)
    return torch.cat(parts), where


def _play(q: _Question, game: Game, component_baseline: torch.Tensor | None) -> _Played:
    """Run every path's points and split the ledgers."""
    k = game.gating.n_gates
    rows, where = _rows(q, k)
    game.total = len(rows) + (GRADIENT_ROW_COST * q.steps if "diagonal" in q.paths else 0)
    values = values_at(game, rows)
    start, end = float(values[0]), float(values[1])
    played = _Played(start, end, {}, {})
    for path in q.paths:
        inner = values[where[path]]
        if path != "diagonal":
            ends = (start, end) if path == "forward" else (end, start)
            corners = np.concatenate([[ends[0]], inner, [ends[1]]])
            played.corners[path] = corners
            played.entries[path] = np.diff(corners) * (1 if path == "forward" else -1)
            continue
        m = q.steps
        played.diagonal_values = np.concatenate([[start], inner, [end]])
        midpoints = (torch.arange(m, dtype=torch.float64)[:, None] + 0.5).expand(m, k) / m
        grads = gradients_at(game, midpoints, component_baseline)
        by_step = split_steps(np.diff(played.diagonal_values), grads.gates / m)
        played.entries[path] = by_step.sum(0)
        played.riemann = grads.gates.mean(0)
        if grads.components is not None:
            labels = segment_labels(q.boundaries)
            played.components = _component_frame(game, by_step, grads.components, labels)
    played.entries = {p: played.entries[p] for p in GATE_PATHS if p in played.entries}
    return played


def ledger_for(
    ig: IGLens,
    prompt: PromptSpec,
    corrupt: PromptSpec | None = None,
    *,
    answer: Any = None,
    chat: Any = False,
    max_new_tokens: int = 0,
    position: int = -1,
    target: int | str = "predicted",
    path: GatePath | Literal["all"] = "all",
    baseline: GateBaseline | None = None,
    steps: int = 16,
    boundaries: BoundarySpec = None,
    components: bool = False,
    memory_budget: int | None = None,
) -> GateLedger:
    """:func:`gate_ledger` on an :class:`~iglens_viz.core.lens.IGLens` (its model, readout and
    prompt preparation); see there for the arguments. Inside a
    :func:`~iglens_viz.core.estimators.progress_hook`, progress is reported after every
    chunk of runs (a report that raises stops the game there)."""
    options = dict(locals())
    q = _question(ig, prompt, corrupt, options)
    adapter, readout, t = ig.adapter, ig.readout, q.position
    gating = gating_for(adapter, q.boundaries)
    run = plain_run(
        ig.model, adapter, gating, q.clean[: t + 1], keep_cache=True, components=q.components
    )
    y = (
        int(torch.argmax(run.logits))
        if target == "predicted"
        else single_token_id(target, ig.tokenizer, readout.vocab_size, "target")
    )
    other: Run | None = None
    if q.corrupt is not None:
        other = plain_run(
            ig.model, adapter, gating, q.corrupt[: t + 1], keep_cache=False, components=q.components
        )
        start_reference = own_probability(other.logits, y)
    else:
        with torch.no_grad():
            start_reference = float(readout.probability(run.states[0], torch.tensor(y)).double())
    closed = torch.zeros_like(run.writes) if other is None else other.writes
    token = int(q.clean[t])
    budget = ig.memory_budget if memory_budget is None else int(memory_budget)
    game = Game(ig.model, adapter, readout, gating, token, y, closed, run.cache, t, budget)
    game.report = progress_reporter()
    component_baseline = baseline_components(adapter, other, run) if q.components else None
    played = _play(q, game, component_baseline)
    ids = [q.clean.numpy()] + ([] if q.corrupt is None else [q.corrupt.numpy()])
    return GateLedger(
        entries=played.entries,
        corners=played.corners,
        diagonal_values=played.diagonal_values,
        riemann=played.riemann,
        readable=_readable(readout, run, y, q.boundaries),
        start=played.start,
        end=played.end,
        start_reference=start_reference,
        end_reference=own_probability(run.logits, y),
        labels=segment_labels(q.boundaries),
        boundaries=q.boundaries,
        position=t,
        target_id=y,
        baseline=q.baseline,
        steps=q.steps,
        n_blocks=adapter.n_blocks,
        clean_ids=ids[0],
        corrupt_ids=ids[1] if len(ids) > 1 else None,
        prompt_length=q.prompt_length,
        components=played.components,
        token_text=token_texts(ig.tokenizer, *ids, np.asarray([y])),
    )


def gate_ledger(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    prompt: PromptSpec,
    corrupt: PromptSpec | None = None,
    *,
    dtype: torch.dtype | str | None = None,
    **options: Any,
) -> GateLedger:
    """The block-gate game at one position: exact ledgers of one total along three paths
    (see the module's text, :mod:`iglens_viz.causal.gates`).

    Parameters
    ----------
    model, tokenizer:
        A decoder-only ``*ForCausalLM`` of a supported family (or a wrapper
        :class:`~iglens_viz.IGLens` accepts) and its tokenizer.
    prompt:
        The clean prompt: text (wrapped in the chat template with ``chat=True``) or ids.
    corrupt:
        The counterfactual prompt (``baseline="counterfactual"``, the default when given):
        the same question about another subject, formed as the clean prompt is (the same
        template around it) and followed by the clean ``answer``. The two sequences must have
        the same token length and the same token at ``position``; the error says where they
        differ otherwise.
    answer:
        Text or ids that follow the clean prompt (e.g. its generated answer), so a position
        inside the answer can be gated. The counterfactual prompt is followed by the same
        answer with the prompts' subject swapped wherever it recurs (the span from their first
        to their last differing token; see :func:`swap_subject`): "What is the capital of
        Italy?" is followed by "The capital of Italy is Hoi An." where the clean answer reads
        "The capital of Vietnam is Hoi An.". :attr:`GateLedger.corrupt_ids` shows it.
    chat:
        ``True`` wraps text prompts in the tokenizer's chat template, ``"auto"`` when it has
        one, ``False`` (default) never.
    max_new_tokens:
        Without ``answer``: the clean prompt's greedy answer of at most this many tokens
        follows it (as :func:`~iglens_viz.attribute`'s).
    position:
        The 0-based position t whose blocks' writes are gated (negative: from the end; default
        -1, the last token, whose next token is the answer).
    target:
        ``"predicted"`` (the clean run's top-1 next token at t), a token id or a single-token
        string.
    path:
        ``"forward"``, ``"reverse"``, ``"diagonal"`` or ``"all"`` (default: the three).
    baseline:
        ``"counterfactual"`` (closed gates write the counterfactual's writes at t; total
        p(clean) − p(counterfactual)) or ``"removal"`` (they write nothing; total Δp, IG-Lens's).
    steps:
        m, the diagonal's steps (1 … 1000; each costs two single-token runs; the staircases
        cost k − 1 runs each).
    boundaries:
        As :func:`~iglens_viz.attribute`'s: one gate per block (default), per segment
        (``"every:5"``, ``"0,10,20,30"``) or per attention and MLP write (``"sublayer"``).
    components:
        Split each diagonal entry over its blocks' heads and MLP (:attr:`GateLedger.components`).
    memory_budget:
        Bytes for one pass's copies of the prompt's key/value cache (rows are chunked to fit;
        default: the :class:`~iglens_viz.IGLens`'s ``memory_budget``).
    dtype:
        The readout's precision (default: float64 for a float64 model, else float32).

    Returns
    -------
    GateLedger
        The game needs no lens: its value is the model's own output probability (under a
        fitted lens IG-Lens is not one of its paths).
    """
    if dtype is None:
        inner = unwrap_model(model)[0]
        wide = next(inner.parameters()).dtype == torch.float64
        dtype = torch.float64 if wide else torch.float32
    return ledger_for(IGLens(model, tokenizer, dtype=dtype), prompt, corrupt, **options)
