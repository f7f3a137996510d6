"""The block-gate game: exact ledgers of one total at one position, along three paths.

Give every block L a gate a_L ∈ [0, 1] on its write at the target position t::

    h_L[t] = h_{L−1}[t] + b_L + a_L·(Δ_L − b_L)

where Δ_L is what block L writes when it is *re-run* on the gated stream below it (later
blocks re-run too) and b_L a baseline write: 0 (``baseline="removal"``) or what block L wrote
at t in a counterfactual prompt of the same length (``"counterfactual"``). Other positions run
as they are: position t reads them, and a causal model never lets them read t. So every gated
run is one token, t, continuing the clean prompt's key/value cache of the positions before it.

The game's value is the model's own probability of the target, G(a) = f(h_n[t]).
G(0) is f(h_0[t]) (removal) or the counterfactual run's own probability of the target
(counterfactual); G(1) is the clean run's. By the gradient theorem *every* path from a = 0 to
a = 1 splits G(1) − G(0) exactly and additively over the gates:

* ``"forward"`` staircase — open gate 1, then 2, …: each block is credited while every later
  block is off. In the removal game each corner is f(h_L[t]) and each leg the straight segment
  h_{L−1} → h_L, so its ledger **is IG-Lens** (logit lens): where the answer becomes readable.
* ``"reverse"`` staircase — open the last gate first: each corner is the clean run with h_L[t]
  replaced by the counterfactual's (state patching), so its ledger is the patching curve's
  differences: where the answer-specific information arrives at the answer position.
* ``"diagonal"`` — all gates together, a = s·1: the Aumann–Shapley values, each block credited
  with its effect through later blocks and interactions shared. Each of the m steps'
  observed change G(s/m) − G((s−1)/m) is split over the gates in proportion to their
  first-order terms ∂G/∂a_j at the step's midpoint (the package's component rule,
  :mod:`iglens_viz.core.components`), so the ledger sums to the total at any m and converges
  to the path integral as m grows; the midpoint Riemann sum of the same gradients is kept
  beside it (:attr:`GateLedger.riemann`). Its first-order term at a = 1 is attribution
  patching.

None of the ledgers says where an answer is computed: they are three exact answers to three
questions about one total. Gates may cover segments of blocks (``boundaries``), or each
attention and MLP write (``"sublayer"``; then a staircase's corners at block ends are the block
game's own). ``components=True`` splits each diagonal entry over the block's heads and MLP in
proportion to their first-order terms, exactly.

>>> led = gate_ledger(model, tokenizer, "What is the capital of Vietnam?",
...                   "What is the capital of Thailand?", chat=True)      # doctest: +SKIP
>>> led.argmax("reverse"), led.entries["diagonal"].round(3)             # doctest: +SKIP
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import numpy as np
import torch
from torch import nn

from ..core.boundaries import BoundarySpec, is_sublayer, parse_boundaries, segment_labels
from ..core.capture import input_device
from ..core.components import component_names
from ..core.extensions import provider
from ..core.hooks import (
    Hooks,
    block_input,
    block_output_states,
    by_row,
    projection_input,
    replace_block_output,
    run_until,
)
from ..core.kv_cache import cache_keyword, prefix_cache, returned_cache
from ..core.lens import IGLens
from ..core.memory import DEFAULT_MEMORY_BUDGET, kv_cache_bytes, rows_within
from ..core.model_mode import eval_mode
from ..core.request import AttributionRequest, PromptSpec
from ..core.targets import single_token_id, token_texts
from ..core.wrappers import unwrap_model
from ..errors import InvalidRequestError, UnsupportedModelError
from .ablation import _part_modules

if TYPE_CHECKING:
    import pandas as pd
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "GATE_BASELINES",
    "GATE_PATHS",
    "GateBaseline",
    "GateLedger",
    "GatePath",
    "gate_ledger",
]

GatePath = Literal["forward", "reverse", "diagonal"]
GATE_PATHS: tuple[GatePath, ...] = get_args(GatePath)
"""The paths from all gates closed to all open: ``forward`` (block 1 first), ``reverse``
(block n first), ``diagonal`` (all together). ``"all"`` asks for the three."""
GateBaseline = Literal["counterfactual", "removal"]
GATE_BASELINES: tuple[GateBaseline, ...] = get_args(GateBaseline)
"""What a closed gate writes: the counterfactual prompt's write, or nothing."""
MAX_GATE_STEPS = 1000
"""The most diagonal steps a ledger takes (each costs two single-token runs)."""


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
        ids = [] if self.corrupt_ids is None else self.corrupt_ids
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

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """The ledgers as bars on the gate axis (matplotlib; see
        :func:`iglens_viz.views.static.plot_gate_ledger`)."""
        return provider("plot_gate_ledger")(self, ax=ax, **kwargs)


