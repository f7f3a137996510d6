"""IG-Lens: exact per-layer decomposition of a target probability, with a state cache.

``IGLens(model, tokenizer).attribute(text)`` runs the model once, reads out every
(layer, position) row once, and assembles the attribution. Asking again about the same text
with another target, contrast, boundary set or estimator reuses the cached trace and costs
readouts only.

Every call is an :class:`~iglens_viz.core.request.AttributionRequest`: ``attribute`` builds
one from its keyword arguments and :meth:`IGLens.run` runs it; the result keeps it.

Lenses: a request's ``lens`` sets the coordinates every state is read in (the path points
h̃_L = T_L(h_L), see :mod:`iglens_viz.core.coordinates`). The cache holds one trace per
(prompt, lens): the forward pass is shared by every lens's trace of a prompt, the readout map
is computed once per lens (the transform, one d × d matmul per depth, before it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from typing_extensions import Unpack

from ..adapters import adapter_for
from ..errors import InvalidRequestError, ModelLoadError, ReadoutMismatchError  # noqa: F401
from .answers import with_answers
from .boundaries import block_of_depth, is_sublayer
from .components import component_names
from .coordinates import LOGIT, Lens
from .estimators import path_along, path_or_ends, riemann_totals
from .extensions import provider
from .inputs import check_context, context_length, to_input_ids
from .memory import budget_with_floor
from .model_mode import require_materialized
from .prompting import chat_prompt_ids, chat_template_positions, generate_greedy, wants_chat
from .question import Question
from .readout import Readout
from .request import AnswerSpec, AttributeOptions, AttributionRequest, LensSpec, PromptSpec
from .result import AttributionResult, display_name, onset_segments
from .split import (
    component_split,
    interior_path,
    question_shares,
    split_names,
    with_component_split,
)
from .targets import Targets, predicted_ids, request_targets, token_texts
from .trace import DEFAULT_MEMORY_BUDGET, Trace
from .traces import LRU, TraceCache
from .wrappers import unwrap_model

if TYPE_CHECKING:
    # Annotations only. The widget's own class (iglens_viz.widget, a floor above the core)
    # is named by its base, anywidget's AnyWidget: the import-floor test reads every import
    # of the source, these too.
    from anywidget import AnyWidget
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class _Readings:
    """What the readout gives for every position of a request."""

    f: torch.Tensor  # [T, k+1] f at the boundaries (float64)
    contributions: torch.Tensor  # [T, k]
    path: torch.Tensor | None  # [T, k, m+1] f inside the segments (m > 1)
    shares: torch.Tensor | None  # [T, n, C] the component split
    logprobs: torch.Tensor | None  # [T, k+1] log f (no contrast)


class IGLens:
    """The IG-Lens engine over one model, caching the forward pass of recently seen inputs.

    Examples call an instance ``engine``: a *lens* is a
    :class:`~iglens_viz.core.coordinates.Lens`, the coordinates a request reads states in.

    Parameters
    ----------
    model:
        A decoder-only ``*ForCausalLM`` of a supported family (see
        :func:`iglens_viz.adapters.supported_families`). It may live on any device, in any
        float dtype, or be dispatched/offloaded by accelerate.
    tokenizer:
        Its tokenizer (needed for text prompts, string targets and token text).
    dtype:
        Readout precision, ``torch.float32`` (default) or ``torch.float64`` (or the names
        ``"float32"``, ``"float64"``). States of bf16/fp16 models are upcast before the
        readout; a float16/bfloat16 readout is refused (it would be too coarse for the
        vocabulary's logsumexp and the contributions).
    top_k:
        Number of lens tokens kept at every (layer, position).
    memory_budget:
        Bytes allowed for one block of ``[rows × vocabulary columns]`` logits, their
        temporaries and (for bf16/fp16 models) the head block upcast for them. A budget
        below one row's readout tile (:func:`min_memory_budget`, e.g. ``256`` meant as
        256 MB) is raised to it, with a warning.
    cache_size:
        How many input sequences to keep traces (and generated answers) for.
    name:
        The model's name in every view (table, widget, page, figures); default: the short
        form of its config's ``name_or_path`` (a local folder's last part), see
        :func:`~iglens_viz.core.result.display_name`.
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        dtype: torch.dtype | str = torch.float32,
        top_k: int = 5,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        cache_size: int = 4,
        name: str | None = None,
    ) -> None:
        for field, value, least in (
            ("top_k", top_k, 0),
            ("memory_budget", memory_budget, 1),
            ("cache_size", cache_size, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
                raise InvalidRequestError(f"{field} must be an integer >= {least}, got {value!r}")
        # A TransformerLens / nnsight / nnterp wrapper: the HF model (and tokenizer) inside.
        model, held_tokenizer, self.wrapper = unwrap_model(model)
        tokenizer = tokenizer if tokenizer is not None else held_tokenizer
        self.model = model
        self.tokenizer = tokenizer
        self.name = display_name(model, name)  # results carry it as model_name
        self.adapter = adapter_for(model)
        require_materialized(model)
        self.readout = Readout(self.adapter, dtype)
        self.trace_cache = TraceCache(
            model,
            self.adapter,
            self.readout,
            top_k=int(top_k),
            memory_budget=budget_with_floor(int(memory_budget), self.readout, model),
            size=int(cache_size),
        )
        """The forward passes run so far, one trace per (prompt, lens)."""
        self.answer_cache: LRU[tuple[tuple[int, ...], int], torch.Tensor] = LRU(int(cache_size))
        """Generated answers by (prompt ids, max_new_tokens), bounded like the traces."""
        # Lenses named by a kind or a path, resolved once (so their traces are found again).
        self._lenses: dict[str, Lens] = {}

    @property
    def top_k(self) -> int:
        """Lens tokens kept at every (layer, position)."""
        return self.trace_cache.top_k

    @top_k.setter
    def top_k(self, value: int) -> None:
        self.trace_cache.top_k = int(value)

    @property
    def memory_budget(self) -> int:
        """Bytes for one block of readout logits and their temporaries (see :class:`IGLens`)."""
        return self.trace_cache.memory_budget

    @memory_budget.setter
    def memory_budget(self, value: int) -> None:
        self.trace_cache.memory_budget = int(value)

    @property
    def cache_size(self) -> int:
        """How many traces (and generated answers) are kept."""
        return self.trace_cache.size

    @cache_size.setter
    def cache_size(self, value: int) -> None:
        self.trace_cache.size = self.answer_cache.size = int(value)

    @property
    def n_blocks(self) -> int:
        """n, the number of decoder blocks."""
        return self.adapter.n_blocks

    @property
    def component_names(self) -> list[str]:
        """The component axis of :meth:`components` under the logit lens (see
        :func:`~iglens_viz.core.components.component_names`; a fitted lens adds
        ``coordinate``: read a result's own ``component_names``)."""
        return component_names(self.adapter)

    @property
    def width(self) -> int:
        """d, the residual width (of the states a lens transforms)."""
        config: Any = self.model.config
        return int(config.hidden_size)

    def resolve_lens(self, spec: LensSpec | None = "logit") -> Lens:
        """The :class:`~iglens_viz.core.coordinates.Lens` a request's ``lens`` names, checked
        against this model (its depth, width and fingerprint).

        A :class:`Lens` is used as it is; ``"logit"`` (or None) is
        :data:`~iglens_viz.core.coordinates.LOGIT`; another kind or a path is resolved once
        through the ``"resolve_lens"`` provider (:mod:`iglens_viz.lenses`: fitted, loaded or
        found in its cache) and remembered, so its traces are found again.

        Raises
        ------
        InvalidRequestError
            The spec names no lens, or the lens was fitted on another model.
        """
        if isinstance(spec, Lens):
            lens = spec
        elif spec is None or spec == LOGIT.kind:
            lens = LOGIT
        else:
            key = os.fspath(spec)
            lens = self._lenses.get(key) or self._resolved(key)
        lens.check(self.model, self.n_blocks, self.width)
        return lens

    def _resolved(self, key: str) -> Lens:
        """The lens named ``key`` (a kind or a path) from the lenses package, remembered."""
        try:
            resolve = provider("resolve_lens")
        except LookupError:
            raise InvalidRequestError(
                f"lens {key!r} needs iglens_viz's lenses (fitting and loading): import "
                f"iglens_viz, or pass a Lens object"
            ) from None
        lens = resolve(key, self.model, self.tokenizer)
        if not isinstance(lens, Lens):  # pragma: no cover - the provider's contract
            raise TypeError(f"resolve_lens({key!r}) gave {type(lens).__name__}, not a Lens")
        self._lenses[key] = lens
        return lens

    def input_ids(self, text_or_ids: PromptSpec) -> torch.Tensor:
        """The validated ``[T]`` token ids of a prompt (string, id list or tensor)."""
        return to_input_ids(text_or_ids, self.tokenizer, self.model.config, self.readout.vocab_size)

    def prepare(self, request: AttributionRequest) -> tuple[torch.Tensor, int]:
        """The ids a request attributes and the prompt's length.

        The prompt is wrapped in the tokenizer's chat template when ``request.chat`` says so
        (``"auto"``: a string prompt and a tokenizer with a template), then followed by the
        model's greedy answer of at most ``request.max_new_tokens`` tokens (cached per
        prompt, like the traces).
        """
        given = request.prompt
        if isinstance(given, str) and wants_chat(request.chat, given, self.tokenizer):
            prompt = self.input_ids(chat_prompt_ids(self.tokenizer, given))
        else:
            prompt = self.input_ids(given)
        if request.answer is not None:
            return self.with_answer(prompt, request.answer, "answer"), prompt.numel()
        if not request.max_new_tokens:
            return prompt, prompt.numel()
        check_context(prompt.numel(), self.model.config, generating=request.max_new_tokens)
        key = (tuple(prompt.tolist()), request.max_new_tokens)
        answer = self.answer_cache.get(key)
        if answer is None:
            eos = getattr(self.tokenizer, "eos_token_id", None)
            answer = generate_greedy(self.model, prompt, request.max_new_tokens, eos)
        self.answer_cache.put(key, answer)
        return self.input_ids(torch.cat([prompt, answer])), prompt.numel()

    def answer_ids(self, answer: AnswerSpec, what: str = "answer") -> torch.Tensor:
        """The ``[n]`` token ids of a whole answer: text tokenised on its own (no special
        tokens), or ids checked against the vocabulary."""
        if isinstance(answer, str):
            if self.tokenizer is None:
                raise InvalidRequestError(
                    f"the {what} {answer!r} is text, which needs a tokenizer; pass its token ids"
                )
            ids = torch.as_tensor(
                self.tokenizer(answer, add_special_tokens=False)["input_ids"], dtype=torch.long
            )
            if not ids.numel():
                raise InvalidRequestError(f"the {what} {answer!r} tokenises to no tokens")
            return ids
        ids = torch.as_tensor(list(answer), dtype=torch.long)
        bad = ids[ids >= self.readout.vocab_size]
        if bad.numel():
            raise InvalidRequestError(
                f"{what} ids out of range [0, {self.readout.vocab_size}): {bad[:5].tolist()}"
            )
        return ids

    def with_answer(self, prompt: torch.Tensor, answer: AnswerSpec, what: str) -> torch.Tensor:
        """``prompt`` followed by the ids of ``answer`` (:meth:`answer_ids`), checked to fit
        the model's context; ``what`` names the answer in errors."""
        ids = self.answer_ids(answer, what)
        limit = context_length(self.model.config)
        if limit is not None and prompt.numel() + ids.numel() > limit:
            raise InvalidRequestError(
                f"the prompt ({prompt.numel()} tokens) and the {what} ({ids.numel()} tokens) "
                f"exceed the model's context of {limit} tokens; shorten one of them"
            )
        return torch.cat([prompt, ids])

    def clear_cache(self) -> None:
        """Forget every cached forward pass and generated answer (frees their memory)."""
        self.trace_cache.clear()
        self.answer_cache.clear()

    def trace(
        self,
        text_or_ids: PromptSpec,
        *,
        sublayers: bool = False,
        components: bool = False,
        lens: LensSpec = "logit",
        keep_cache: bool = False,
    ) -> Trace:
        """Run the model once on a prompt (or return the cached run) and read out every row;
        see :meth:`TraceCache.get <iglens_viz.core.traces.TraceCache.get>`. ``lens`` is any
        form :meth:`resolve_lens` takes."""
        return self.trace_cache.get(
            self.input_ids(text_or_ids),
            self.resolve_lens(lens),
            sublayers=sublayers,
            components=components,
            keep_cache=keep_cache,
        )

    def traces(self, prompts: Iterable[PromptSpec]) -> list[Trace]:
        """:meth:`trace` of several prompts, batched in one padded forward pass and one
        readout map; see :meth:`TraceCache.many <iglens_viz.core.traces.TraceCache.many>`."""
        return self.trace_cache.many([self.input_ids(p) for p in prompts])

    def continued(self, trace: Trace, start: int, ids: torch.Tensor) -> Trace:
        """The trace of ``trace.input_ids[:start]`` followed by ``ids``, running the model on
        ``ids`` only (how ``versus=`` runs its second answer); see
        :meth:`TraceCache.continued <iglens_viz.core.traces.TraceCache.continued>`."""
        return self.trace_cache.continued(trace, start, ids)

    def gate_ledger(
        self, prompt: PromptSpec, corrupt: PromptSpec | None = None, **options: Any
    ) -> Any:
        """The block-gate game at one position of ``prompt`` on this model: exact ledgers of
        one total along the forward staircase, the reverse staircase and the diagonal (a
        :class:`~iglens_viz.causal.gates.GateLedger`); see :func:`iglens_viz.gate_ledger`
        for the arguments. Prompts are prepared as :meth:`attribute` prepares them."""
        return provider("gate_ledger")(self, prompt, corrupt, **options)

    def attribute(
        self, text_or_ids: PromptSpec, **options: Unpack[AttributeOptions]
    ) -> AttributionResult:
        """Attribute each position's target probability across the model's blocks.

        The keywords are :class:`~iglens_viz.core.request.AttributeOptions`, all optional;
        each one's default is the field's of :class:`AttributionRequest`
        (``help(AttributionRequest)`` shows them).

        Parameters
        ----------
        text_or_ids:
            A string, a list of token ids, or a 1-D / ``[1, T]`` tensor.
        target:
            ``"predicted"`` (the model's top-1 next token at each position), ``"next"`` (the
            text's next token; the last position has none), a token id, a single-token
            string, or a sequence of T ids (-1: no target at that position).
        contrast:
            Optional second token in the same forms: attribute p(target) − p(contrast).
        boundaries:
            ``None`` or ``"all"`` (every block), ``"every:K"``, ``"0,10,20,30"`` or a list
            ``[0, …, n]`` (strictly increasing block indices), or ``"sublayer"``: a
            boundary after every attention and every MLP (segments ``"12.attn"``,
            ``"12.mlp"``; sequential blocks only).
        steps:
            Interpolation steps m per segment, 1 … 1000. ``prediction_aware`` totals do
            not depend on m; m > 1 adds ``path_probs`` (the probability along each segment).
        estimator:
            ``"prediction_aware"`` (exact: totals are first differences of f) or
            ``"riemann"`` (midpoint-rule gradients through norm+head; has a discretisation
            error that shrinks with m).
        chat:
            Wrap a string prompt as a user turn in the tokenizer's chat template: ``True``,
            ``False`` (default) or ``"auto"`` (when the tokenizer has a template).
        max_new_tokens:
            Generate the model's greedy answer (up to this many tokens) and attribute prompt
            and answer in one pass; along the answer, the ``"predicted"`` target is exactly
            the generated token. ``result.answer_positions`` says where it is.
        components:
            Also split every segment's contribution over attention heads, MLPs and a
            remainder (``result.components``, a DataFrame; ``result.component_shares``,
            dense). Costs m readout gradients per (position, segment); for a few positions
            use :meth:`components` on a result instead.
        lens:
            The coordinates each state is read in: ``"logit"`` (default: h_L as it is),
            ``"shortcut"``, ``"tuned"``, ``"jacobian"``, the path of a saved lens, or a
            :class:`~iglens_viz.core.coordinates.Lens`. Under a lens the path points are
            h̃_L = T_L(h_L) (T_n the identity), so the contributions still add up to
            f(h_n) − f(h̃_0); a half-block state h_L.attn is read with T_{L−1}; the component
            split gains ``coordinate``, the change of translator along a segment.
            ``result.lens_name`` says which lens.
        answer:
            A whole answer, as text (tokenised on its own; mind the leading space) or ids,
            appended to the prompt (after the chat template's assistant turn when ``chat``
            is on) and teacher-forced. ``result.answer`` holds its ledgers
            (:class:`~iglens_viz.core.answers.AnswerLedger`): log p(answer) split across
            the segments and over its tokens, and p(answer) split across the segments.
            Without it, the answer generated with ``max_new_tokens`` (up to its first
            end-of-sequence token) is the answer. Not together with ``max_new_tokens``.
        versus:
            A second answer after the same prompt, teacher-forced in a pass over its own
            tokens only (the prompt's keys and values come from the first pass's cache:
            :meth:`continued`): ``result.versus`` holds its ledgers and
            ``result.comparison`` the differential ledger of log p(answer) − log p(versus),
            segment by segment.

        Returns
        -------
        An :class:`AttributionResult` whose ``request`` holds these arguments, validated.

        Raises
        ------
        InvalidRequestError
            Any argument is invalid for this model (the message says what would work).
        """
        return self.run(AttributionRequest(text_or_ids, **options))

    def run(self, request: AttributionRequest) -> AttributionResult:
        """Run an :class:`AttributionRequest` (see :meth:`attribute` for its fields).

        A recompute replays a result's request with changes:
        ``engine.run(result.request.replace(target="next"))``.
        """
        if not isinstance(request, AttributionRequest):
            raise InvalidRequestError(
                f"run() takes an AttributionRequest, not "
                f"{type(request).__name__}; use attribute() for a prompt"
            )
        bounds = request.boundary_list(self.n_blocks)
        ids, prompt_length = self.prepare(request)
        trace = self.trace(
            ids,
            sublayers=is_sublayer(bounds),
            components=request.components,
            lens=self.resolve_lens(request.lens),
            keep_cache=request.versus is not None,
        )
        targets = request_targets(
            request,
            trace.input_ids,
            predicted_ids(trace, prompt_length),
            self.tokenizer,
            self.readout,
        )
        positions = torch.arange(len(ids))
        question = Question(
            trace, bounds, positions, targets.y, targets.c, request.estimator, request.steps
        )
        result = self._result(request, question, targets, self._read(question, request))
        result.prompt_length = prompt_length
        result = with_answers(self, result, trace, bounds, prompt_length)
        result.template_positions = self.template_positions(request)
        return result

    def _read(self, question: Question, request: AttributionRequest) -> _Readings:
        """The lens values, contributions, interior path and component split of every
        position (the question's)."""
        trace, bounds, y, c = question.trace, list(question.bounds), question.ids, question.contrast
        f = trace.lens_probs(self.readout, bounds, y, c).T.double()  # [T, k+1]
        logprobs = None if c is not None else trace.lens_logprobs(self.readout, bounds, y).T
        T, k, steps = f.shape[0], f.shape[1] - 1, question.steps
        # Points inside segments are needed only by the Riemann sum and the interior path.
        riemann = question.estimator == "riemann"
        pairs = question.pairs() if riemann or steps > 1 else None
        if pairs is not None and riemann:
            contributions = riemann_totals(self.readout, pairs, steps, self.memory_budget)
            contributions = contributions.reshape(T, k).double()
        else:
            contributions = f[:, 1:] - f[:, :-1]
        path = path_along(self.readout, pairs, f, steps, self.memory_budget)
        shares = None
        if request.components:
            shares = question_shares(self, question, path_or_ends(path, f))
        return _Readings(f, contributions, path, shares, logprobs)

    def template_positions(self, request: AttributionRequest) -> np.ndarray | None:
        """The prompt positions of ``request`` that are its chat template's tokens, not the
        user's text (``(n,)`` int64), or None when the prompt is not wrapped in a template
        (or the template's tokens cannot be told apart); see
        :func:`~iglens_viz.core.prompting.chat_template_positions`."""
        given = request.prompt
        if not (isinstance(given, str) and wants_chat(request.chat, given, self.tokenizer)):
            return None
        positions = chat_template_positions(self.tokenizer, given)
        return None if positions is None else np.asarray(positions, dtype=np.int64)

    def components(
        self,
        result: AttributionResult,
        positions: npt.ArrayLike | None = None,
        *,
        steps: int | None = None,
    ) -> np.ndarray:
        """Split ``result``'s contributions at ``positions`` over heads, MLPs and remainders:
        ``(P, n, C)`` shares (NaN at a position without a target), indexed like
        ``result.component_shares``; ``steps`` (default: the result's) sets m for the split
        alone. See :func:`iglens_viz.core.split.component_split`."""
        return component_split(self, result, positions, steps)

    def with_components(
        self,
        result: AttributionResult,
        positions: npt.ArrayLike | None = None,
        *,
        steps: int | None = None,
    ) -> AttributionResult:
        """A copy of ``result`` whose component split holds :meth:`components` at
        ``positions`` (NaN elsewhere), so ``.components``, ``plot_components`` and the
        exported page show it."""
        return with_component_split(self, result, positions, steps)

    @overload
    def interior_path(
        self,
        result: AttributionResult,
        position: int,
        *,
        steps: int | None = None,
        terms: Literal[False] = False,
    ) -> np.ndarray: ...

    @overload
    def interior_path(
        self,
        result: AttributionResult,
        position: int,
        *,
        steps: int | None = None,
        terms: Literal[True],
    ) -> tuple[np.ndarray, np.ndarray]: ...

    @overload
    def interior_path(
        self,
        result: AttributionResult,
        position: int,
        *,
        steps: int | None = None,
        terms: bool,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]: ...

    def interior_path(
        self,
        result: AttributionResult,
        position: int,
        *,
        steps: int | None = None,
        terms: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """f along every segment of ``result`` at one ``position``: ``(k, m+1)`` float64 at
        α = 0, 1/m, …, 1 (with ``terms=True``, also the ``(k, m)`` midpoint Riemann terms);
        the same values as a recompute at m steps would give there, for milliseconds. See
        :func:`iglens_viz.core.split.interior_path`."""
        return interior_path(self, result, position, steps, terms)

    def widget(self, text_or_ids: PromptSpec, **attribute_kwargs: Any) -> AnyWidget:
        """An interactive notebook widget for ``text_or_ids``; see :func:`iglens_viz.widget.show`.

        Its controls recompute through this engine, reusing the cached forward pass.
        """
        return provider("show")(self, None, text_or_ids, **attribute_kwargs)

    def _result(
        self,
        request: AttributionRequest,
        question: Question,
        targets: Targets,
        readings: _Readings,
    ) -> AttributionResult:
        """The result of ``request``: the readings as numpy arrays (NaN where a position has
        no target), onsets, the lens tokens at the boundaries and every token's text."""
        trace, bounds = question.trace, list(question.bounds)
        target_ids, contrast_ids = targets.ids, targets.contrast

        def numpy(x: torch.Tensor) -> np.ndarray:
            out = x.detach().cpu().numpy().astype(np.float64)
            out[targets.missing] = np.nan
            return out

        f, shares, logprobs = readings.f, readings.shares, readings.logprobs
        path = None if question.steps == 1 else readings.path
        f_np, contrib_np = numpy(f), numpy(readings.contributions)
        segment = onset_segments(contrib_np)
        end_blocks = np.asarray([block_of_depth(b) for b in bounds[1:]])
        onset = np.where(segment >= 0, end_blocks[segment], -1)
        keep = slice(0, self.top_k)
        rows = trace.rows(bounds)
        top_ids = trace.top_ids[rows, :, keep].transpose(0, 1).cpu().numpy()
        top_probs = trace.top_logprobs[rows, :, keep].transpose(0, 1).exp().double().cpu().numpy()
        input_ids = trace.input_ids.numpy()
        token_text = token_texts(self.tokenizer, input_ids, target_ids, contrast_ids, top_ids)
        return AttributionResult(
            tokens=[token_text[int(i)] for i in input_ids],
            input_ids=input_ids,
            target_ids=target_ids,
            target_tokens=[token_text.get(int(i), "") for i in target_ids],
            boundaries=bounds,
            lens_probs=f_np,
            contributions=contrib_np,
            delta_p=f_np[:, -1] - f_np[:, 0],
            onset=onset.astype(np.int64),
            top_ids=top_ids,
            top_probs=top_probs,
            request=request,
            path_probs=None if path is None else numpy(path),
            contrast_ids=contrast_ids,
            n_blocks=self.n_blocks,
            family=self.adapter.family.name,
            model_name=self.name,
            token_text=token_text,
            component_shares=None if shares is None else numpy(shares),
            component_names=None if shares is None else split_names(self, trace.lens),
            lens_name=trace.lens.name,
            lens_logprobs=None if logprobs is None else numpy(logprobs),
        )


def attribute(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    text_or_ids: PromptSpec,
    *,
    top_k: int = 5,
    dtype: torch.dtype | str = torch.float32,
    name: str | None = None,
    **options: Unpack[AttributeOptions],
) -> AttributionResult:
    """One-shot IG-Lens attribution; see :meth:`IGLens.attribute` for the arguments.

    ``top_k`` lens tokens are kept at every boundary; ``dtype`` is the readout precision;
    ``name`` the model's name in the views (``result.model_name``; default: the short form
    of its config's ``name_or_path``).
    For repeated questions about the same prompt (new targets, boundaries, estimators), build
    an :class:`IGLens` once: it caches the forward pass.
    """
    engine = IGLens(model, tokenizer, dtype=dtype, top_k=top_k, name=name)
    return engine.attribute(text_or_ids, **options)
