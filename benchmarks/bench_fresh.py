"""The full map as a user meets it: each contender alone in a fresh process, interleaved.

Not a test: nothing here asserts on time. Every measurement starts a new Python process that
loads (or builds) the model, prepares its inputs untimed, times ONE call — the first, as a
user who calls it once meets it — and reports its wall and CPU time, the page faults of the
call (``ru_minflt``) and the share of the CPUs other processes took meanwhile (the
``/proc/stat`` helper of ``bench_attribute.py``). Rounds run every contender once, in a
rotating order, so a busy spell hits all alike; ratios are medians of per-round ratios.

Contenders, on the default model (``iglens_viz.load_model()``, SmolLM2-135M) and on a
Llama-3.2-1B-shaped model (d = 2048, V = 128,256, 32 heads, 8 KV heads, ffn 8192, tied head;
random weights, ``--llama-layers`` blocks, 4 by default: the readout's shape is what
matters), at T = 128 and 512:

* ``iglens``: ``IGLens(model, None).attribute(ids)`` — forward pass, self-check, readout map
  of every layer (logsumexp, top-5), predicted targets, contributions.
* ``hand loop``: what a user writes with transformers: ``output_hidden_states=True``, then per
  layer final norm → head → softmax → gather the prediction.
* ``nnsight``: the nnsight recipe: wrap the model, save the embeddings and every block's
  output inside a trace, then norm → head → softmax → gather per layer after the trace.
* ``readout``: IG-Lens's readout map alone (``readout_map`` on captured states; no forward).
* ``matmul floor``: the readout's matrix multiplies alone — the same tiles (``tile_plan``),
  the same features, into one reused buffer — the least the readout can cost.

Also, in a fresh process per model: the peak extra memory of ``attribute`` at T = 1024 over
one plain forward pass (``ru_maxrss``, high-water mark reset after the model is loaded).

Usage::

    python benchmarks/bench_fresh.py                 # both models, T = 128 and 512, 2 rounds
    python benchmarks/bench_fresh.py --quick         # smoke run: T = 32, 1 round, 1 layer
    python benchmarks/bench_fresh.py --models smollm2 --prompts 512 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _machine import LLAMA_1B_SHAPE, cpu_name  # noqa: E402 - the benchmarks' own folder

CONTENDERS = ("iglens", "hand loop", "nnsight", "readout", "matmul floor")
MODELS = ("smollm2", "llama1b")
MB = 10**6
GB = 10**9
BUSY_SHARE = 0.10


# ----------------------------------------------------------------------------- child side


def load(model_name: str, layers: int, cache_dir: str):
    """The model, in eval mode, its parameters materialised in this process's memory (so no
    contender pays the first touch of memory-mapped weights)."""
    import torch

    if model_name == "smollm2":
        import iglens_viz

        model, _ = iglens_viz.load_model()
    else:
        from transformers import LlamaForCausalLM

        model = LlamaForCausalLM.from_pretrained(llama_path(cache_dir, layers))
    with torch.no_grad():
        for p in model.parameters():
            p.data = p.data.clone()
    return model.eval()


def llama_path(cache_dir: str, layers: int) -> str:
    return os.path.join(cache_dir, f"llama1b-shaped-{layers}l")


def build_llama(cache_dir: str, layers: int) -> None:
    """Save a Llama-3.2-1B-shaped model with random weights once (a child loads it in ~2 s
    where building it takes ~13 s)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = llama_path(cache_dir, layers)
    if os.path.exists(os.path.join(path, "config.json")):
        return
    config = LlamaConfig(**LLAMA_1B_SHAPE, num_hidden_layers=layers)
    torch.manual_seed(0)
    LlamaForCausalLM(config).eval().save_pretrained(path)


def random_ids(vocab: int, length: int, seed: int = 1):
    import torch

    return torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(seed))


def nnsight_recipe(model, ids):
    """nnsight: save the embeddings and each block's output in a trace, read out after it."""
    import nnsight
    import torch
    from nnsight import NNsight

    lm = NNsight(model)
    with torch.no_grad():
        with lm.trace(ids[None]):
            states = nnsight.save(
                [lm.model.embed_tokens.output] + [layer.output for layer in lm.model.layers]
            )
            logits = lm.output.logits.save()
        targets = logits[0].argmax(-1)
        probs = []
        for hidden in states:
            p = torch.softmax(model.lm_head(model.model.norm(hidden[0])), dim=-1)
            probs.append(p.gather(-1, targets[:, None])[:, 0])
        return torch.stack(probs)


