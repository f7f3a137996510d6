"""The tuned lens (Belrose et al. 2023): an affine translator per depth, trained by KL.

T_L(h) = h + W_L·h + b_L (A_L = I + W_L), W_L = 0 and b_L = 0 at the start (the logit
lens), trained to minimise KL(final ‖ lens) = Σ_v p_n(v)·(log p_n(v) − log q_L(v)) at every
position, q_L = softmax(post(head(norm(T_L(h_L))))) through the model's frozen final norm
and head (:class:`~iglens_viz.core.readout.Readout`), the target the model's own output
distribution at the same position (the tuned-lens package's ``loss=kl``, token shift 0).

The optimiser is the tuned-lens package's (``tuned_lens/scripts/ingredients.py`` and
``train_loop.py``): SGD with Nesterov momentum 0.9, learning rate 1.0 × (1 − 0.9) (the
package undoes PyTorch's 1/(1 − β) scaling), weight decay 1e-3, the learning rate decayed
linearly to 0 over the steps without warm-up, the gradients of all translators clipped to
norm 1 together, 250 steps. The package draws 2^18 tokens per step from the Pile; here
each step draws ``batch_rows`` positions of the (much smaller) corpus, without replacement
within an epoch, from a seeded generator, so a fit is deterministic on one machine.

The target distribution (log softmax of the readout of the step's h_n rows) does not
depend on the translators: it is read once per step (:func:`final_log_probs`) and shared by
every depth's loss, the same numbers as reading it per depth.

Checkpoints (``checkpoint=``, ``resume=``; :func:`~.fit.fit_lens` keeps them in the cache,
:mod:`.cache`): after every ``checkpoint_every``-th step and after the last, the state
``{"step": steps done, "weights": [W_L] and "biases": [b_L] (float32, L = 0 … n−1),
"optimizer": the SGD state dict (its momentum buffers and learning rate), "scheduler": the
LambdaLR state dict (its step count), "generator": the row generator's state (a byte
tensor), "order": the epoch's row permutation, "cursor": how many of its rows are used,
"losses": the mean KL of every step done}``. Resumed from, it is put back exactly, so the
remaining steps draw the same rows and make the same updates as in a fit never stopped.

Memory: the corpus's states (n+1 × positions × d, float32), the step's ``[batch_rows × V]``
target (log-probabilities and probabilities) and, per depth in turn, one
``[batch_rows × V]`` block of logits and its gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..adapters import ModelAdapter
from ..core.readout import Readout
from ..errors import InvalidRequestError
from .states import STATE_BATCH, state_batches

__all__ = ["TUNED_DEFAULTS", "final_log_probs", "fit_tuned", "kl_to_final"]

TUNED_DEFAULTS = {
    "steps": 250,
    "batch_rows": 64,
    "lr": 1.0,
    "momentum": 0.9,
    "weight_decay": 1e-3,
    "clip": 1.0,
    "seed": 0,
}
"""The tuned lens's training settings (see the module's text)."""


def _log_probs(readout: Readout, h: torch.Tensor) -> torch.Tensor:
    logits = readout.logits(h)
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


def final_log_probs(readout: Readout, final: torch.Tensor) -> torch.Tensor:
    """The target of the tuned lens: log softmax of the readout of the h_n rows ``final``
    ``[R, d]`` → ``[R, V]``, without a graph (it does not depend on the translators)."""
    with torch.no_grad():
        return _log_probs(readout, final)


def kl_to_final(
    readout: Readout,
    final: torch.Tensor | None,
    lens_states: torch.Tensor,
    *,
    target: torch.Tensor | None = None,
    target_probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over rows of KL(softmax(final) ‖ softmax(lens)), both read out by ``readout``
    (``final``: h_n rows; ``lens_states``: T_L(h_L) of the same rows).

    ``target``: the rows' :func:`final_log_probs`, when already computed (then ``final`` is
    not read and may be None); ``target_probs``: ``target.exp()``, likewise. A fit reads
    the target once per step and reuses it at every depth; the value is the same, bit for
    bit, as computing it here."""
    if target is None:
        if final is None:
            raise InvalidRequestError("kl_to_final needs the final states or their target")
        target = final_log_probs(readout, final)
    if target_probs is None:
        target_probs = target.exp()
    predicted = _log_probs(readout, lens_states)
    return (target_probs * (target - predicted)).sum(-1).mean()


