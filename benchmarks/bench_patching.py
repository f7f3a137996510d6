"""``patch()`` batched against one block at a time (issue 21, the counterfactual study).

Not a test: nothing here asserts on time. The counterfactual study patches every block of
every pair; ``iglens_viz.causal.patch`` does it in padded, batched forward passes (one row per
(pair, block), all blocks of several pairs in one pass, stopped at h_n). The baseline is the
plain recipe: for each pair and each block, one forward pass of the clean prompt with a hook
on that block that writes the corrupt prompt's update at the last position (the corrupt run's
updates captured once per pair), the metric read from the model's own logits.

Both compute ``patch_total`` (noising, the last position, the total effect, the logit
difference) of the same pairs: the first ``--pairs`` capital pairs of the default model (the
built-in ``capital-pairs`` set), so the prompts are the study's own. One untimed warm-up of
each, then ``--rounds`` rounds, each running both in alternating order (batched, loop /
loop, batched / …) so a busy spell on a shared machine hits both alike. Printed: pairs per
second of each (median over rounds), the median of per-round ratios, and the largest
difference between the two methods' effects (a check that they compute one quantity).

Usage::

    python benchmarks/bench_patching.py                 # 8 pairs, 3 rounds, 1 thread
    python benchmarks/bench_patching.py --pairs 4 --rounds 1 --threads 2

Last measured 2 December 2026 on a busy shared machine (2 cores, load average ~5, torch CPU,
1 thread), ``--pairs 4 --rounds 2``: batched 0.82 pairs/s, loop 0.095 pairs/s, median of
per-round ratios 9.1×; the two methods' effects agree to 1.2e-6 (float32).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch


def _blocks(model):
    from iglens_viz.adapters import adapter_for

    return adapter_for(model).blocks


def _first(output):
    return output if isinstance(output, torch.Tensor) else output[0]


def _put(output, new):
    return new if isinstance(output, torch.Tensor) else (new, *output[1:])


@torch.no_grad()
def _updates(model, ids):
    """``[n, T, d]`` each block's update and the last-position logits, one plain pass."""
    seen = {}

    def keep(i):
        def hook(module, args, kwargs, output):
            x = args[0] if args else kwargs["hidden_states"]
            seen[i] = (_first(output) - x)[0]

        return hook

    blocks = _blocks(model)
    handles = [b.register_forward_hook(keep(i), with_kwargs=True) for i, b in enumerate(blocks)]
    try:
        logits = model(input_ids=ids[None], use_cache=False).logits[0, -1].double()
    finally:
        for h in handles:
            h.remove()
    return torch.stack([seen[i] for i in range(len(blocks))]), logits


@torch.no_grad()
def loop(model, pairs, ids):
    """One patched forward pass per (pair, block): the plain hooked recipe."""
    out = []
    for pair, (clean, corrupt) in zip(pairs, ids):
        _, lc = _updates(model, clean)
        donor, lx = _updates(model, corrupt)
        m_clean = float(lc[pair.target_id] - lc[pair.contrast_id])
        m_corrupt = float(lx[pair.target_id] - lx[pair.contrast_id])
        effects = []
        for b, block in enumerate(_blocks(model)):

            def hook(module, args, kwargs, output, b=b, donor=donor):
                x = args[0] if args else kwargs["hidden_states"]
                new = _first(output).clone()
                new[0, -1] = x[0, -1] + donor[b, -1]
                return _put(output, new)

            handle = block.register_forward_hook(hook, with_kwargs=True)
            try:
                logits = model(input_ids=clean[None], use_cache=False).logits[0, -1].double()
            finally:
                handle.remove()
            m = float(logits[pair.target_id] - logits[pair.contrast_id])
            effects.append((m_clean - m) / (m_clean - m_corrupt))
        out.append(np.asarray(effects))
    return out


def batched(model, tokenizer, pairs):
    """``patch()`` over the pairs: every (pair, block) row in shared padded passes."""
    from iglens_viz.causal import patch

    results = patch(
        model,
        tokenizer,
        [p.clean for p in pairs],
        [p.corrupt for p in pairs],
        target=[p.target_id for p in pairs],
        contrast=[p.contrast_id for p in pairs],
    )
    return [r.effects for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import iglens_viz
    from iglens_study.pairs import capital_pairs

    model, tokenizer = iglens_viz.load_model()
    pairs = capital_pairs(model, tokenizer)[: args.pairs]
    ids = [
        (
            torch.as_tensor(tokenizer(p.clean)["input_ids"]),
            torch.as_tensor(tokenizer(p.corrupt)["input_ids"]),
        )
        for p in pairs
    ]
    a, b = batched(model, tokenizer, pairs), loop(model, pairs, ids)  # warm-up, and the check
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
    times: dict[str, list[float]] = {"batched": [], "loop": []}
    for r in range(args.rounds):
        order = ("batched", "loop") if r % 2 == 0 else ("loop", "batched")
        for name in order:
            start = time.perf_counter()
            if name == "batched":
                batched(model, tokenizer, pairs)
            else:
                loop(model, pairs, ids)
            times[name].append(time.perf_counter() - start)
    n = len(pairs)
    blocks = len(_blocks(model))
    print(f"{n} capital pairs × {blocks} blocks, {args.rounds} rounds, {args.threads} thread(s)")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:>8}: {n / median:7.3f} pairs/s (median {median:.2f} s)")
    ratios = [lo / ba for lo, ba in zip(times["loop"], times["batched"])]
    print(f"speed-up batched/loop: median of per-round ratios {statistics.median(ratios):.2f}x")
    print(f"max |effect difference| between the two: {diff:.2e}")


if __name__ == "__main__":
    main()