def prepare(model, contender: str, ids):
    """The untimed set-up of a contender; returns the function to time."""
    import torch

    import iglens_viz
    from iglens_viz.adapters import adapter_for
    from iglens_viz.core.readout import Readout, tile_plan
    from iglens_viz.core.trace import DEFAULT_MEMORY_BUDGET, block_plan, readout_map

    if contender == "iglens":
        return lambda: iglens_viz.IGLens(model, None).attribute(ids)
    if contender == "hand loop":  # the same loop bench_attribute.py times
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_attribute import naive_logit_lens

        return lambda: naive_logit_lens(model, ids)
    if contender == "nnsight":
        return lambda: nnsight_recipe(model, ids)
    readout = Readout(adapter_for(model))
    with torch.no_grad():  # every layer's states (HF's last one is normed: the cost is the same)
        out = model(input_ids=ids[None], output_hidden_states=True, logits_to_keep=1)
        states = torch.stack(out.hidden_states)[:, 0]
    del out
    if contender == "readout":
        return lambda: readout_map(readout, states, 5, DEFAULT_MEMORY_BUDGET)
    if contender == "matmul floor":
        features = readout.features(states.reshape(-1, states.shape[-1]))
        n, vocab = features.shape[0], readout.vocab_size
        rows, cols = block_plan(
            n, vocab, readout.dtype, DEFAULT_MEMORY_BUDGET, head_width=readout.head_block_width
        )
        rows, cols = tile_plan(
            n, vocab, features.shape[-1], readout.dtype, readout.device, rows, cols
        )
        head = readout.head_weight
        tile = torch.empty(rows * cols, dtype=readout.dtype)

        @torch.no_grad()
        def floor():
            for r0 in range(0, n, rows):
                z = features[r0 : r0 + rows]
                for c0 in range(0, vocab, cols):
                    w = min(cols, vocab - c0)
                    torch.mm(z, head[c0 : c0 + w].t(), out=tile[: z.shape[0] * w].view(-1, w))

        return floor
    raise ValueError(contender)


def child(spec: dict) -> dict:
    """One timed call in this (fresh) process."""
    import torch
    from bench_attribute import cpu_seconds, others_cpu_share

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    if spec["contender"] == "build":
        build_llama(spec["cache_dir"], spec["layers"])
        return {}
    model = load(spec["model"], spec["layers"], spec["cache_dir"])
    ids = random_ids(model.config.vocab_size, spec["prompt"])
    if spec["contender"] == "memory":
        return memory(model, ids)
    fn = prepare(model, spec["contender"], ids)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start_cpu, start = cpu_seconds(), time.perf_counter()
    own = time.process_time()
    fn()
    own = time.process_time() - own
    wall = time.perf_counter() - start
    return {
        "wall": wall,
        "cpu": own,
        "others": others_cpu_share(start_cpu, wall),
        "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
        "threads": torch.get_num_threads(),
    }


def peak_rss_bytes() -> int:
    """This process's own high-water mark of resident memory (``VmHWM``, which
    :func:`bench_attribute.reset_peak_rss` resets; ``ru_maxrss`` also carries the parent's
    peak across ``exec``), or ``ru_maxrss`` where ``/proc`` is missing."""
    try:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        from bench_attribute import peak_rss_bytes as fallback

        return fallback()


def memory(model, ids) -> dict:
    """Peak RSS after one plain forward pass, then after ``attribute`` (fresh process)."""
    import gc

    import torch
    from bench_attribute import reset_peak_rss

    import iglens_viz

    gc.collect()
    reset = reset_peak_rss()
    with torch.no_grad():  # a plain forward pass: the model's logits at every position
        model(input_ids=ids[None], attention_mask=torch.ones_like(ids[None]), use_cache=False)
    baseline = peak_rss_bytes()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    iglens_viz.IGLens(model, None).attribute(ids)
    return {
        "baseline": baseline,
        "peak": peak_rss_bytes(),
        "reset": reset,
        "seconds": time.perf_counter() - start,
        "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
    }


# ----------------------------------------------------------------------------- parent side


def run_child(spec: dict) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def say(message: str) -> None:
    print(message, flush=True)


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def measure(args, model: str, prompt: int) -> dict[str, list[dict]]:
    """``rounds`` rounds of every contender, each in its own process, order rotating."""
    runs: dict[str, list[dict]] = {name: [] for name in args.contenders}
    names = list(args.contenders)
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            spec = {
                "model": model,
                "prompt": prompt,
                "contender": name,
                "layers": args.llama_layers,
                "cache_dir": args.cache_dir,
                "threads": args.threads,
            }
            result = run_child(spec)
            result["load"] = loadavg()
            runs[name].append(result)
            say(
                f"  {model} T={prompt} round {round_ + 1} {name:<13} {result['wall']:7.2f} s "
                f"(cpu {result['cpu']:6.2f} s, {result['faults']:>9,} page faults, others "
                f"{100 * (result['others'] or 0):3.0f}% of the CPUs, load {result['load']})"
            )
    return runs


def paired(runs, a: str, b: str) -> float | None:
    """Median over rounds of time(a) / time(b) in the same round."""
    if a not in runs or b not in runs:
        return None
    return statistics.median(x["wall"] / y["wall"] for x, y in zip(runs[a], runs[b]))