# --- the gates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Gating:
    """Which modules carry the gates and which gate each module's write obeys."""

    modules: tuple[nn.Module, ...]
    """Hooked in forward order: the blocks, or each block's attention and MLP write modules."""
    whole_blocks: bool
    """A module's write is its output minus its input (a block) or its output (a write module)."""
    gate_of: torch.Tensor
    """``(M,)`` the gate of each module."""
    n_gates: int


def _gating(adapter: Any, boundaries: list[float]) -> _Gating:
    n = adapter.n_blocks
    if is_sublayer(boundaries):
        adapter.require_sublayers()
        attn, mlp = _part_modules(adapter, "attn"), _part_modules(adapter, "mlp")
        modules = tuple(m for pair in zip(attn, mlp) for m in pair)
        return _Gating(modules, False, torch.arange(2 * n), 2 * n)
    ends = torch.as_tensor([float(b) for b in boundaries[1:]])
    # block L (1-based) lies in the segment whose end is the first boundary ≥ L
    gate_of = torch.searchsorted(ends, torch.arange(1, n + 1, dtype=ends.dtype))
    return _Gating(tuple(adapter.blocks), True, gate_of, len(boundaries) - 1)


def _write(gating: _Gating, args: tuple, kwargs: dict, output: Any, rows: int) -> torch.Tensor:
    """``[rows, 1, d]`` what a hooked module adds to the stream at the gated position."""
    out = block_output_states(output)
    if gating.whole_blocks:
        return out - block_input(args, kwargs)
    return by_row(out, rows)


# --- plain runs ------------------------------------------------------------------------------


@dataclass
class _Run:
    """What a plain run of a sequence up to t recorded at t."""

    writes: torch.Tensor  # [M, d] each gated module's write
    states: torch.Tensor  # [n+1, d] h_0 … h_n
    mids: torch.Tensor | None  # [n, d] h_L.attn (sub-layer gates)
    logits: torch.Tensor  # [V] the model's own logits
    cache: Any = None  # key/value cache of the positions before t
    attn: torch.Tensor | None = None  # [n, d] each block's attention write (components)
    z: torch.Tensor | None = None  # [n, H·d_head] output projections' inputs (components)


