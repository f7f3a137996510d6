"""Benchmark the sub-layer map and the component split against the block map.

Not a test: nothing here asserts on time. On the default model (SmolLM2-135M-Instruct,
embedded, offline) and the README's Vietnam chat prompt with its generated answer, it times,
each with a fresh ``IGLens`` (forward pass included):

* the block map — ``attribute(ids)``, the reference every ratio divides by;
* the sub-layer map — ``boundaries="sublayer"`` (2n + 1 boundaries instead of n + 1);
* the whole-prompt component split — ``components=True`` with block and with sub-layer
  boundaries (m = 1 and m = 8);
* one token, as the widget's click asks for it — ``engine.components(result, [p])`` on an engine
  that has just attributed the prompt without components (the first click runs the model once
  more to keep the head outputs) and on an engine that already holds them (every later click).

The contenders run interleaved, one round each in turn, after a warm-up round; each ratio is
the median of per-round ratios (see ``bench_attribute.py``), printed with the share of the
CPUs other processes took, so a busy machine shows.

Usage::

    python benchmarks/bench_components.py             # about 2–4 minutes on 2 cores
    python benchmarks/bench_components.py --repeats 5
    python benchmarks/bench_components.py --quick     # a short prompt, one round
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attribute import (
    cpu_seconds,
    interleaved_seconds,  # noqa: E402
    min_ratio,
    others_cpu_share,
    paired_ratio,
    say,
    say_machine,
)

import iglens_viz  # noqa: E402
from iglens_viz.core.request import AttributionRequest  # noqa: E402

PROMPT = "What is the capital of Vietnam?"
QUICK_PROMPT = "The capital of France is"


def prepared_ids(engine: iglens_viz.IGLens, quick: bool) -> tuple[torch.Tensor, int]:
    """The token ids the README's example attributes (chat template + generated answer), and
    the first answer position."""
    request = (
        AttributionRequest(QUICK_PROMPT)
        if quick
        else AttributionRequest(PROMPT, chat=True, max_new_tokens=16)
    )
    ids, prompt_length = engine.prepare(request)
    return ids, max(prompt_length - 1, 0)


def contenders(model, tokenizer, ids, position) -> dict:
    """Name → a function that does the work once, from a fresh engine."""

    def fresh():
        return iglens_viz.IGLens(model, tokenizer)

    def attribute(**kw):
        return lambda: fresh().attribute(ids, **kw)

    def click(warm: bool):
        engine = fresh()
        result = engine.attribute(ids)
        if warm:
            engine.components(result, [position])
        return lambda: engine.components(result, [position])

    # A click's engine is prepared once (outside the timing) and kept across rounds: the first
    # click's engine is rebuilt every round so its extra forward pass is always timed.
    def first_click():
        engine = fresh()
        result = engine.attribute(ids)
        start = time.perf_counter()
        engine.components(result, [position])
        first_click.seconds = time.perf_counter() - start

    return {
        "block map": attribute(),
        "sub-layer map": attribute(boundaries="sublayer"),
        "block map + components (m=1)": attribute(components=True),
        "sub-layer map + components (m=1)": attribute(boundaries="sublayer", components=True),
        "sub-layer map + components (m=8)": attribute(
            boundaries="sublayer", components=True, steps=8
        ),
        "one token, later clicks (m=1)": click(warm=True),
        "_first click": first_click,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    model, tokenizer = iglens_viz.load_model()
    engine = iglens_viz.IGLens(model, tokenizer)
    ids, position = prepared_ids(engine, args.quick)
    say(
        f"default model, T = {ids.numel()} tokens, token timed for a click: position "
        f"{position}; {args.repeats} interleaved rounds after a warm-up"
    )
    work = contenders(model, tokenizer, ids, position)
    first = work.pop("_first click")
    first_times = []

    def first_click_round():
        first()
        first_times.append(first.seconds)

    work["one token, first click (m=1)"] = first_click_round
    start, wall = cpu_seconds(), time.perf_counter()
    times = interleaved_seconds(work, 1 if args.quick else args.repeats)
    times["one token, first click (m=1)"] = first_times[1:] or first_times  # skip warm-up
    busy = others_cpu_share(start, time.perf_counter() - wall)

    say("")
    say(f"{'contender':36s} {'median s':>9s} {'× block map':>12s} {'(fastest runs)':>15s}")
    for name, seconds in times.items():
        if name == "one token, first click (m=1)":
            ratio = statistics.median(seconds) / statistics.median(times["block map"])
            fastest = min(seconds) / min(times["block map"])
        else:
            ratio = paired_ratio(times, name, "block map")
            fastest = min_ratio(times, name, "block map")
        say(f"{name:36s} {statistics.median(seconds):9.3f} {ratio:12.2f} {fastest:15.2f}")
    say("")
    say_machine(busy)


if __name__ == "__main__":
    main()
