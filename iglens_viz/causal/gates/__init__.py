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

from .ledger import GATE_BASELINES, GATE_PATHS, GateBaseline, GateLedger, GatePath
from .play import MAX_GATE_STEPS, gate_ledger, ledger_for, split_steps, swap_subject

__all__ = [
    "GATE_BASELINES",
    "GATE_PATHS",
    "MAX_GATE_STEPS",
    "GateBaseline",
    "GateLedger",
    "GatePath",
    "gate_ledger",
    "ledger_for",
    "split_steps",
    "swap_subject",
]