@torch.no_grad()
def _plain_run(
    model: nn.Module,
    adapter: Any,
    gating: _Gating,
    ids: torch.Tensor,
    *,
    keep_cache: bool,
    components: bool,
) -> _Run:
    """Run ``ids`` (``[t+1]``) once, keeping at its last position what the game needs."""
    n = adapter.n_blocks
    kept: dict[str, dict[int, torch.Tensor]] = {"w": {}, "h": {}, "mid": {}, "attn": {}, "z": {}}

    def at_last(x: torch.Tensor) -> torch.Tensor:
        return by_row(x, 1)[0, -1].detach().clone()

    def record_write(i: int) -> Callable[..., None]:
        def hook(module, args, kwargs, output):
            kept["w"][i] = _write(gating, args, kwargs, output, 1)[0, -1].detach().clone()

        return hook

    def record(kind: str, i: int) -> Callable[..., None]:
        def hook(module, args, output):
            kept[kind][i] = at_last(block_output_states(output))

        return hook

    def record_z(i: int) -> Callable[..., None]:
        def hook(module, args, kwargs):
            kept["z"][i] = at_last(projection_input(args, kwargs)[0])

        return hook

    def first_input(module, args, kwargs):
        kept["h"][0] = at_last(block_input(args, kwargs))

    def record_mid(i: int) -> Callable[..., None]:
        def hook(module, args):
            kept["mid"][i] = at_last(args[0])

        return hook

    def last_row_only(module, args):  # the head runs on position t alone
        return (args[0][:, -1:], *args[1:])

    with Hooks() as hooks, eval_mode(model):
        hooks.before(adapter.blocks[0], first_input, with_kwargs=True)
        for i, module in enumerate(gating.modules):
            hooks.after(module, record_write(i), with_kwargs=True)
        for i, block in enumerate(adapter.blocks):
            hooks.after(block, record("h", i + 1))
        if not gating.whole_blocks:
            for i, mid in enumerate(adapter.require_sublayers()):
                hooks.before(mid, record_mid(i))
        if components:
            for i, module in enumerate(_part_modules(adapter, "attn")):
                hooks.after(module, record("attn", i))
            if adapter.heads_split:
                for i, module in enumerate(adapter.require_heads()):
                    hooks.before(module, record_z(i), with_kwargs=True)
        hooks.before(adapter.head, last_row_only)
        batch = ids[None].to(input_device(model))
        out = model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=keep_cache)
    cache = None
    if keep_cache and ids.numel() > 1:
        cache = prefix_cache(returned_cache(out), ids.numel() - 1)

    def stacked(kind: str, count: int) -> torch.Tensor | None:
        return torch.stack([kept[kind][i] for i in range(count)]) if kept[kind] else None

    return _Run(
        writes=cast(torch.Tensor, stacked("w", len(gating.modules))),
        states=cast(torch.Tensor, stacked("h", n + 1)),
        mids=stacked("mid", n),
        logits=out.logits[0, -1].detach(),
        cache=cache,
        attn=stacked("attn", n),
        z=stacked("z", n),
    )


def _own_probability(logits: torch.Tensor, target: int) -> float:
    """The model's own probability of ``target`` from its logits (float64 softmax)."""
    return float(torch.softmax(logits.double(), dim=-1)[target])


# --- gated runs ------------------------------------------------------------------------------


@dataclass
class _Game:
    """Everything a gated run needs besides the gates."""

    model: nn.Module
    adapter: Any
    readout: Any
    gating: _Gating
    token: int  # the clean token at t
    target: int
    baseline: torch.Tensor  # [M, d] each module's closed-gate write
    cache: Any  # the clean prefix's key/value cache (None at t = 0)
    prefix: int  # t
    memory_budget: int

    def chunk_rows(self) -> int:
        """Gated rows per pass: as many as their copies of the prefix cache fit in budget."""
        per_row = kv_cache_bytes(self.model, self.prefix) * 2 + 1  # the cache and its update
        return rows_within(self.memory_budget, per_row)


@dataclass
class _Probes:
    """What a gated run with gradients kept, for the component split."""

    stream: dict[int, torch.Tensor] = field(default_factory=dict)  # zero probes after blocks
    writes: dict[int, torch.Tensor] = field(default_factory=dict)  # blocks' re-run writes
    attn: dict[int, torch.Tensor] = field(default_factory=dict)
    z: dict[int, torch.Tensor] = field(default_factory=dict)


