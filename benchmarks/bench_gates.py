"""The block-gate game's cost against the forward pass (issue 33). Not a test: nothing here
asserts on time.

One token's ledgers on the default model's Vietnam chat prompt with its greedy answer, gated at
the answer's first content token (" Ho"; the widget's opening position), against
"What is the capital of Italy?":

* **three ledgers** — ``gate_ledger(path="all", steps=16)``: both staircases and the diagonal
  (its m + 1 values and m gradient rows), in forward-pass equivalents of the clean sequence
  (one plain forward pass of the whole sequence, no cache). The issue's budget is the pilot's
  cost, 3m + 2n + 4 of them (m = 16, n = 30: 112);
* **staircases** — ``path="forward"`` and ``"reverse"`` together, against n + 1 plain forward
  passes (the issue's budget: 1.3× of that);
* **peak extra memory at T = 1,024**, in a fresh process: the high-water mark of the resident
  set (``VmHWM``, reset before the call through ``/proc/self/clear_refs``) during one gate
  ledger of a 1,024-token prompt, minus the resident set before it (model loaded, the prompt's
  plain forward pass already run once).

The gated runs are one token each over the clean prefix's key/value cache, so their cost
hardly grows with T while a forward pass grows linearly: the ratios fall with longer prompts.
A whole-prompt map (every position's three ledgers) would cost T times one token's — each
position needs its own gated runs and backward passes — and is not offered as a default; the
per-position time printed below is that map's cost per row.

Each timing is the median of ``--rounds`` rounds, each measuring both sides back to back after
an untimed warm-up, so a busy spell on a shared machine hits both alike.

Usage::

    python benchmarks/bench_gates.py                    # 5 rounds, 2 threads
    python benchmarks/bench_gates.py --rounds 3 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from _machine import cpu_name

QUESTION = "What is the capital of Vietnam?"
OTHER = "What is the capital of Italy?"


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _setup():
    import iglens_viz as ig
    from iglens_viz.protocol.opening import opening_position

    model, tokenizer = ig.load_model()
    engine = ig.IGLens(model, tokenizer)
    result = engine.attribute(QUESTION, chat=True, max_new_tokens=12)
    position = opening_position(result.tokens, result.target_tokens, result.prompt_length - 1)
    answer = result.input_ids[result.prompt_length :].tolist()
    ids = torch.as_tensor(result.input_ids)[None]
    return model, engine, answer, position, ids


def _speed(rounds: int) -> dict:
    model, engine, answer, position, ids = _setup()
    n = engine.n_blocks

    def forward():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    def ledger(path):
        return engine.gate_ledger(
            QUESTION, OTHER, chat=True, answer=answer, position=position, path=path, steps=16
        )

    def stairs():
        ledger("forward")
        ledger("reverse")

    for call in (forward, lambda: ledger("all"), stairs):  # warm-up
        call()
    fwd, three, two = [], [], []
    for _ in range(rounds):
        fwd.append(statistics.median(_timed(forward) for _ in range(5)))
        three.append(_timed(lambda: ledger("all")))
        two.append(_timed(stairs))
    f = statistics.median(fwd)
    return {
        "T": int(ids.shape[1]),
        "n": n,
        "position": position,
        "forward_s": f,
        "three_ledgers_s": statistics.median(three),
        "three_in_forward_passes": statistics.median(three) / f,
        "budget_3m_2n_4": 3 * 16 + 2 * n + 4,
        "staircases_s": statistics.median(two),
        "staircases_over_n_plus_1_passes": statistics.median(two) / ((n + 1) * f),
    }


def _peak_memory(T: int) -> dict:
    """Run in a fresh process: RSS before, and the high-water mark during one ledger."""
    import iglens_viz as ig

    model, tokenizer = ig.load_model()
    engine = ig.IGLens(model, tokenizer)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40_000, (T,), generator=generator)
    other = ids.clone()
    other[T // 2] = (other[T // 2] + 1) % 40_000
    with torch.no_grad():
        model(input_ids=ids[None], use_cache=False)

    def status(key: str) -> int:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith(key))
        return int(line.split()[1]) * 1024

    before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    start = time.perf_counter()
    engine.gate_ledger(ids.tolist(), other.tolist(), steps=16)
    seconds = time.perf_counter() - start
    return {"T": T, "seconds": seconds, "extra_peak_MiB": (status("VmHWM") - before) / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-only", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_only:
        print(json.dumps(_peak_memory(args.memory_only)))
        return
    speed = _speed(args.rounds)
    child = subprocess.run(
        [sys.executable, __file__, "--memory-only", "1024", "--threads", str(args.threads)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    memory = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"machine: {cpu_name()}, {args.threads} threads, load {os.getloadavg()[0]:.1f}")
    print(
        f"one token's three ledgers (T = {speed['T']}, position {speed['position']}, m = 16): "
        f"{speed['three_ledgers_s']:.2f} s = {speed['three_in_forward_passes']:.1f} forward "
        f"passes of {speed['forward_s'] * 1000:.0f} ms (budget {speed['budget_3m_2n_4']})"
    )
    print(
        f"both staircases: {speed['staircases_s']:.2f} s = "
        f"{speed['staircases_over_n_plus_1_passes']:.2f}× n + 1 = {speed['n'] + 1} forward "
        f"passes (budget 1.3×)"
    )
    print(
        f"T = {memory['T']}: one ledger {memory['seconds']:.1f} s, peak extra memory "
        f"{memory['extra_peak_MiB']:.0f} MiB; a whole-prompt map would be T × one ledger"
    )


if __name__ == "__main__":
    main()
