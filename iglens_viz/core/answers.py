"""Whole answers: exact ledgers of a multi-token answer's probability across the blocks.

An answer a = (y_1 … y_n) follows the prompt, teacher-forced: position t_i predicts y_i. At
every boundary depth L the lens reads each answer position, and the answer's *joint lens
probability* is the product F_L = Π_i f_i(h̃_L^(i)) of the per-token lens probabilities
(the answer's probability as the lens reads it at depth L). Both F_L and log F_L are
pointwise functions of the states at one depth, so their segment differences telescope:

* the **log-probability ledger** sums to log p(a) − log F_0 across the segments, and each
  segment's entry splits exactly over the answer's tokens (Σ_i of the tokens' own log
  differences);
* the **probability ledger** sums to p(a) − F_0.

Two answers after the same prompt give a *differential* ledger, their difference segment by
segment (:class:`AnswerComparison`): it sums to log p(a) − log p(b) minus the same gap read
at the embeddings, exactly.

Under ``estimator="riemann"`` the ledgers are midpoint-rule integrals along each segment's
straight path instead of first differences: ∇ log f_i at the midpoints for the log ledger,
and dF = F Σ_i d log f_i for the joint probability (so they carry the Riemann sum's
discretisation error, as the per-token contributions do).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ..errors import InvalidRequestError
from .boundaries import block_of_depth
from .components import component_segments
from .estimators import midpoints, path_along, path_or_ends, segment_gradients
from .prompting import eos_ids
from .question import Question
from .readout import target_probability
from .serial import json_ready
from .split import question_shares, split_names
from .stats import argmax_rows
from .targets import token_texts

if TYPE_CHECKING:
    from .lens import IGLens
    from .readout import Readout
    from .request import AttributionRequest
    from .result import AttributionResult
    from .trace import Trace

__all__ = ["AnswerComparison", "AnswerLedger", "answer_ledger"]


@dataclass(frozen=True)
class AnswerLedger:
    """The ledgers of one whole answer after the prompt (n tokens, k segments).

    Built by :class:`~iglens_viz.IGLens` for ``answer=`` (or the generated answer) as
    ``result.answer``, and for ``versus=`` as ``result.versus``.
    """

    text: str
    """The answer as text (untrusted: escape before display)."""
    ids: np.ndarray
    """``(n,)`` the answer's token ids."""
    tokens: list[str]
    """``n`` the answer's tokens as text."""
    positions: np.ndarray
    """``(n,)`` the position that predicts each answer token (its sequence's own positions:
    for ``result.versus``, those of the second answer's sequence)."""
    boundaries: list[float]
    """``k+1`` boundary depths, as the result's."""
    token_logprobs: np.ndarray
    """``(n, k+1)`` log f_i at every boundary: each token's lens log-probability."""
    token_probs: np.ndarray
    """``(n, k+1)`` f_i at every boundary, as the per-token ledgers read it (so a one-token
    answer's probability ledger is the per-token result's, to the bit)."""
    logprob_split: np.ndarray
    """``(k, n)`` each segment's log-probability contribution split over the answer's
    tokens; row j sums to ``logprob_contributions[j]``."""
    prob_contributions: np.ndarray
    """``(k,)`` each segment's contribution to the joint probability; sums to
    ``prob − lens_probs[0]``."""
    estimator: str = "prediction_aware"
    """How the ledgers were computed (``prediction_aware``: first differences, exact)."""
    component_shares: np.ndarray | None = None
    """``(n_blocks, C)`` each (block, component)'s share of its segment's log-probability
    contribution (``components=True``), components as ``component_names``."""
    component_names: list[str] | None = None
    """``C`` component names, as :attr:`AttributionResult.component_names`."""

    @property
    def lens_logprobs(self) -> np.ndarray:
        """``(k+1,)`` log F_L, the log of the joint lens probability at every boundary."""
        return self.token_logprobs.sum(axis=0)

    @property
    def lens_probs(self) -> np.ndarray:
        """``(k+1,)`` F_L = Π_i f_i: the answer's probability as the lens reads it at every
        boundary (the last one is the model's own p(answer))."""
        return self.token_probs.prod(axis=0)

    @property
    def logprob(self) -> float:
        """log p(answer) at the output, teacher-forced: Σ_i log p(y_i | prompt, y_<i)."""
        return float(self.lens_logprobs[-1])

    @property
    def prob(self) -> float:
        """p(answer) at the output."""
        return float(self.lens_probs[-1])

    @property
    def logprob_contributions(self) -> np.ndarray:
        """``(k,)`` each segment's contribution to log p(answer); sums to
        ``logprob − lens_logprobs[0]``."""
        return self.logprob_split.sum(axis=1)

    @property
    def prob_underflow(self) -> bool:
        """Whether the probability ledger is zero at float precision: F_L is below the smallest
        normal float64 (about 2.2e-308, log ≈ −708) at every boundary, as for an answer of a
        few hundred tokens, so every entry is 0 (or subnormal rounding) and names no block.
        The log-probability ledger (:attr:`logprob_contributions`) still holds the answer."""
        return bool(np.all(self.lens_probs < np.finfo(np.float64).tiny))

    @property
    def onset(self) -> int:
        """The (last) block of the segment with the largest contribution to the joint
        probability: the per-token onset rule applied to the whole answer (-1: none, and
        when the probability ledger is zero at float precision: :attr:`prob_underflow`)."""
        if self.prob_underflow:
            return -1
        return _onset_block(self.prob_contributions, self.boundaries)

    @property
    def logprob_onset(self) -> int:
        """The same rule on the log-probability ledger."""
        return _onset_block(self.logprob_contributions, self.boundaries)

    @property
    def completeness_error(self) -> float:
        """|Σ prob_contributions − (p(answer) − F_0)| (0 up to float rounding)."""
        p = self.lens_probs
        return float(abs(self.prob_contributions.sum() - (p[-1] - p[0])))

    @property
    def logprob_completeness_error(self) -> float:
        """|Σ logprob_contributions − (log p(answer) − log F_0)|."""
        lp = self.lens_logprobs
        return float(abs(self.logprob_contributions.sum() - (lp[-1] - lp[0])))

    def to_dict(self) -> dict[str, Any]:
        """Every field and derived figure as JSON-ready values (NaN becomes None)."""
        out: dict[str, Any] = {f.name: json_ready(getattr(self, f.name)) for f in fields(self)}
        for name in (
            "lens_logprobs",
            "lens_probs",
            "logprob",
            "prob",
            "logprob_contributions",
            "prob_underflow",
            "onset",
            "logprob_onset",
            "completeness_error",
            "logprob_completeness_error",
        ):
            out[name] = json_ready(getattr(self, name))
        return out


