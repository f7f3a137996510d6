"""Benchmark the IG-Lens full map against its floor, the naive logit-lens loop and Captum.

Not a test: nothing here asserts on time. It prints figures measured in one run on a
Llama-shaped model with random weights (no download), each next to the project's goal:

* full map / floor: ``IGLens(model, None).attribute(ids)`` (every block, predicted targets,
  top-5, forward pass included) against one forward pass plus one batched
  norm/head/logsumexp over all (n+1)·T rows. Goal ≤ 1.25×.
* the naive per-layer logit-lens loop users write by hand (norm → head → softmax over
  [T, V] → gather, once per layer) against the full map. Goal: the full map is faster.
* Captum's ``LayerIntegratedGradients`` over every block against the full map on a short
  prompt, the cheapest way Captum runs on a residual stack: one call per block with the
  positions batched (one call over all blocks raises; the printout says so). Its cost grows
  with the positions attributed, so a few are timed and the cost is extrapolated linearly to
  all T positions (the printout says from how many). Captum measures another quantity: each
  block's integrated gradient of the token's probability from an all-zero-ids baseline.
* peak extra memory of ``attribute`` at T=1024 over the forward pass alone (goal ≤ 1 GB),
  measured in a fresh subprocess from the ``ru_maxrss`` high-water mark, next to what
  all-at-once logits would take.

Usage::

    python benchmarks/bench_attribute.py            # full sizes (a few minutes on 2 cores)
    python benchmarks/bench_attribute.py --quick    # smoke run with small sizes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import transformers
from _machine import cpu_name  # the benchmarks' own folder (run as a script)
from transformers import LlamaConfig, LlamaForCausalLM

import iglens_viz

GB = 10**9  # decimal: the memory goal "≤ 1 GB" is read strictly
MB = 10**6


@dataclass(frozen=True)
class Sizes:
    """Model and prompt sizes of one benchmark mode."""

    hidden: int
    blocks: int
    heads: int
    intermediate: int
    vocab: int
    prompt: int  # T of the floor / naive-loop comparisons
    captum_prompt: int  # T of the Captum comparison
    captum_positions: int  # positions Captum is actually timed on
    memory_prompt: int  # T of the memory measurement
    repeats: int


FULL = Sizes(
    hidden=1024,
    blocks=16,
    heads=16,
    intermediate=2816,
    vocab=65_536,
    prompt=128,
    captum_prompt=16,
    captum_positions=2,
    memory_prompt=1024,
    repeats=5,
)
QUICK = Sizes(
    hidden=256,
    blocks=4,
    heads=4,
    intermediate=704,
    vocab=8192,
    prompt=32,
    captum_prompt=16,
    captum_positions=2,
    memory_prompt=256,
    repeats=2,
)

CAPTUM_STEPS = 50  # LayerIntegratedGradients' default n_steps
MAP_GOAL = 1.25
MEMORY_GOAL = 1 * GB
BUSY_SHARE = 0.10  # other processes' CPU share above which the summary flags noisy timings


# ----------------------------------------------------------------------------- setup


def build_model(sizes: Sizes, seed: int = 0) -> LlamaForCausalLM:
    """A Llama-shaped causal LM with random weights, in eval mode."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=sizes.hidden,
        num_hidden_layers=sizes.blocks,
        num_attention_heads=sizes.heads,
        num_key_value_heads=sizes.heads,
        intermediate_size=sizes.intermediate,
        vocab_size=sizes.vocab,
        max_position_embeddings=max(1024, sizes.prompt, sizes.memory_prompt),
    )
    return LlamaForCausalLM(config).eval()


def random_ids(vocab: int, length: int, seed: int = 1) -> torch.Tensor:
    """``[length]`` random token ids."""
    return torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(seed))