def report(results: dict, memories: dict, args, wall: float) -> str:
    lines = ["", "== IG-Lens fresh-process benchmark ==", machine_line(args), ""]
    header = (
        f"{'model':<9}{'T':>5}  "
        + "".join(f"{name:>14}" for name in args.contenders)
        + f"{'readout/mm':>12}{'loop/map':>10}{'nnsight/map':>13}{'others':>8}"
    )
    lines.append(
        "median wall seconds of one call in a fresh process; ratios: medians of per-round ratios"
    )
    lines.append(header)
    for (model, prompt), runs in results.items():
        cells = "".join(
            f"{statistics.median(r['wall'] for r in runs[n]):14.2f}" for n in args.contenders
        )
        ratios = [
            paired(runs, "readout", "matmul floor"),
            paired(runs, "hand loop", "iglens"),
            paired(runs, "nnsight", "iglens"),
        ]
        others = max((r["others"] or 0) for rs in runs.values() for r in rs)
        lines.append(
            f"{model:<9}{prompt:>5}  {cells}"
            + "".join(f"{x:>12.2f}" if x is not None else f"{'-':>12}" for x in ratios[:1])
            + (f"{ratios[1]:>10.2f}" if ratios[1] else f"{'-':>10}")
            + (f"{ratios[2]:>13.2f}" if ratios[2] else f"{'-':>13}")
            + f"{100 * others:>7.0f}%"
        )
    lines += ["", "page faults per call (median):"]
    for (model, prompt), runs in results.items():
        lines.append(
            f"  {model} T={prompt}: "
            + ", ".join(
                f"{n} {statistics.median(r['faults'] for r in runs[n]):,.0f}"
                for n in args.contenders
            )
        )
    for model, m in memories.items():
        extra = max(0, m["peak"] - m["baseline"])
        lines.append(
            f"peak extra memory of attribute, {model}, T={args.memory_prompt}: "
            f"{extra / MB:,.0f} MB over one plain forward pass (attribute "
            f"{m['seconds']:.1f} s, {m['faults']:,} page faults)"
        )
    lines.append(
        f"'others' is the largest share of the CPUs other processes took during any "
        f"timed call of the row (BUSY above {BUSY_SHARE:.0%}). Total {wall:.0f} s."
    )
    return "\n".join(lines)


def machine_line(args) -> str:
    import torch
    import transformers

    cpu = cpu_name()
    try:
        import nnsight

        nn_version = nnsight.__version__
    except Exception:  # noqa: BLE001 - a version string only
        nn_version = "absent"
    from iglens_viz.core.readout import cache_sizes

    l2, l3 = cache_sizes()
    return (
        f"machine: {os.cpu_count()} cores ({cpu}; L2 {l2 // 2**10} KiB, L3 "
        f"{l3 // 2**20} MiB), torch {torch.__version__} ({args.threads or 'default'} "
        f"threads), transformers {transformers.__version__}, nnsight {nn_version}; "
        f"Llama-1B shape with {args.llama_layers} blocks"
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--prompts", default="128,512")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--llama-layers", type=int, default=4)
    parser.add_argument(
        "--memory-prompt", type=int, default=1024, help="T of the memory measurement (0: skip it)"
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--cache-dir", default=os.path.join(tempfile.gettempdir(), "iglens_bench_models")
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: T=32, 1 round, 1 Llama block, memory at T=64",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts, args.rounds, args.llama_layers, args.memory_prompt = "32", 1, 1, 64
    args.models = [m for m in args.models.split(",") if m]
    args.prompts = [int(t) for t in args.prompts.split(",") if t]
    args.contenders = [c for c in args.contenders.split(",") if c]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    start = time.perf_counter()
    if "llama1b" in args.models:
        os.makedirs(args.cache_dir, exist_ok=True)
        say(f"building the Llama-1B-shaped model once ({args.llama_layers} blocks)")
        run_child(
            {
                "model": "llama1b",
                "prompt": 0,
                "contender": "build",  # parent stays small
                "layers": args.llama_layers,
                "cache_dir": args.cache_dir,
                "threads": None,
            }
        )
    say(f"load average before: {loadavg()}")
    results, memories = {}, {}
    for model in args.models:
        for prompt in args.prompts:
            results[(model, prompt)] = measure(args, model, prompt)
    if args.memory_prompt:
        for model in args.models:
            spec = {
                "model": model,
                "prompt": args.memory_prompt,
                "contender": "memory",
                "layers": args.llama_layers,
                "cache_dir": args.cache_dir,
                "threads": args.threads,
            }
            memories[model] = run_child(spec)
            say(f"  memory {model}: {memories[model]}")
    say(f"load average after: {loadavg()}")
    print(report(results, memories, args, time.perf_counter() - start))


if __name__ == "__main__":
    main()