@dataclass(frozen=True)
class AnswerComparison:
    """One answer against another after the same prompt: the differential ledger.

    ``logprob_contributions[j]`` is segment j's contribution to log p(a) − log p(b); they
    sum to ``logprob_gap − start_logprob_gap`` exactly (the gap at the output minus the gap
    the lens reads at the embeddings). In probability space the same for p(a) − p(b).
    """

    answer: AnswerLedger
    """The first answer's ledgers (``result.answer``)."""
    versus: AnswerLedger
    """The second answer's (``result.versus``)."""

    @property
    def logprob_contributions(self) -> np.ndarray:
        """``(k,)`` each segment's contribution to log p(a) − log p(b)."""
        return self.answer.logprob_contributions - self.versus.logprob_contributions

    @property
    def prob_contributions(self) -> np.ndarray:
        """``(k,)`` each segment's contribution to p(a) − p(b)."""
        return self.answer.prob_contributions - self.versus.prob_contributions

    @property
    def lens_logprob_gaps(self) -> np.ndarray:
        """``(k+1,)`` log F_L(a) − log F_L(b) at every boundary."""
        return self.answer.lens_logprobs - self.versus.lens_logprobs

    @property
    def logprob_gap(self) -> float:
        """log p(a) − log p(b) at the output."""
        return self.answer.logprob - self.versus.logprob

    @property
    def start_logprob_gap(self) -> float:
        """log F_0(a) − log F_0(b): the gap as the lens reads the embeddings."""
        return float(self.lens_logprob_gaps[0])

    @property
    def prob_gap(self) -> float:
        """p(a) − p(b) at the output."""
        return self.answer.prob - self.versus.prob

    @property
    def onset(self) -> int:
        """The (last) block of the segment that moves the log gap the most towards the
        output's preference (the largest entry of sign(gap) · ``logprob_contributions``;
        -1: none)."""
        return _onset_block(self.winner_sign * self.logprob_contributions, self.answer.boundaries)

    @property
    def prob_underflow(self) -> bool:
        """Whether both answers' probability ledgers are zero at float precision
        (:attr:`AnswerLedger.prob_underflow`), and so is their difference."""
        return self.answer.prob_underflow and self.versus.prob_underflow

    @property
    def prob_onset(self) -> int:
        """The same rule on the probability ledger (-1 when it is zero at float precision:
        :attr:`prob_underflow`)."""
        if self.prob_underflow:
            return -1
        return _onset_block(self.winner_sign * self.prob_contributions, self.answer.boundaries)

    @property
    def winner_sign(self) -> float:
        """+1 when the output prefers the answer (log p(a) ≥ log p(b)), −1 when ``versus``."""
        return 1.0 if self.logprob_gap >= 0 else -1.0

    @property
    def completeness_error(self) -> float:
        """|Σ logprob_contributions − (logprob_gap − start_logprob_gap)|."""
        return float(
            abs(self.logprob_contributions.sum() - (self.logprob_gap - self.start_logprob_gap))
        )

    def to_dict(self) -> dict[str, Any]:
        """The differential ledger's figures, JSON-ready."""
        return {
            name: json_ready(getattr(self, name))
            for name in (
                "logprob_contributions",
                "prob_contributions",
                "lens_logprob_gaps",
                "logprob_gap",
                "start_logprob_gap",
                "prob_gap",
                "onset",
                "prob_underflow",
                "prob_onset",
                "completeness_error",
            )
        }


