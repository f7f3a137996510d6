"""How many tokens the non-monotone rule flags, per threshold: the data behind its default.

Not a test. On the default model (SmolLM2-135M-Instruct, embedded, offline, one thread) it
attributes the demo's prompt (``iglens "What is the capital of Vietnam?"``: the chat template
and 16 generated tokens) and the 70 shipped validation prompts (``builtin_set("shipped")``,
raw text, each position's top-1 next token, as a study without answers does), and prints the
share of positions whose trajectory has a segment flagged by
:func:`iglens_viz.core.trajectory.against_segments` at each candidate threshold. The table
in docs/method.md ("Non-monotone marks") is its output. About a minute on one core.

Usage::

    python benchmarks/nonmonotone_fraction.py
    python benchmarks/nonmonotone_fraction.py --thresholds 0.05 0.5 0.6
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

THRESHOLDS = (0.05, 0.1, 0.25, 0.5, 0.6, 0.75, 0.9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    args = ap.parse_args()
    torch.set_num_threads(1)  # light: the CPU is shared

    import iglens_viz
    from iglens_study.prompts import builtin_set
    from iglens_viz.core import AttributionRequest, IGLens
    from iglens_viz.core.trajectory import against_segments

    model, tokenizer = iglens_viz.load_model()
    engine = IGLens(model, tokenizer)
    demo = engine.run(
        AttributionRequest("What is the capital of Vietnam?", chat="auto", max_new_tokens=16)
    )
    shipped = [engine.run(AttributionRequest(p.text)) for p in builtin_set("shipped")]

    def flags(result, t):
        ok = np.isfinite(result.delta_p)
        return against_segments(result.contributions, result.delta_p, t).any(-1), ok

    answer = np.asarray(demo.answer_positions)
    print(
        "| threshold | Vietnam demo, all positions | its answer | "
        f"{len(shipped)} shipped prompts, pooled | median prompt |"
    )
    print("|---|---|---|---|---|")
    for t in args.thresholds:
        f, ok = flags(demo, t)
        pooled = total = 0
        per = []
        for r in shipped:
            g, o = flags(r, t)
            pooled += int(g[o].sum())
            total += int(o.sum())
            per.append(float(g[o].mean()))
        print(
            f"| {t:.0%} | {int(f[ok].sum())} of {int(ok.sum())} ({f[ok].mean():.0%}) | "
            f"{int(f[answer].sum())} of {len(answer)} | {pooled} of {total} "
            f"({pooled / total:.0%}) | {np.median(per):.0%} |"
        )


if __name__ == "__main__":
    main()
