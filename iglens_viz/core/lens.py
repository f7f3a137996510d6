"""IG-Lens: exact per-layer decomposition of a target probability, with a state cache.

``IGLens(model, tokenizer).attribute(text)`` runs the model once, reads out every
(layer, position) row once, and assembles the attribution. Asking again about the same text
with another target, contrast, boundary set or estimator reuses the cached trace and costs
readouts only.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
import numpy as np
import torch
from torch import nn

from ..adapters import adapter_for
from .capture import capture_states
from .estimators import ESTIMATORS, path_values, riemann_totals
from .boundaries import parse_boundaries
from .inputs import to_input_ids
from .prompting import chat_prompt_ids, generate_greedy, wants_chat
from .readout import Readout
from .result import AttributionResult
from .targets import NO_TARGET, resolve_targets, token_texts
from .trace import DEFAULT_MEMORY_BUDGET, Trace, readout_map

# Probability tolerance of the readout self-check, by model dtype.
_SELF_CHECK_TOL = {torch.float64: 1e-6, torch.float32: 1e-4}
_HALF_PRECISION_TOL = 5e-2


class ReadoutMismatchError(RuntimeError):
    """The readout does not reproduce the model's own output probabilities."""


class IGLens:
    """IG-Lens over one model, caching the forward pass of recently seen inputs.

    Parameters
    ----------
    model:
        A decoder-only ``*ForCausalLM`` of a supported family (see
        :func:`iglens_viz.adapters.supported_families`). It may live on any device, in any
        float dtype, or be dispatched/offloaded by accelerate.
    tokenizer:
        Its tokenizer (needed for text prompts, string targets and token text).
    dtype:
        Readout precision, ``torch.float32`` (default) or ``torch.float64``. States of
        bf16/fp16 models are upcast before the readout.
    top_k:
        Number of lens tokens kept at every (layer, position).
    memory_budget:
        Bytes allowed for one chunk of ``[rows × vocab]`` logits and their temporaries.
    cache_size:
        How many input sequences to keep traces for.
    """

    def __init__(self, model: nn.Module, tokenizer=None, *, dtype: torch.dtype = torch.float32,
                 top_k: int = 5, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                 cache_size: int = 4):
        self.model = model
        self.tokenizer = tokenizer
        self.adapter = adapter_for(model)
        self.readout = Readout(self.adapter, dtype)
        if top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {top_k}")
        self.top_k = int(top_k)
        self.memory_budget = int(memory_budget)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[tuple[int, ...], Trace] = OrderedDict()
        self._answers: dict[tuple, torch.Tensor] = {}

    @property
    def n_blocks(self) -> int:
        """n, the number of decoder blocks."""
        return self.adapter.n_blocks

    def input_ids(self, text_or_ids) -> torch.Tensor:
        """The validated ``[T]`` token ids of a prompt (string, id list or tensor)."""
        return to_input_ids(text_or_ids, self.tokenizer, self.model.config,
                            self.readout.vocab_size)

    def prepare(self, text_or_ids, *, chat=False, max_new_tokens: int = 0
                ) -> tuple[torch.Tensor, int]:
        """The ids to attribute and the prompt's length.

        The prompt is wrapped in the tokenizer's chat template when ``chat`` says so
        (``"auto"``: a string prompt and a tokenizer with a template), then followed by the
        model's greedy answer of at most ``max_new_tokens`` tokens (cached per prompt).
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
                or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
        if wants_chat(chat, text_or_ids, self.tokenizer):
            text_or_ids = chat_prompt_ids(self.tokenizer, text_or_ids)
        prompt = self.input_ids(text_or_ids)
        if not max_new_tokens:
            return prompt, prompt.numel()
        key = (tuple(prompt.tolist()), max_new_tokens)
        if key not in self._answers:
            eos = getattr(self.tokenizer, "eos_token_id", None)
            self._answers[key] = generate_greedy(self.model, prompt, max_new_tokens, eos)
        return self.input_ids(torch.cat([prompt, self._answers[key]])), prompt.numel()

    def trace(self, text_or_ids) -> Trace:
        """Run the model once on a prompt (or return the cached run) and read out every row."""
        ids = self.input_ids(text_or_ids)
        key = tuple(ids.tolist())
        cached = self._cache.get(key)
        # At least the top-1 is always kept: it is the "predicted" target.
        top_k = max(1, self.top_k)
        if cached is not None and cached.top_k >= min(top_k, self.readout.vocab_size):
            self._cache.move_to_end(key)
            return cached
        states, model_logits = capture_states(self.model, self.adapter, ids,
                                              device=self.readout.device,
                                              dtype=self.readout.dtype)
        features, lse, top_ids, top_lp = readout_map(self.readout, states, top_k,
                                                     self.memory_budget)
        self._self_check(features[-1, -1], model_logits)
        trace = Trace(ids, states, features, lse, top_ids, top_lp)
        self._cache[key] = trace
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return trace

    def _self_check(self, last_features: torch.Tensor, model_logits: torch.Tensor) -> None:
        """f(h_n) must equal the model's own output distribution at the last position."""
        ours = torch.softmax(self.readout.logits_from_features(last_features), -1)
        theirs = torch.softmax(model_logits.to(ours.device, ours.dtype), -1)
        if ours.shape != theirs.shape:
            raise ReadoutMismatchError(
                f"the readout gives {ours.shape[-1]} logits but the model gives "
                f"{theirs.shape[-1]}; the {self.adapter.family.name} adapter does not fit "
                f"{type(self.model).__name__}")
        err = float((ours - theirs).abs().max())
        model_dtype = model_logits.dtype
        tol = _SELF_CHECK_TOL.get(model_dtype, _HALF_PRECISION_TOL)
        if err <= tol:
            return
        message = (f"readout self-check: f(h_n) differs from the model's own probabilities by "
                   f"{err:.2e} (tolerance {tol:.0e}) for {type(self.model).__name__} "
                   f"({self.adapter.family.name} adapter)")
        if model_dtype in _SELF_CHECK_TOL:
            raise ReadoutMismatchError(message + "; the adapter does not match this model")
        warnings.warn(message + f"; expected some gap for a {model_dtype} model", stacklevel=3)

    def attribute(self, text_or_ids, *, target="predicted", contrast=None, boundaries=None,
                  steps: int = 1, estimator: str = "prediction_aware", chat=False,
                  max_new_tokens: int = 0) -> AttributionResult:
        """Attribute each position's target probability across the model's blocks.

        Parameters
        ----------
        text_or_ids:
            A string, a list of token ids, or a 1-D / ``[1, T]`` tensor.
        target:
            ``"predicted"`` (the model's top-1 next token at each position), ``"next"`` (the
            text's next token; the last position has none), a token id, a single-token
            string, or a sequence of T ids.
        contrast:
            Optional second token in the same forms: attribute p(target) − p(contrast).
        boundaries:
            Block boundaries ``[0, …, n]`` (strictly increasing); None for every block.
        steps:
            Interpolation steps m ≥ 1 per segment. ``prediction_aware`` totals do not depend
            on m; m > 1 adds ``path_probs`` (the probability along each segment).
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
        """
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; choose one of {ESTIMATORS}")
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
        steps = int(steps)
        bounds = parse_boundaries(boundaries, self.n_blocks)
        ids, prompt_length = self.prepare(text_or_ids, chat=chat, max_new_tokens=max_new_tokens)
        trace = self.trace(ids)
        vocab = self.readout.vocab_size
        target_ids = resolve_targets(target, trace.input_ids, trace.predicted, self.tokenizer,
                                     vocab)
        if isinstance(target, str) and target == "predicted":
            # Greedy decoding with a KV cache can break near-ties differently from one full
            # pass; along the answer the target is the token that was actually generated.
            target_ids[prompt_length - 1:-1] = trace.input_ids[prompt_length:].numpy()
        contrast_ids = None if contrast is None else resolve_targets(
            contrast, trace.input_ids, trace.predicted, self.tokenizer, vocab, what="contrast")
        missing = target_ids == NO_TARGET
        if contrast_ids is not None:
            missing |= contrast_ids == NO_TARGET

        def usable(ids):  # a placeholder id where there is no target; masked to NaN below
            return torch.as_tensor(np.where(missing, 0, ids), device=self.readout.device)

        y = usable(target_ids)
        c = None if contrast_ids is None else usable(contrast_ids)
        lens = trace.lens_probs(self.readout, bounds, y, c).T.double()  # [T, k+1]
        T, k = lens.shape[0], lens.shape[1] - 1
        # Points inside segments are needed only by the Riemann sum and the interior path.
        pairs = _segment_pairs(trace, bounds, y, c) if estimator == "riemann" or steps > 1 \
            else None
        if estimator == "riemann":
            contributions = riemann_totals(self.readout, *pairs, steps, self.memory_budget)
            contributions = contributions.reshape(T, k).double()
        else:
            contributions = lens[:, 1:] - lens[:, :-1]
        path = None
        if steps > 1:
            alphas = torch.arange(1, steps, dtype=self.readout.dtype) / steps
            interior = path_values(self.readout, *pairs, alphas, self.memory_budget)
            path = torch.cat([lens[:, :-1, None], interior.reshape(T, k, -1).double(),
                              lens[:, 1:, None]], dim=-1)
        return self._result(trace, bounds, target_ids, contrast_ids, missing, lens,
                            contributions, path, estimator, steps, prompt_length)

    def widget(self, text_or_ids, **attribute_kwargs):
        """An interactive notebook widget for ``text_or_ids``; see :func:`iglens_viz.widget.show`.

        Its controls recompute through this lens, reusing the cached forward pass.
        """
        from ..widget import show

        return show(self, None, text_or_ids, **attribute_kwargs)

    def _result(self, trace, bounds, target_ids, contrast_ids, missing, lens, contributions,
                path, estimator, steps, prompt_length) -> AttributionResult:
        def numpy(x):
            out = x.detach().cpu().numpy().astype(np.float64)
            out[missing] = np.nan
            return out

        lens_np, contrib_np = numpy(lens), numpy(contributions)
        onset = np.full(len(target_ids), -1, dtype=np.int64)
        ok = ~missing
        onset[ok] = np.asarray(bounds)[1:][np.argmax(contrib_np[ok], axis=1)]
        keep = slice(0, self.top_k)
        top_ids = trace.top_ids[bounds, :, keep].transpose(0, 1).cpu().numpy()
        top_probs = trace.top_logprobs[bounds, :, keep].transpose(0, 1).exp().double().cpu().numpy()
        input_ids = trace.input_ids.numpy()
        token_text = token_texts(self.tokenizer, input_ids, target_ids, contrast_ids, top_ids)
        return AttributionResult(
            tokens=[token_text[int(i)] for i in input_ids],
            input_ids=input_ids,
            target_ids=target_ids,
            target_tokens=[token_text.get(int(i), "") for i in target_ids],
            boundaries=bounds,
            lens_probs=lens_np,
            contributions=contrib_np,
            delta_p=lens_np[:, -1] - lens_np[:, 0],
            onset=onset,
            top_ids=top_ids,
            top_probs=top_probs,
            estimator=estimator,
            steps=steps,
            path_probs=None if path is None else numpy(path),
            contrast_ids=contrast_ids,
            n_blocks=self.n_blocks,
            family=self.adapter.family.name,
            model_name=str(getattr(self.model.config, "name_or_path", "") or ""),
            token_text=token_text,
            prompt_length=prompt_length,
        )