def answer_ledger(
    readout: Readout, question: Question, text: str, token_text: dict[int, str], *, budget: int
) -> AnswerLedger:
    """The ledgers of a teacher-forced answer: the question's ids are the answer's tokens and
    its positions the ones that predict them (each token's position minus one), read at its
    boundaries through the trace's lens.

    ``estimator="riemann"`` integrates along each segment with ``steps`` midpoints (see the
    module's docstring); otherwise the ledgers are first differences (exact).
    """
    trace, bounds, ids, positions = (
        question.trace,
        list(question.bounds),
        question.ids,
        question.positions,
    )
    estimator = question.estimator
    rows = trace.rows(bounds)
    where = positions.to(trace.features.device)
    z = trace.features[rows][:, where]  # [k+1, n, d']
    lse = trace.log_normalizer[rows][:, where]
    logits = readout.target_logits(z, ids)
    logp = (logits - lse).double().T  # [n, k+1]
    probs = target_probability(logits, lse).double().T
    if estimator == "riemann":
        log_split, prob = _riemann_ledgers(readout, question, budget)
    else:
        log_split = (logp[:, 1:] - logp[:, :-1]).T
        joint = probs.prod(0)
        prob = joint[1:] - joint[:-1]
    id_list = [int(i) for i in ids]
    return AnswerLedger(
        text=text,
        ids=np.asarray(id_list, dtype=np.int64),
        tokens=[token_text.get(i, f"<{i}>") for i in id_list],
        positions=positions.numpy(),
        boundaries=list(bounds),
        token_logprobs=logp.cpu().numpy(),
        token_probs=probs.cpu().numpy(),
        logprob_split=log_split.cpu().numpy(),
        prob_contributions=prob.cpu().numpy(),
        estimator=estimator,
    )


