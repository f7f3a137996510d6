"""Benchmark the study's throughput: prompts per second, and what batching buys.

Not a test: nothing here asserts on time. On the default model (SmolLM2-135M-Instruct) and the
first ``--prompts`` prompts of the built-in ``capitals`` set, it times, interleaved after a
warm-up:

* ``study(..., modes=("zero",))`` in batches of 16 prompts (the default): one right-padded
  forward pass and one readout map per batch, every prompt's 30 block ablations sharing
  forward passes that stop at h_n;
* the same study one prompt at a time (``batch_size=1``);
* the ablations as :func:`iglens_viz.ablate` runs them for one prompt (its 30 ablations
  batched, the model's logits at every position), and one forward pass per block
  (``batch_size=1``), the way a hand-written loop over blocks runs them;
* ``study`` with all three modes (zero, reference mean, resample), batches of 16.

It prints prompts per second and the ratios: batched study / one prompt at a time, and
batched ablations / one forward pass per block.

Usage::

    python benchmarks/bench_study.py                # 16 prompts, 3 rounds (~8 minutes on 2 cores)
    python benchmarks/bench_study.py --prompts 8 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attribute import (
    cpu_seconds,
    interleaved_seconds,
    others_cpu_share,  # noqa: E402
    say,
    say_machine,
)

import iglens_study  # noqa: E402
import iglens_viz  # noqa: E402
from iglens_study import builtin_set  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.prompts < 2:
        parser.error(
            "--prompts must be at least 2 (mean and resample ablation need another prompt)"
        )
    model, tokenizer = iglens_viz.load_model()
    prompts = builtin_set("capitals")[: args.prompts]
    texts = [p.text for p in prompts]

    def batched():
        iglens_study.study(model, tokenizer, prompts, modes=("zero",), progress=False)

    def one_prompt_at_a_time():
        iglens_study.study(model, tokenizer, prompts, modes=("zero",), progress=False, batch_size=1)

    def one_at_a_time():  # the ablations alone, one forward pass per block
        for text in texts:
            iglens_viz.ablate(model, tokenizer, text, batch_size=1)

    def batched_ablations():  # the ablations alone, batched per prompt by ablate()
        for text in texts:
            iglens_viz.ablate(model, tokenizer, text)

    def three_modes():
        iglens_study.study(model, tokenizer, prompts, progress=False, reference=8)

    work = {
        "study, zero, batches of 16": batched,
        "study, zero, one prompt each": one_prompt_at_a_time,
        "ablate(), per prompt": batched_ablations,
        "ablate(), one pass per block": one_at_a_time,
        "study, three modes": three_modes,
    }
    say(
        f"default model, {len(prompts)} capital prompts, {args.repeats} interleaved rounds "
        f"after a warm-up"
    )
    start, wall = cpu_seconds(), time.perf_counter()
    times = interleaved_seconds(work, args.repeats)
    busy = others_cpu_share(start, time.perf_counter() - wall)
    say("")
    say(f"{'contender':30s} {'median s':>9s} {'prompts/s':>10s}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        say(f"{name:30s} {median:9.2f} {len(prompts) / median:10.2f}")

    def ratio(slow, fast):  # median of per-round ratios
        return statistics.median(a / b for a, b in zip(times[slow], times[fast]))

    by_batch = ratio("study, zero, one prompt each", "study, zero, batches of 16")
    by_block = ratio("ablate(), one pass per block", "ablate(), per prompt")
    say(f"\nbatches of 16 prompts are {by_batch:.2f}× faster than one prompt at a time")
    say(f"ablate()'s batched ablations are {by_block:.2f}× faster than one forward pass per block")
    say_machine(busy)


if __name__ == "__main__":
    main()
