"""Benchmark the study's throughput: prompts per second, and what batching the ablations buys.

Not a test: nothing here asserts on time. On the default model (SmolLM2-135M-Instruct) and the
first ``--prompts`` prompts of the built-in ``capitals`` set, it times, interleaved after a
warm-up:

* ``study(..., modes=("zero",))`` — IG-Lens, the lens readings and the zero ablation of every
  block, each prompt's 30 ablations batched into forward passes of several rows;
* the same ablations one at a time (``ablate(..., batch_size=1)``: one forward pass per block),
  the way a hand-written loop over blocks runs them;
* ``study`` with all three modes (zero, reference mean, resample).

It prints prompts per second and the ratio batched / one at a time. Prompts still run one
after another: padded multi-prompt batches are not built yet, so there is no such row.

Usage::

    python benchmarks/bench_study.py                # 16 prompts, 3 rounds (~3 minutes on 2 cores)
    python benchmarks/bench_study.py --prompts 8 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attribute import (cpu_seconds, interleaved_seconds, others_cpu_share,  # noqa: E402
                             say, say_machine)

import iglens_viz  # noqa: E402
from iglens_viz.studies import builtin_set  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.prompts < 2:
        parser.error("--prompts must be at least 2 (mean and resample ablation need another "
                     "prompt)")
    model, tokenizer = iglens_viz.load_model()
    prompts = builtin_set("capitals")[:args.prompts]
    texts = [p.text for p in prompts]

    def batched():
        iglens_viz.study(model, tokenizer, prompts, modes=("zero",), progress=False)

    def one_at_a_time():  # the ablations alone, one forward pass per block
        for text in texts:
            iglens_viz.ablate(model, tokenizer, text, batch_size=1)

    def batched_ablations():  # the ablations alone, batched as the study runs them
        for text in texts:
            iglens_viz.ablate(model, tokenizer, text)

    def three_modes():
        iglens_viz.study(model, tokenizer, prompts, progress=False, reference=8)

    work = {"study, zero ablation": batched, "ablations batched": batched_ablations,
            "ablations one at a time": one_at_a_time, "study, three modes": three_modes}
    say(f"default model, {len(prompts)} capital prompts, {args.repeats} interleaved rounds "
        f"after a warm-up")
    start, wall = cpu_seconds(), time.perf_counter()
    times = interleaved_seconds(work, args.repeats)
    busy = others_cpu_share(start, time.perf_counter() - wall)
    say("")
    say(f"{'contender':28s} {'median s':>9s} {'prompts/s':>10s}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        say(f"{name:28s} {median:9.2f} {len(prompts) / median:10.2f}")
    ratio = statistics.median(a / b for a, b in zip(times["ablations one at a time"],
                                                    times["ablations batched"]))
    say(f"\nbatched ablations are {ratio:.2f}× faster than one forward pass per block "
        f"(median of per-round ratios)")
    say_machine(busy)


if __name__ == "__main__":
    main()