def _riemann_ledgers(
    readout: Readout, question: Question, budget: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Midpoint-rule log ledger ``[k, n]`` and joint-probability ledger ``[k]``.

    Gradients of log f directly (:meth:`Readout.probability` with ``log``), not ∇f / f:
    far from the answer f underflows in float32 (log F_0 of a three-token answer can be
    −300), where ∇ log f is still finite.
    """
    ids, steps = question.ids, question.steps
    n, k = ids.numel(), question.k
    pairs = question.pairs()
    h_a, y = pairs.h_a, pairs.ids.to(readout.device)
    alphas = midpoints(steps, readout)
    dlog = torch.zeros(n * k, steps, dtype=torch.float64, device=readout.device)
    log_f = torch.zeros_like(dlog)
    for pair, step, grad, direction in segment_gradients(readout, pairs, alphas, budget, log=True):
        dlog[pair, step] = (grad * direction).sum(-1).double() / steps
        with torch.no_grad():
            points = h_a[pair] + alphas[step][:, None] * direction
            log_f[pair, step] = readout.probability(points, y[pair], log=True).double()
    dlog, log_f = dlog.reshape(n, k, steps), log_f.reshape(n, k, steps)
    joint = log_f.sum(0).exp()  # F at each midpoint of each segment [k, m]
    return dlog.sum(-1).T, (joint * dlog.sum(0)).sum(-1)


def _onset_block(contributions: np.ndarray, bounds: list[float]) -> int:
    segment = int(argmax_rows(np.asarray(contributions)[None])[0])  # the onset rule
    return -1 if segment < 0 else block_of_depth(bounds[segment + 1])


# --- whole answers of an attribution ---------------------------------------------------------


def with_answers(
    engine: IGLens,
    result: AttributionResult,
    trace: Trace,
    bounds: list[float],
    prompt_length: int,
) -> AttributionResult:
    """``result`` with the whole answer's ledgers (``answer=`` or the generated answer)
    and those of ``versus=``, continuing the prompt from the first pass's key/value cache."""
    request = result.request
    ids = trace.input_ids
    end = ids.numel()
    if request.answer is None:  # the generated answer, up to its first end token
        eos = eos_ids(engine.tokenizer)
        ends = [t for t in range(prompt_length, end) if int(ids[t]) in eos]
        end = ends[0] if ends else end
    if end <= prompt_length:
        if request.versus is not None:
            raise InvalidRequestError(
                "versus= needs a first answer, and the model generated none (it ended at "
                "once): pass answer="
            )
        return result
    answer = _ledger(engine, request, trace, bounds, (prompt_length, end), result.token_text)
    versus = None
    if request.versus is not None:
        pair = engine.with_answer(ids[:prompt_length], request.versus, "versus answer")
        if torch.equal(pair[prompt_length:], ids[prompt_length:end]):
            raise InvalidRequestError(
                "versus tokenises to the answer itself: the comparison would be 0 in "
                "every block; pass a different answer"
            )
        other = engine.continued(trace, prompt_length, pair[prompt_length:])
        text = token_texts(engine.tokenizer, pair.numpy())
        result.token_text.update(text)
        versus = _ledger(engine, request, other, bounds, (prompt_length, pair.numel()), text)
    return dataclasses.replace(result, answer=answer, versus=versus)


def _ledger(
    engine: IGLens,
    request: AttributionRequest,
    trace: Trace,
    bounds: list[float],
    span: tuple[int, int],
    token_text: dict[int, str],
) -> AnswerLedger:
    """The ledgers of the answer ``trace.input_ids[start:end]`` (``span``), read at
    ``bounds``; with ``request.components``, their component split too."""
    start, end = span
    piece = trace.input_ids[start:end]
    text = (
        cast(str, engine.tokenizer.decode(piece.tolist(), clean_up_tokenization_spaces=False))
        if engine.tokenizer is not None
        else " ".join(f"<{int(i)}>" for i in piece)
    )
    question = Question(
        trace,
        bounds,
        torch.arange(start - 1, end - 1),
        piece,
        None,
        request.estimator,
        request.steps,
    )
    ledger = answer_ledger(engine.readout, question, text, token_text, budget=engine.memory_budget)
    if not request.components:
        return ledger
    return _answer_shares(engine, question, ledger)


def _answer_shares(engine: IGLens, question: Question, ledger: AnswerLedger) -> AnswerLedger:
    """``ledger`` with its component split: each answer token's probability shares of a
    segment, scaled by that segment's Δ log f / Δ f for the token, summed over the
    tokens (so every segment's shares add up to its log-probability contribution)."""
    trace, bounds = question.trace, list(question.bounds)
    f = torch.as_tensor(ledger.token_probs, device=engine.readout.device)
    path = path_along(engine.readout, question.pairs(), f, question.steps, engine.memory_budget)
    shares = question_shares(engine, question, path_or_ends(path, f))
    shares_np = np.nan_to_num(shares.detach().cpu().double().numpy())  # [n, blocks, C]
    names = split_names(engine, trace.lens)
    segment_of = component_segments(bounds, names, engine.n_blocks)  # [blocks, C], -1: none
    valid, k = segment_of >= 0, len(bounds) - 1
    in_segment = valid[..., None] & (segment_of[..., None] == np.arange(k))  # [blocks, C, k]
    delta_f = np.einsum("nbc,bck->nk", shares_np, in_segment)  # each token's Δf per segment
    f_end = ledger.token_probs[:, 1:]
    # Δ log f / Δ f; where Δf is below f's rounding, its limit 1 / f
    flat = np.abs(delta_f) <= 1e-12 * f_end
    ratio = np.divide(
        ledger.logprob_split.T, delta_f, out=1.0 / np.maximum(f_end, 1e-300), where=~flat
    )
    scaled = shares_np * ratio[:, np.where(valid, segment_of, 0)]  # [n, blocks, C]
    combined = np.where(valid, scaled.sum(axis=0), np.nan)
    return dataclasses.replace(ledger, component_shares=combined, component_names=names)