def _gated_final_states(
    game: _Game, gates: torch.Tensor, probes: _Probes | None = None
) -> torch.Tensor:
    """``[B, d]`` h_n[t] of B gated runs, gate values ``gates [B, k]`` (differentiable in
    ``gates`` when it requires grad). With ``probes``, zero probes are added after every
    block and the re-run writes kept, for the component split."""
    model, adapter, gating = game.model, game.adapter, game.gating
    B = gates.shape[0]
    per_module = gates[:, gating.gate_of]  # [B, M]

    def gate(i: int) -> Callable[..., Any]:
        def hook(module, args, kwargs, output):
            out = block_output_states(output)
            write = _write(gating, args, kwargs, output, B)
            b = game.baseline[i].to(write)
            a = per_module[:, i, None, None].to(write)
            gated = b + a * (write - b)
            if probes is not None and gating.whole_blocks:
                probes.writes[i] = write[:, -1]
            new = block_input(args, kwargs) + gated if gating.whole_blocks else gated
            return replace_block_output(output, new.reshape(out.shape))

        return hook

    def probe(i: int) -> Callable[..., Any]:
        def hook(module, args, output):
            out = block_output_states(output)
            zero = torch.zeros_like(out, requires_grad=True)
            cast(_Probes, probes).stream[i] = zero
            return replace_block_output(output, out + zero)

        return hook

    def keep(table: dict[int, torch.Tensor], i: int) -> Callable[..., None]:
        def hook(module, args, output):
            table[i] = by_row(block_output_states(output), B)[:, -1]

        return hook

    def keep_z(i: int) -> Callable[..., None]:
        def hook(module, args, kwargs):
            cast(_Probes, probes).z[i] = by_row(projection_input(args, kwargs)[0], B)[:, -1]

        return hook

    device = input_device(model)
    ids = torch.full((B, 1), game.token, dtype=torch.long, device=device)
    mask = torch.ones(B, game.prefix + 1, dtype=torch.long, device=device)
    extra: dict[str, Any] = {}
    if game.cache is not None:
        rows_cache = copy.deepcopy(game.cache)
        rows_cache.batch_repeat_interleave(B)
        extra = {cache_keyword(model): rows_cache, "use_cache": True}
    with Hooks() as hooks, eval_mode(model):
        for i, module in enumerate(gating.modules):
            hooks.after(module, gate(i), with_kwargs=True)
        if probes is not None:
            for i, block in enumerate(adapter.blocks):
                hooks.after(block, probe(i))
            for i, module in enumerate(_part_modules(adapter, "attn")):
                hooks.after(module, keep(probes.attn, i))
            if adapter.heads_split:
                for i, module in enumerate(adapter.require_heads()):
                    hooks.before(module, keep_z(i), with_kwargs=True)
        output = run_until(
            adapter.blocks[-1], lambda: model(input_ids=ids, attention_mask=mask, **extra)
        )
    return block_output_states(output)[:, -1]


def _values(game: _Game, gates: torch.Tensor) -> np.ndarray:
    """``(R,)`` G at every row of ``gates [R, k]`` (float64), in chunks that fit the budget."""
    out = []
    step = game.chunk_rows()
    with torch.no_grad():
        for r0 in range(0, gates.shape[0], step):
            h = _gated_final_states(game, gates[r0 : r0 + step])
            out.append(game.readout.probability(h, game.target).double().cpu())
    return torch.cat(out).numpy() if out else np.zeros(0)


@dataclass
class _Gradients:
    """First-order terms at the diagonal's midpoints."""

    gates: np.ndarray  # [m, k] ∂G/∂a_j
    components: np.ndarray | None = None  # [m, n, C] ∂G/∂h_L · (w_c − b_c)


def _gradients(
    game: _Game, points: torch.Tensor, component_baseline: torch.Tensor | None
) -> _Gradients:
    """∂G/∂a at each row of ``points [m, k]`` (one backward pass per chunk of rows); with
    ``component_baseline`` (``[n, C, d]``), each block's components' first-order terms."""
    grads, parts = [], []
    step = game.chunk_rows()
    for r0 in range(0, points.shape[0], step):
        gates = points[r0 : r0 + step].clone().requires_grad_(True)
        probes = _Probes() if component_baseline is not None else None
        with torch.enable_grad():
            h = _gated_final_states(game, gates, probes)
            value = game.readout.probability(h, game.target).sum()
            inputs = [gates] + (
                [probes.stream[i] for i in range(game.adapter.n_blocks)] if probes else []
            )
            found = torch.autograd.grad(value, inputs, allow_unused=True)
        grads.append(found[0].double().cpu())
        if probes is not None and component_baseline is not None:
            stream = [
                torch.zeros_like(h) if g is None else by_row(g, h.shape[0])[:, -1]
                for g in found[1:]
            ]
            parts.append(_component_terms(game, probes, stream, component_baseline))
    return _Gradients(torch.cat(grads).numpy(), torch.cat(parts).numpy() if parts else None)