def peak_rss_bytes() -> int:
    """High-water mark of this process's resident memory (``ru_maxrss``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def reset_peak_rss() -> bool:
    """Reset the ``ru_maxrss`` high-water mark to the current RSS (Linux ``clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def interleaved_seconds(
    contenders: dict[str, Callable[[], object]], repeats: int
) -> dict[str, list[float]]:
    """Wall times of each contender over ``repeats`` rounds, after one untimed warm-up round.

    Each round runs every contender once, in turn, so a busy spell on a shared machine hits
    all of them alike; ratios are then taken within a round (see :func:`paired_ratio`).
    """
    for fn in contenders.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def paired_ratio(times: dict[str, list[float]], numerator: str, denominator: str) -> float:
    """Median over rounds of ``numerator`` time / ``denominator`` time in the same round."""
    rounds = zip(times[numerator], times[denominator], strict=True)
    return statistics.median(a / b for a, b in rounds)


def min_ratio(times: dict[str, list[float]], numerator: str, denominator: str) -> float:
    """Ratio of the fastest runs: robust to busy spells that hit only some rounds."""
    return min(times[numerator]) / min(times[denominator])


def cpu_seconds() -> tuple[float, float] | None:
    """(CPU seconds all processes spent busy since boot, CPU seconds of this process and its
    children); None where ``/proc/stat`` is missing. Tells how busy a shared machine was."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait
    own = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )
    return busy, own


def others_cpu_share(start: tuple[float, float] | None, wall: float) -> float | None:
    """Fraction of all cores that other processes used since ``start`` (``cpu_seconds()``)."""
    end = cpu_seconds()
    if start is None or end is None or wall <= 0:
        return None
    others = (end[0] - start[0]) - (end[1] - start[1])
    return max(0.0, others) / (wall * (os.cpu_count() or 1))


def say(message: str) -> None:
    """Progress line, flushed at once (the run takes minutes)."""
    print(message, flush=True)


def say_machine(busy: float | None) -> None:
    """The machine line, and how much of the CPUs other processes took (BUSY above 10%)."""
    say(machine_info())
    if busy is not None:
        flag = "  BUSY: rerun on a quiet machine" if busy > BUSY_SHARE else ""
        say(f"other processes used {100 * busy:.0f}% of the CPUs during the run{flag}")


# ----------------------------------------------------------------------------- the contenders


def full_map(model: LlamaForCausalLM, ids: torch.Tensor) -> iglens_viz.AttributionResult:
    """IG-Lens full map with a fresh ``IGLens``, so the forward pass is always included."""
    return iglens_viz.IGLens(model, None).attribute(ids)


@torch.no_grad()
def floor(model: LlamaForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """The least any full map can cost: one forward pass + one batched readout of all rows.

    The readout is norm → head → logsumexp over all (n+1)·T hidden states at once. (The last
    HF hidden state is already normalised, so this norms it twice; the cost is what counts.)
    """
    out = model(input_ids=ids[None], use_cache=False, output_hidden_states=True, logits_to_keep=1)
    rows = torch.stack(out.hidden_states).reshape(-1, model.config.hidden_size)
    return torch.logsumexp(model.lm_head(model.model.norm(rows)), dim=-1)


@torch.no_grad()
def naive_logit_lens(model: LlamaForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """The per-layer loop users write by hand: ``[n+1, T]`` lens probability of the prediction."""
    out = model(input_ids=ids[None], output_hidden_states=True)
    targets = out.logits[0].argmax(-1)
    probs = []
    for hidden in out.hidden_states:
        p = torch.softmax(model.lm_head(model.model.norm(hidden[0])), dim=-1)
        probs.append(p.gather(-1, targets[:, None])[:, 0])
    return torch.stack(probs)


def captum_layer_ig(
    model: LlamaForCausalLM, ids: torch.Tensor, targets, positions, n_steps: int = CAPTUM_STEPS
) -> list[float]:
    """Captum LayerIntegratedGradients over every block at ``positions``, the cheapest way
    Captum runs on a residual stack: one call per block, the positions batched in it.

    The batch holds one copy of the prompt per position; the forward function returns, for
    row i, the probability of position i's target (logits computed there only,
    ``logits_to_keep``, which favours Captum); the baseline is the prompt with all ids 0; the
    attributions to the block's output are summed per row. Returns the per-position sums
    over blocks. One call over *all* blocks at once (``layer=[...]``) is what Captum offers
    for several layers, but it patches every block's output at the same time, so no
    gradient reaches an earlier block through a later one: Captum warns, and raises for a
    residual stack (see :func:`captum_all_layers_error`).
    """
    from captum.attr import LayerIntegratedGradients

    keep = torch.as_tensor(sorted(set(positions)))
    column = torch.as_tensor([int((keep == p).nonzero()) for p in positions])
    wanted = torch.as_tensor([int(targets[p]) for p in positions])

    def probability(x):  # Captum stacks the steps: row r is position r mod P
        logits = model(input_ids=x, use_cache=False, logits_to_keep=keep).logits
        steps = x.shape[0] // len(positions)
        picked = logits[torch.arange(x.shape[0]), column.repeat(steps)]
        return torch.softmax(picked, dim=-1).gather(-1, wanted.repeat(steps)[:, None])[:, 0]

    inputs = ids[None].expand(len(positions), -1)
    baseline = torch.zeros_like(inputs)
    sums = torch.zeros(len(positions), dtype=torch.float64)
    for block in model.model.layers:
        attributions = LayerIntegratedGradients(probability, block).attribute(
            inputs, baselines=baseline, n_steps=n_steps
        )
        sums += attributions.reshape(len(positions), -1).sum(-1).double()
    return sums.tolist()


def captum_all_layers_error(model: LlamaForCausalLM, ids: torch.Tensor, target: int) -> str:
    """What Captum says when asked for every block in one LayerIntegratedGradients call."""
    import warnings

    from captum.attr import LayerIntegratedGradients

    def probability(x):
        return torch.softmax(model(input_ids=x, use_cache=False).logits[:, -1], -1)[:, target]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            LayerIntegratedGradients(probability, list(model.model.layers)).attribute(
                ids[None], baselines=torch.zeros_like(ids[None]), n_steps=2
            )
        except RuntimeError as err:
            return f"raises RuntimeError: {str(err).splitlines()[0]}"
    return "ran (this Captum version allows it)"


# ----------------------------------------------------------------------------- measurements


def measure_speed(model: LlamaForCausalLM, sizes: Sizes) -> dict:
    """Full map, floor and naive loop at T = ``sizes.prompt``, interleaved; paired ratios."""
    ids = random_ids(sizes.vocab, sizes.prompt)
    times = interleaved_seconds(
        {
            "full map": lambda: full_map(model, ids),
            "floor": lambda: floor(model, ids),
            "naive loop": lambda: naive_logit_lens(model, ids),
        },
        sizes.repeats,
    )
    for name, runs in times.items():
        say(
            f"  {name:<10} median {statistics.median(runs) * 1e3:8.0f} ms  "
            f"runs {[round(t * 1e3) for t in runs]} ms"
        )
    pairs = {"map_vs_floor": ("full map", "floor"), "naive_vs_map": ("naive loop", "full map")}
    return {
        "median": {name: statistics.median(runs) for name, runs in times.items()},
        **{key: paired_ratio(times, *pair) for key, pair in pairs.items()},
        **{f"{key}_min": min_ratio(times, *pair) for key, pair in pairs.items()},
    }


def measure_captum(model: LlamaForCausalLM, sizes: Sizes) -> dict:
    """Captum timed on a few positions and extrapolated to all, against the full map."""
    T, P = sizes.captum_prompt, min(sizes.captum_positions, sizes.captum_prompt)
    ids = random_ids(sizes.vocab, T, seed=2)
    ours = statistics.median(
        interleaved_seconds({"full map": lambda: full_map(model, ids)}, sizes.repeats)["full map"]
    )
    say(f"  full map   median {ours * 1e3:8.0f} ms  (T={T})")
    targets = full_map(model, ids).target_ids  # the same predicted tokens for both tools
    positions = torch.linspace(0, T - 1, P).round().long().tolist()
    say(
        f"  Captum, every block in one LayerIG call: "
        f"{captum_all_layers_error(model, ids, int(targets[-1]))}"
    )
    captum_layer_ig(model, ids, targets, positions[:1], n_steps=2)  # warm-up, cheap
    start = time.perf_counter()
    captum_layer_ig(model, ids, targets, positions)
    measured = time.perf_counter() - start
    say(
        f"  Captum     {measured:8.1f} s  for position(s) {positions} × {sizes.blocks} blocks "
        f"= {sizes.blocks} LayerIG calls of {P} rows, n_steps={CAPTUM_STEPS}"
    )
    return {
        "ours": ours,
        "measured": measured,
        "total": measured * T / P,
        "positions": P,
        "prompt": T,
    }


def memory_child(sizes: Sizes) -> dict:
    """In a fresh process: peak RSS of the forward pass alone, then of ``attribute``.

    The high-water mark is reset after the model is built (where Linux allows), so the
    baseline is the resident model plus one plain forward pass at T = ``memory_prompt``.
    """
    model = build_model(sizes)
    reset = reset_peak_rss()
    ids = random_ids(sizes.vocab, sizes.memory_prompt, seed=3)
    with torch.no_grad():  # a plain forward pass: the model's logits at every position
        model(input_ids=ids[None], attention_mask=torch.ones_like(ids[None]), use_cache=False)
    baseline = peak_rss_bytes()
    start = time.perf_counter()
    full_map(model, ids)
    seconds = time.perf_counter() - start
    return {"baseline": baseline, "peak": peak_rss_bytes(), "seconds": seconds, "reset": reset}


def measure_memory(sizes: Sizes) -> dict:
    """Run :func:`memory_child` in a fresh interpreter; add the all-at-once logits size.

    Run it before this process grows: a child's ``ru_maxrss`` can start from its parent's.
    """
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--memory-child",
        json.dumps(dataclasses.asdict(sizes)),
        "--threads",
        str(torch.get_num_threads()),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory subprocess failed:\n{done.stderr}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    child["extra"] = max(0, child["peak"] - child["baseline"])
    child["all_logits"] = (sizes.blocks + 1) * sizes.memory_prompt * sizes.vocab * 4  # float32
    say(
        f"  peak after the forward pass alone {child['baseline'] / MB:,.0f} MB, after attribute "
        f"{child['peak'] / MB:,.0f} MB (T={sizes.memory_prompt}; attribute took "
        f"{child['seconds']:.1f} s)"
    )
    return child


# ----------------------------------------------------------------------------- report


def machine_info() -> str:
    """Cores, CPU, threads and library versions, one line."""
    import captum

    cpu = cpu_name()
    return (
        f"{os.cpu_count()} cores ({cpu}), torch {torch.__version__} with "
        f"{torch.get_num_threads()} threads, transformers {transformers.__version__}, "
        f"captum {captum.__version__}, Python {platform.python_version()}"
    )


def table(rows: list[tuple[str, str, str, bool | None]]) -> list[str]:
    """Aligned lines: measurement, value, goal, verdict."""
    width = max(len(r[0]) for r in rows) + 2
    lines = [f"{'measurement':<{width}}{'value':<24}goal"]
    for name, value, goal, ok in rows:
        mark = "" if ok is None else ("met" if ok else "MISSED")
        lines.append(f"{name:<{width}}{value:<24}{goal:<10}{mark}".rstrip())
    return lines


def summary(
    sizes: Sizes,
    params: int,
    speed: dict,
    captum: dict,
    memory: dict,
    mode: str,
    others: float | None,
    wall: float,
) -> str:
    """The final report: each figure with its goal, and how it was measured."""
    n, T = sizes.blocks, sizes.prompt
    ms = {name: f"{t * 1e3:,.0f} ms" for name, t in speed["median"].items()}
    map_ratio, naive_ratio = speed["map_vs_floor"], speed["naive_vs_map"]
    captum_ratio = captum["total"] / captum["ours"]

    def ratio(key: str) -> str:
        return f"{speed[key]:.2f}× (min {speed[key + '_min']:.2f}×)"

    rows = [
        (
            f"full map / floor (T={T})",
            ratio("map_vs_floor"),
            f"≤ {MAP_GOAL}×",
            map_ratio <= MAP_GOAL,
        ),
        (f"naive loop / full map (T={T})", ratio("naive_vs_map"), "> 1×", naive_ratio > 1),
        (
            f"Captum LayerIG / full map (T={captum['prompt']})",
            f"{captum_ratio:,.0f}× (extrapolated)",
            "> 1×",
            captum_ratio > 1,
        ),
        (
            f"peak extra memory (T={sizes.memory_prompt})",
            f"{memory['extra'] / MB:,.0f} MB",
            "≤ 1 GB",
            memory["extra"] <= MEMORY_GOAL,
        ),
        ("  all-at-once logits, computed", f"{memory['all_logits'] / MB:,.0f} MB", "", None),
    ]
    if others is None:
        busy = "an unknown share of the CPUs (no /proc/stat)"
    else:
        busy = f"{others:.0%} of the CPUs during the run" + (
            f" — BUSY (over {BUSY_SHARE:.0%}): timings are noisy, rerun on a quiet machine"
            if others > BUSY_SHARE
            else ""
        )
    return "\n".join(
        [
            "",
            f"== IG-Lens attribute benchmark ({mode} mode) ==",
            f"machine: {machine_info()}",
            f"others:  other processes used {busy}",
            f"model:   Llama-shaped, random weights, float32: d={sizes.hidden}, {n} blocks, "
            f"{sizes.heads} heads, ffn {sizes.intermediate}, vocab {sizes.vocab:,} "
            f"({params / 1e6:.0f}M parameters)",
            "",
            *table(rows),
            "",
            f"Speed: {sizes.repeats} interleaved rounds after a warm-up round; ratios are medians "
            f"of per-round ratios (min: ratio of the fastest runs); a naive-loop ratio > 1 means "
            f"the full map is faster. Medians: full map {ms['full map']}, floor {ms['floor']} "
            f"(forward + one norm/head/logsumexp of all {(n + 1) * T} rows), naive loop "
            f"{ms['naive loop']}.",
            f"Captum: EXTRAPOLATED linearly from {captum['positions']} of {captum['prompt']} "
            f"positions (all {n} blocks, n_steps={CAPTUM_STEPS}): {captum['measured']:.1f} s "
            f"measured → {captum['total']:,.0f} s for all {captum['prompt']} positions, vs "
            f"{captum['ours'] * 1e3:,.0f} ms for the full map.",
            f"Memory: fresh process, ru_maxrss after attribute − after one plain forward pass "
            f"(all positions' logits, as a user's own forward call computes them"
            f"{'; peak reset after the model build' if memory['reset'] else ''}); "
            f"all-at-once = (n+1)·T·V·4 B = {memory['all_logits'] / GB:.2f} GB "
            f"({memory['all_logits'] / 2**30:.2f} GiB), not run.",
            f"Total wall time: {wall:.0f} s.",
        ]
    )


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes for a smoke run (d=256, 4 blocks, vocab 8192, T=32, 2 repeats)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed rounds per figure (median taken); default 5, or 2 with --quick",
    )
    parser.add_argument(
        "--captum-positions",
        type=int,
        default=None,
        help="positions Captum is timed on before extrapolating (default 2; "
        "each adds about a minute on 2 cores in full mode)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads (default: leave torch's default)",
    )
    parser.add_argument("--memory-child", metavar="SIZES_JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    """Run every measurement and print the summary (or act as the memory subprocess)."""
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        print(json.dumps(memory_child(Sizes(**json.loads(args.memory_child)))))
        return
    sizes = QUICK if args.quick else FULL
    overrides = {"repeats": args.repeats, "captum_positions": args.captum_positions}
    sizes = dataclasses.replace(sizes, **{k: v for k, v in overrides.items() if v is not None})
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    say(f"torch threads: {torch.get_num_threads()} (of {os.cpu_count()} cores)")
    say("memory: fresh subprocess")
    memory = measure_memory(sizes)
    model = build_model(sizes)
    params = sum(p.numel() for p in model.parameters())
    say("speed: full map vs floor vs naive loop")
    speed = measure_speed(model, sizes)
    say("speed: Captum LayerIntegratedGradients vs full map")
    captum = measure_captum(model, sizes)
    wall = time.perf_counter() - start
    print(
        summary(
            sizes,
            params,
            speed,
            captum,
            memory,
            "quick" if args.quick else "full",
            others_cpu_share(cpu_start, wall),
            wall,
        )
    )


if __name__ == "__main__":
    main()