def _segment_pairs(trace: Trace, bounds: list[int], y: torch.Tensor, c: torch.Tensor | None):
    """Segment endpoints and ids, one row per (position, segment): ``h_a, h_b [T·k, d]``."""
    h_a = trace.states[bounds[:-1]].transpose(0, 1)  # [T, k, d]
    h_b = trace.states[bounds[1:]].transpose(0, 1)
    T, k = h_a.shape[:2]

    def per_pair(ids):
        return None if ids is None else ids[:, None].expand(T, k).reshape(-1)

    return h_a.reshape(T * k, -1), h_b.reshape(T * k, -1), per_pair(y), per_pair(c)


def attribute(model: nn.Module, tokenizer, text_or_ids, *, target="predicted", contrast=None,
              boundaries=None, steps: int = 1, estimator: str = "prediction_aware",
              chat=False, max_new_tokens: int = 0, top_k: int = 5,
              dtype: torch.dtype = torch.float32) -> AttributionResult:
    """One-shot IG-Lens attribution; see :meth:`IGLens.attribute` for the arguments.

    For repeated questions about the same prompt (new targets, boundaries, estimators), build
    an :class:`IGLens` once: it caches the forward pass.
    """
    lens = IGLens(model, tokenizer, dtype=dtype, top_k=top_k)
    return lens.attribute(text_or_ids, target=target, contrast=contrast, boundaries=boundaries,
                          steps=steps, estimator=estimator, chat=chat,
                          max_new_tokens=max_new_tokens)