def _component_writes(
    adapter: Any, write: torch.Tensor, attn: torch.Tensor, z: torch.Tensor | None, block: int
) -> torch.Tensor:
    """``[..., C, d]`` one block's component writes (the columns of :func:`component_names`):
    per head ``W_o[:, head] z_head``, the MLP (the block's write less its attention's) and the
    attention's remainder (its bias); or the attention and the MLP."""
    mlp = write - attn
    if not adapter.heads_split:
        return torch.stack([attn, mlp], dim=-2)
    H = adapter.n_heads
    z = cast(torch.Tensor, z)  # kept wherever the heads split
    w_o = adapter.output_projection(block).detach().to(z)  # [d, H·d_head]
    heads = torch.einsum(
        "...hk,dhk->...hd", z.reshape(*z.shape[:-1], H, -1), w_o.reshape(-1, H, w_o.shape[-1] // H)
    )
    rest = attn - heads.sum(-2)
    return torch.cat([heads, mlp[..., None, :], rest[..., None, :]], dim=-2)


def _component_terms(
    game: _Game, probes: _Probes, stream: list[torch.Tensor], baseline: torch.Tensor
) -> torch.Tensor:
    """``[B, n, C]`` ∂G/∂h_L[t] · (w_c − b_c) for every block's components."""
    out = []
    for L in range(game.adapter.n_blocks):
        writes = _component_writes(
            game.adapter,
            probes.writes[L].detach(),
            probes.attn[L].detach(),
            probes.z[L].detach() if L in probes.z else None,
            L,
        )  # [B, C, d]
        diff = writes - baseline[L].to(writes)
        out.append((diff * stream[L].detach().to(writes)[:, None, :]).sum(-1))
    return torch.stack(out, dim=1).double().cpu()


# --- the ledgers -----------------------------------------------------------------------------


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
    game: _Game, gate_steps: np.ndarray, terms: np.ndarray, labels: list[str]
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


def _readable(readout: Any, run: _Run, target: int, boundaries: list[float]) -> np.ndarray:
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
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> GateLedger:
    """:func:`gate_ledger` on an :class:`~iglens_viz.core.lens.IGLens` (its model, readout and
    prompt preparation); see there for the arguments."""
    _check_choice(path, (*GATE_PATHS, "all"), "path")
    paths = GATE_PATHS if path == "all" else (path,)
    if baseline is None:
        baseline = "removal" if corrupt is None else "counterfactual"
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
    m = _check_steps(steps)
    clean, other, prompt_length = _resolve_inputs(
        ig, prompt, corrupt, chat=chat, answer=answer, max_new_tokens=max_new_tokens
    )
    T = clean.numel()
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
        raise InvalidRequestError(
            f"position must be an integer (0-based, or negative from the end), got {position!r}"
        )
    t = int(position) + (T if position < 0 else 0)
    if not 0 <= t < T:
        raise InvalidRequestError(
            f"position {position} is outside the sequence of {T} tokens; use 0 … {T - 1} or "
            f"-1 … -{T}"
        )
    if other is not None:
        _check_counterfactual(ig.tokenizer, clean, other, t)

    adapter, model, readout = ig.adapter, ig.model, ig.readout
    n = adapter.n_blocks
    bounds = parse_boundaries(boundaries, n)
    if components and is_sublayer(bounds):
        raise InvalidRequestError(
            "components=True splits whole blocks' gates over their heads and MLP; use block "
            "boundaries ('all', 'every:K' or a list) with it, not 'sublayer'"
        )
    if components and adapter.post_norm:
        raise UnsupportedModelError(
            f"components=True is not supported for post-norm {adapter.family.name}: a norm "
            f"follows each residual sum, so the attention's and MLP's outputs are not terms of "
            f"the stream"
        )
    gating = _gating(adapter, bounds)
    k = gating.n_gates

    run = _plain_run(model, adapter, gating, clean[: t + 1], keep_cache=True, components=components)
    y = (
        int(torch.argmax(run.logits))
        if target == "predicted"
        else single_token_id(target, ig.tokenizer, readout.vocab_size, "target")
    )
    if other is not None:
        corrupt_run = _plain_run(
            model, adapter, gating, other[: t + 1], keep_cache=False, components=components
        )
        base_writes = corrupt_run.writes
        start_reference = _own_probability(corrupt_run.logits, y)
    else:
        corrupt_run = None
        base_writes = torch.zeros_like(run.writes)
        with torch.no_grad():
            start_reference = float(readout.probability(run.states[0], y).double())
    game = _Game(
        model, adapter, readout, gating, int(clean[t]), y, base_writes, run.cache, t, memory_budget
    )

    ends = torch.stack([torch.zeros(k), torch.ones(k)]).double()
    stairs = {p: _staircase_rows(k, p == "reverse") for p in ("forward", "reverse") if p in paths}
    diagonal = torch.arange(m + 1, dtype=torch.float64)[:, None].expand(m + 1, k) / m
    interior = [rows[1:-1] for rows in stairs.values()]
    if "diagonal" in paths:
        interior.append(diagonal[1:-1])
    values = _values(game, torch.cat([ends, *interior]))
    start, end = float(values[0]), float(values[1])
    offset = 2
    corners: dict[str, np.ndarray] = {}
    entries: dict[str, np.ndarray] = {}  # path → ledger
    for name in stairs:
        inner = values[offset : offset + k - 1]
        offset += k - 1
        full = (
            np.concatenate([[start], inner, [end]])
            if name == "forward"
            else np.concatenate([[end], inner, [start]])
        )
        corners[name] = full
        entries[name] = np.diff(full) if name == "forward" else -np.diff(full)
    diagonal_values = riemann = frame = None
    if "diagonal" in paths:
        diagonal_values = np.concatenate([[start], values[offset:], [end]])
        changes = np.diff(diagonal_values)
        midpoints = (torch.arange(m, dtype=torch.float64)[:, None] + 0.5).expand(m, k) / m
        baseline_parts = None
        if components:
            baseline_parts = _baseline_components(adapter, corrupt_run, run)
        grads = _gradients(game, midpoints, baseline_parts)
        steps_split = split_steps(changes, grads.gates / m)
        entries["diagonal"] = steps_split.sum(0)
        riemann = grads.gates.mean(0)
        if grads.components is not None:
            frame = _component_frame(game, steps_split, grads.components, segment_labels(bounds))
    ordered = {p: entries[p] for p in GATE_PATHS if p in entries}
    return GateLedger(
        entries=ordered,
        corners=corners,
        diagonal_values=diagonal_values,
        riemann=riemann,
        readable=_readable(readout, run, y, bounds),
        start=start,
        end=end,
        start_reference=start_reference,
        end_reference=_own_probability(run.logits, y),
        labels=segment_labels(bounds),
        boundaries=bounds,
        position=t,
        target_id=y,
        baseline=baseline,
        steps=m,
        n_blocks=n,
        clean_ids=clean.numpy(),
        corrupt_ids=None if other is None else other.numpy(),
        prompt_length=prompt_length,
        components=frame,
        token_text=token_texts(
            ig.tokenizer, clean.numpy(), None if other is None else other.numpy(), np.asarray([y])
        ),
    )


def _baseline_components(adapter: Any, corrupt_run: _Run | None, clean_run: _Run) -> torch.Tensor:
    """``[n, C, d]`` each block's component writes with its gate closed: the counterfactual
    run's (zeros for the removal game)."""
    if corrupt_run is None:
        C = len(component_names(adapter))
        return clean_run.states.new_zeros(adapter.n_blocks, C, clean_run.states.shape[-1])
    return torch.stack(
        [
            _component_writes(
                adapter,
                corrupt_run.writes[L],
                cast(torch.Tensor, corrupt_run.attn)[L],
                None if corrupt_run.z is None else corrupt_run.z[L],
                L,
            )
            for L in range(adapter.n_blocks)
        ]
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
        Bytes for one pass's copies of the prompt's key/value cache (rows are chunked to fit).
    dtype:
        The readout's precision (default: float64 for a float64 model, else float32).

    Returns a :class:`GateLedger`. The game needs no lens: its value is the model's own output
    probability (under a fitted lens IG-Lens is not one of its paths).
    """
    if dtype is None:
        inner = unwrap_model(model)[0]
        wide = next(inner.parameters()).dtype == torch.float64
        dtype = torch.float64 if wide else torch.float32
    return ledger_for(IGLens(model, tokenizer, dtype=dtype), prompt, corrupt, **options)