class _TunedFit:
    """A tuned-lens fit in progress: the corpus's states, the translators (W_L, b_L), the
    optimiser and its schedule, and the draw of rows (the generator, the epoch's order, the
    cursor in it); :meth:`state` is what a checkpoint keeps, :meth:`restore` puts it back."""

    def __init__(
        self,
        states: torch.Tensor,
        *,
        steps: int,
        seed: int,
        lr: float,
        momentum: float,
        weight_decay: float,
    ) -> None:
        """W_L = 0 and b_L = 0 (the logit lens) for every depth of ``states`` ``[n+1, R, d]``,
        the tuned-lens package's optimiser and schedule, and the first epoch's order."""
        self.states = states
        n, self.rows, d = states.shape[0] - 1, states.shape[1], states.shape[2]
        device = states.device
        self.weights = [torch.zeros(d, d, device=device, requires_grad=True) for _ in range(n)]
        self.biases = [torch.zeros(d, device=device, requires_grad=True) for _ in range(n)]
        self.params = [*self.weights, *self.biases]
        self.opt = torch.optim.SGD(
            self.params,
            lr=lr * (1 - momentum),
            momentum=momentum,
            nesterov=True,
            weight_decay=weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda step: max(0.0, (steps - step) / max(1, steps))
        )
        self.generator = torch.Generator().manual_seed(seed)
        self.order = torch.randperm(self.rows, generator=self.generator)
        self.cursor = 0
        self.step = 0
        self.losses: list[float] = []

    def train_step(self, readout: Readout, batch_rows: int, clip: float) -> None:
        """One step: the next ``batch_rows`` rows, their target read once, the KL of every
        depth's translated states to it, all gradients clipped together, one SGD update."""
        rows = self._draw(batch_rows)
        n = len(self.weights)
        target = final_log_probs(readout, self.states[n, rows])  # once per step, every depth
        target_probs = target.exp()
        self.opt.zero_grad(set_to_none=False)
        total = 0.0
        for L in range(n):
            h = self.states[L, rows]
            loss = kl_to_final(
                readout,
                None,
                h + h @ self.weights[L].T + self.biases[L],
                target=target,
                target_probs=target_probs,
            )
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(self.params, clip)
        self.opt.step()
        self.scheduler.step()
        self.losses.append(total / n)
        self.step += 1

    def _draw(self, count: int) -> torch.Tensor:
        """The next ``count`` rows of the epoch's order; a new epoch (a new order from the
        generator) where fewer are left."""
        if self.cursor + count > self.rows:
            self.order, self.cursor = torch.randperm(self.rows, generator=self.generator), 0
        rows = self.order[self.cursor : self.cursor + count].to(self.states.device)
        self.cursor += count
        return rows

    def state(self) -> dict[str, Any]:
        """The fit's state after its last step (see the module's text)."""
        return {
            "step": self.step,
            "weights": [w.detach().cpu() for w in self.weights],
            "biases": [b.detach().cpu() for b in self.biases],
            "optimizer": self.opt.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
            "order": self.order,
            "cursor": self.cursor,
            "losses": list(self.losses),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Put a checkpoint's translators, optimiser, schedule, generator and draw back in
        place. A checkpoint of another shape is refused."""
        if (
            len(state["weights"]) != len(self.weights)
            or any(a.shape != b.shape for a, b in zip(state["weights"], self.weights, strict=True))
            or state["order"].numel() != self.rows
        ):
            raise InvalidRequestError("the tuned-lens checkpoint is for another model or corpus")
        with torch.no_grad():
            for live, kept in zip(self.params, [*state["weights"], *state["biases"]]):
                live.copy_(kept)
        self.opt.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])
        self.step, self.cursor = int(state["step"]), int(state["cursor"])
        self.losses = [float(x) for x in state["losses"]]
        self.order = state["order"].clone()

    def translators(self) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
        """A_L = I + W_L and b_L of every depth, float32 on the CPU."""
        eye = torch.eye(self.states.shape[2])
        matrices = {L: (eye + w.detach().cpu()).contiguous() for L, w in enumerate(self.weights)}
        offsets = {L: b.detach().cpu().clone() for L, b in enumerate(self.biases)}
        return matrices, offsets


def _corpus_states(
    model: torch.nn.Module,
    sequences: Sequence[torch.Tensor],
    skip_first: int,
    states_progress: Callable[[int, int], None] | None,
) -> torch.Tensor:
    """``[n+1, R, d]`` the states the fit trains on: every position of ``sequences`` after
    the first ``skip_first``, read batch by batch (``states_progress`` after each)."""
    parts = []
    for batch in state_batches(model, sequences, skip_first=skip_first):
        parts.append(batch)
        if states_progress is not None:
            states_progress(min(len(sequences), len(parts) * STATE_BATCH), len(sequences))
    if not parts:
        raise InvalidRequestError(
            f"no text is longer than {skip_first + 1} tokens: nothing to train the tuned lens on"
        )
    return torch.cat(parts, dim=1)


def fit_tuned(
    adapter: ModelAdapter,
    model: torch.nn.Module,
    sequences: Sequence[torch.Tensor],
    *,
    steps: int = 250,
    batch_rows: int = 64,
    lr: float = 1.0,
    momentum: float = 0.9,
    weight_decay: float = 1e-3,
    clip: float = 1.0,
    seed: int = 0,
    skip_first: int = 1,
    progress: Callable[[int, int, float], None] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    checkpoint_every: int = 10,
    resume: Mapping[str, Any] | None = None,
    states_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor], int, list[float]]:
    """``(matrices, biases, positions, losses)``: A_L = I + W_L and b_L (float32) of every
    depth L < n after ``steps`` steps, the corpus's size, and the mean KL over depths at
    each step. ``states_progress(texts, total)`` is called after each batch of texts whose
    states are read, ``progress(step, steps, loss)`` after each step; either may raise to
    stop the fit.

    ``checkpoint(state)``, when given, is called after every ``checkpoint_every``-th step
    (and after the last) with the fit's state (see the module's text; its tensors are the
    fit's own, to be written out during the call), and after the step where ``progress``
    raised, before the exception goes on: a fit stopped there resumes at that step.
    ``resume``: such a state, from a fit with the same arguments and sequences; the fit
    continues after its step, and ends with the same numbers as one never stopped."""
    if steps < 0 or batch_rows < 1 or checkpoint_every < 1:
        raise InvalidRequestError(
            f"steps must be >= 0, batch_rows and checkpoint_every >= 1, got {steps}, "
            f"{batch_rows} and {checkpoint_every}"
        )
    readout = Readout(adapter, torch.float32)
    states = _corpus_states(model, sequences, skip_first, states_progress)
    fit = _TunedFit(
        states, steps=steps, seed=seed, lr=lr, momentum=momentum, weight_decay=weight_decay
    )
    if resume is not None:
        fit.restore(resume)
    while fit.step < steps:
        fit.train_step(readout, batch_rows, clip)
        kept = fit.step % checkpoint_every == 0 or fit.step == steps
        if checkpoint is not None and kept:
            checkpoint(fit.state())
        if progress is not None:
            try:
                progress(fit.step, steps, fit.losses[-1])
            except BaseException:  # stopped (a Cancel, Ctrl-C) after a whole step: keep it
                if checkpoint is not None and not kept:
                    checkpoint(fit.state())
                raise
    matrices, offsets = fit.translators()
    return matrices, offsets, fit.rows, fit.losses
