"""The gate study (pre-registered in ``docs/study-gates.md``): which ledger of the block-gate
game names and ranks the blocks as block-update patching does?

Per pair of a committed counterfactual-study table (its prompts, target and contrast ids), at
the clean prompt's last position: the counterfactual game's diagonal and reverse staircase
(:func:`iglens_viz.gate_ledger`), IG-Lens (the removal game's forward staircase, the ledger's
``readable``), first-order attribution patching of p(t) and of the logit difference, and the
reference, block-update patching's total effect (recomputed and checked against the table).
Per pair and method: the strict top-1 hit and Spearman ρ against the reference; paired
differences with cluster-bootstrap intervals over clean countries.

    python -m iglens_study.gate_study docs/study-pairs-default/table.parquet \\
        --out docs/study-gates-default
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from iglens_viz.causal import attribution_patch, patch, spearman
from iglens_viz.causal.gates import ledger_for
from iglens_viz.core.lens import IGLens
from iglens_viz.loading import load_model

from .bootstrap import bootstrap_interval

if TYPE_CHECKING:
    from pandas import DataFrame

METHODS = ("diagonal", "reverse", "readable", "ap_prob", "ap_logit")
"""The per-block scores compared with the reference, ``patch_total``."""
HYPOTHESES = (
    ("G1", "readable", "rho", "the diagonal ranks blocks as patching does better than IG-Lens"),
    ("G2", "readable", "hit", "the diagonal names patching's block more often than IG-Lens"),
    ("G3 (probability)", "ap_prob", "rho", "integrating beats linearising p(t)"),
    (
        "G3 (logit difference)",
        "ap_logit",
        "rho",
        "integrating beats linearising the logit difference",
    ),
)
N_BOOT, SEED = 2000, 0
CHECK_PAIRS, CHECK_STEPS = 16, 32


def pair_rows(table: DataFrame) -> DataFrame:
    """One row per pair of a counterfactual-study table (its pair columns)."""
    keep = ["pair", "cluster", "clean", "corrupt", "target_id", "contrast_id", "patch_total"]
    first = table.sort_values(["pair", "block"]).groupby("pair", sort=True).first()
    return first.reset_index()[keep[:-1]]


def run(
    model: torch.nn.Module,
    tokenizer: Any,
    table: DataFrame,
    *,
    steps: int = 16,
    progress: bool = True,
) -> tuple[DataFrame, dict[str, Any]]:
    """The study's long table (one row per pair and block) and its checks."""
    import pandas as pd

    pairs = pair_rows(table)
    cleans, corrupts = pairs["clean"].tolist(), pairs["corrupt"].tolist()
    targets = [int(x) for x in pairs["target_id"]]
    contrasts = [int(x) for x in pairs["contrast_id"]]
    started = time.perf_counter()

    def batch(method: Any, **options: Any) -> list[Any]:
        return cast(
            list,
            method(
                model, tokenizer, cleans, corrupts, target=targets, contrast=contrasts, **options
            ),
        )

    reference = batch(patch)
    ap_logit = batch(attribution_patch)
    ap_prob = batch(attribution_patch, metric="prob")
    ig = IGLens(model, tokenizer)
    rows, check_moves, complete = [], [], []
    for k, (clean, corrupt, t) in enumerate(zip(cleans, corrupts, targets)):
        led = ledger_for(ig, clean, corrupt, target=t, steps=steps)
        if k < CHECK_PAIRS:
            finer = ledger_for(ig, clean, corrupt, target=t, steps=CHECK_STEPS, path="diagonal")
            check_moves.append(
                float(np.abs(finer.entries["diagonal"] - led.entries["diagonal"]).max())
            )
        complete.append(max(abs(e.sum() - led.total) for e in led.entries.values()))
        columns = {
            "diagonal": led.entries["diagonal"],
            "reverse": led.entries["reverse"],
            "readable": led.readable,
            "ap_prob": ap_prob[k].raw_effects,
            "ap_logit": ap_logit[k].raw_effects,
            "patch_total": reference[k].effects,
        }
        for b in range(led.n_blocks):
            rows.append(
                {
                    "pair": int(pairs["pair"][k]),
                    "cluster": pairs["cluster"][k],
                    "block": b + 1,
                    "g0": led.start,
                    "g1": led.end,
                    "g0_reference": led.start_reference,
                    "g1_reference": led.end_reference,
                    **{name: float(v[b]) for name, v in columns.items()},
                }
            )
        if progress:
            print(f"\rgate study: {k + 1}/{len(pairs)} pairs", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    out = pd.DataFrame(rows)
    committed = table.sort_values(["pair", "block"])["patch_total"].to_numpy()
    checks = {
        "pairs": len(pairs),
        "steps": steps,
        "seconds": round(time.perf_counter() - started, 1),
        "patch_total_vs_committed_max_abs": float(
            np.abs(out["patch_total"].to_numpy() - committed).max()
        ),
        "completeness_max_abs": float(max(complete)),
        "endpoint_max_abs": float(
            max(
                (out["g0"] - out["g0_reference"]).abs().max(),
                (out["g1"] - out["g1_reference"]).abs().max(),
            )
        ),
        f"diagonal_m{CHECK_STEPS}_vs_m{steps}_max_abs_first_{CHECK_PAIRS}": float(max(check_moves)),
    }
    return out, checks


def _wide(table: DataFrame, column: str) -> np.ndarray:
    return table.pivot(index="pair", columns="block", values=column).to_numpy(dtype=np.float64)


def per_pair(table: DataFrame) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Per pair and method: strict top-1 hits and Spearman ρ against ``patch_total``
    (methods, the best constant block and a random block), and the pairs' clusters."""
    ref = _wide(table, "patch_total")
    site = ref.argmax(1)
    P, n = ref.shape
    clusters = table.groupby("pair", sort=True)["cluster"].first().to_numpy()
    hits, rhos = {}, {}
    for m in METHODS:
        v = _wide(table, m)
        hits[m] = (v.argmax(1) == site).astype(float)
        rhos[m] = np.array([spearman(v[i], ref[i]) for i in range(P)])
    counts = np.bincount(site, minlength=n)
    hits["constant"] = (site == counts.argmax()).astype(float)
    loo = np.array([ref[clusters != c].mean(0) for c in clusters])  # other countries' mean
    rhos["constant"] = np.array([spearman(loo[i], ref[i]) for i in range(P)])
    rng = np.random.default_rng(SEED)
    hits["random"] = (rng.integers(0, n, P) == site).astype(float)
    rhos["random"] = np.array(
        [spearman(rng.permutation(n).astype(float), ref[i]) for i in range(P)]
    )
    return hits, rhos, clusters


def summarise(table: DataFrame) -> tuple[DataFrame, DataFrame, dict[str, Any]]:
    """Every method's hit rate and mean ρ with intervals; the paired differences diagonal −
    each other; the hypotheses' verdicts and the reported figures."""
    import pandas as pd

    hits, rhos, clusters = per_pair(table)
    names = list(hits)
    rows = []
    for stat, values in (("hit", hits), ("rho", rhos)):
        matrix = np.stack([values[m] for m in names], 1)
        lo, hi = cast(
            "tuple[np.ndarray, np.ndarray]",
            bootstrap_interval(matrix, clusters, n_boot=N_BOOT, seed=SEED),
        )
        for j, m in enumerate(names):
            rows.append((m, stat, float(np.nanmean(matrix[:, j])), float(lo[j]), float(hi[j])))
    methods = pd.DataFrame(rows, columns=["method", "statistic", "value", "lo", "hi"])
    rows = []
    for stat, values in (("hit", hits), ("rho", rhos)):
        others = [m for m in names if m != "diagonal"]
        diff = np.stack([values["diagonal"] - values[m] for m in others], 1)
        lo, hi = cast(
            "tuple[np.ndarray, np.ndarray]",
            bootstrap_interval(diff, clusters, n_boot=N_BOOT, seed=SEED),
        )
        for j, m in enumerate(others):
            rows.append((m, stat, float(np.nanmean(diff[:, j])), float(lo[j]), float(hi[j])))
    differences = pd.DataFrame(rows, columns=["other", "statistic", "diagonal_minus", "lo", "hi"])
    verdicts = {}
    for name, other, stat, question in HYPOTHESES:
        row = differences[
            (differences["other"] == other) & (differences["statistic"] == stat)
        ].iloc[0]
        verdicts[name] = {
            "question": question,
            "difference": row["diagonal_minus"],
            "interval": [row["lo"], row["hi"]],
            "verdict": "yes" if row["lo"] > 0 else "no",
        }
    site = _wide(table, "patch_total").argmax(1) + 1
    shares = _wide(table, "diagonal") / _wide(table, "diagonal").sum(1, keepdims=True)
    blocks = np.arange(1, shares.shape[1] + 1)
    at_site = np.array([shares[i, s - 1] for i, s in enumerate(site)])
    after = np.array([shares[i, blocks > s].sum() for i, s in enumerate(site)])
    verdicts["reported"] = {
        "site_blocks": {int(b): int(c) for b, c in zip(*np.unique(site, return_counts=True))},
        "argmax_blocks": {
            m: {
                int(b): int(c)
                for b, c in zip(*np.unique(_wide(table, m).argmax(1) + 1, return_counts=True))
            }
            for m in METHODS
        },
        "diagonal_share_at_site_median": float(np.median(at_site)),
        "diagonal_share_after_site_median": float(np.median(after)),
    }
    return methods, differences, verdicts


def write_summary(folder: Path, checks: dict[str, Any] | None = None) -> dict[str, Any]:
    """Summarise ``folder/table.csv.gz`` into ``summary.csv`` and ``results.json`` (the
    checks of the run kept from an earlier ``results.json`` unless given); the figures come
    from the table as committed, so they can be recomputed from it."""
    import pandas as pd

    table = pd.read_csv(folder / "table.csv.gz")
    methods, differences, verdicts = summarise(table)
    pd.concat([methods.assign(kind="method"), differences.assign(kind="difference")]).to_csv(
        folder / "summary.csv", index=False, float_format="%.6g"
    )
    if checks is None:
        checks = json.loads((folder / "results.json").read_text(encoding="utf-8"))["checks"]
    results = {"checks": checks, "hypotheses": verdicts}
    (folder / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m iglens_study.gate_study TABLE --out DIR [--model NAME]`` runs the
    study; ``--summarise DIR`` recomputes a run's summary from its table."""
    parser = argparse.ArgumentParser(prog="python -m iglens_study.gate_study")
    parser.add_argument("table", nargs="?", help="a counterfactual study's table.parquet")
    parser.add_argument("--out", help="folder for table.csv.gz, summary.csv, results.json")
    parser.add_argument("--summarise", metavar="DIR", help="summarise DIR/table.csv.gz again")
    parser.add_argument("--model", default=None, help="load_model's name (default: embedded)")
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args(argv)
    import pandas as pd

    if args.summarise:
        print(json.dumps(write_summary(Path(args.summarise)), indent=1))
        return 0
    if not args.table or not args.out:
        parser.error("give TABLE and --out DIR (or --summarise DIR)")
    pairs = pd.read_parquet(args.table)
    model, tokenizer = load_model() if args.model is None else load_model(args.model)
    table, checks = run(model, tokenizer, pairs, steps=args.steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "table.csv.gz", index=False, float_format="%.9g")
    print(json.dumps(write_summary(out, checks), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
