"""``iglens study …``: the ablation study and the counterfactual mode from the command line.

iglens_viz's ``iglens`` finds this command through the ``iglens_viz.commands`` entry point
this package registers (``pyproject.toml``) and calls :func:`main` with the arguments after
``study``; its errors (every :class:`~iglens_viz.IGLensError`) are printed there as one line
with status 2. ``python -m iglens_study.cli …`` runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iglens_viz import IGLensError
from iglens_viz.cli import count_at_least
from iglens_viz.views.token_format import visible_text

from .run import STUDY_MODES


class StudyUsageError(IGLensError):
    """A problem with ``iglens study``'s command line or its inputs (one line, status 2)."""


def _add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default=None, help="model dtype, e.g. float32 or bfloat16")
    p.add_argument("--device", default=None, help="model device, e.g. cpu, cuda, auto")


def _load(name: str | None, dtype: str | None = None, device: str | None = None) -> tuple[Any, Any]:
    """The model and tokenizer, without transformers' weight-loading progress bars."""
    from transformers.utils import logging as hf_logging

    from iglens_viz.loading import load_model

    hf_logging.disable_progress_bar()  # the table is the output
    return load_model(name, dtype=dtype, device=device)


def main(argv: list[str]) -> int:
    """``iglens study …`` with ``argv`` the arguments after ``study``; returns the exit status."""
    return run_study(list(argv))


def _study_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens study",
        description="Does the IG-Lens onset name the block whose ablation hurts the target "
        "most? IG-Lens and its baselines (logit-lens readings, constant and "
        "random blocks) over many prompts, with bootstrap intervals over prompts.",
    )
    p.add_argument(
        "prompts",
        nargs="?",
        default=None,
        help="a built-in set (capitals, shipped, default), a .txt file "
        "(one prompt per line), a .jsonl file (prompt, target) or "
        "a .csv file with a header (prompt, optional target); or --pairs instead",
    )
    p.add_argument(
        "--pairs",
        default=None,
        metavar="SET",
        help="the counterfactual mode (docs/study.md): capital-pairs (built for the model) "
        "or a .jsonl file of {clean, corrupt, target, contrast[, cluster]}; writes "
        "table.parquet, one row per (pair, block), and metadata.json",
    )
    p.add_argument(
        "--lenses",
        default="logit,shortcut",
        help="with --pairs: the lenses of the ig_<lens> columns, comma-separated (logit, "
        "shortcut, tuned, jacobian or lens files; default logit,shortcut)",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="folder for table.parquet, summary.csv, differences.csv, report.md and its figures; "
        "rerun with the same folder to resume",
    )
    p.add_argument("--model", default=None, help="causal LM id or local folder")
    p.add_argument(
        "--modes",
        default=",".join(STUDY_MODES),
        help=f"ablation modes, comma-separated: {', '.join(STUDY_MODES)}",
    )
    p.add_argument(
        "--limit", type=count_at_least(1), default=None, help="study the first N prompts"
    )
    p.add_argument(
        "--reference",
        type=count_at_least(2),
        default=32,
        help="reference prompts per task for mean and resample ablation (default 32)",
    )
    p.add_argument("--seed", type=count_at_least(0), default=0)
    p.add_argument(
        "--per-country",
        type=count_at_least(1),
        default=None,
        metavar="N",
        help="with --pairs capital-pairs: at most N pairs per country as clean (and as "
        "corrupt); default the pre-registered 6 (another cap is a declared deviation)",
    )
    p.add_argument("--boot", type=count_at_least(10), default=1000, help="bootstrap resamples")
    p.add_argument(
        "--batch-size",
        type=count_at_least(1),
        default=16,
        help="prompts per batch: padded forward passes, one readout map, shared "
        "ablation passes, one part file (default 16; larger on a GPU)",
    )
    p.epilog = (
        "Several processes (CPUs, GPUs or nodes) share the prompts when launched with "
        "`accelerate launch [--cpu] --num_processes N -m iglens_viz study …` or "
        "`torchrun --nproc-per-node N -m iglens_viz study …`; rank 0 gathers the table "
        "and writes the outputs. Each GPU process uses cuda:LOCAL_RANK."
    )
    _add_model_options(p)
    return p


def run_study(argv: list[str]) -> int:
    """``iglens study PROMPTS --out DIR``: the study, its summary and its report."""
    parser = _study_parser()
    args = parser.parse_args(argv)
    if (args.pairs is None) == (args.prompts is None):
        parser.error("give PROMPTS (the ablation study) or --pairs SET (the counterfactual mode)")
    if args.pairs is not None:
        return _run_pair_study(args)
    from iglens_viz.files import check_output_folder, write_atomic

    from . import load_study_prompts, study
    from .folder import read_metadata, write_table
    from .run import OUTPUT_FILES
    from .scoring import headline

    # Everything a user can get wrong fails here, before the model loads.
    load_study_prompts(args.prompts)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = [m for m in modes if m not in STUDY_MODES]
    if unknown or not modes:
        raise StudyUsageError(
            f"--modes {args.modes!r}: choose among {', '.join(STUDY_MODES)}, comma-separated"
        )
    check_output_folder(args.out, OUTPUT_FILES)
    read_metadata(args.out / "metadata.json")  # a damaged one is named now, not after loading
    device = args.device
    local_rank = os.environ.get("LOCAL_RANK")  # under torchrun / accelerate launch
    if device is None and local_rank is not None:
        import torch

        device = f"cuda:{local_rank}" if torch.cuda.is_available() else None
    model, tokenizer = _load(args.model, args.dtype, device)
    with _one_line_warnings():  # the study's warnings (a damaged part redone)
        result = study(
            model,
            tokenizer,
            args.prompts,
            modes=modes,
            reference=args.reference,
            seed=args.seed,
            out=args.out,
            limit=args.limit,
            batch_size=args.batch_size,
        )
    if result.metadata["rank"] != 0:  # rank 0 gathered the shards and writes the outputs
        return 0
    summary = result.summary(n_boot=args.boot, seed=args.seed)
    write_table(args.out / "table.parquet", result.table)
    write_atomic(args.out / "summary.csv", summary.to_csv(index=False))
    differences = result.differences(n_boot=args.boot, seed=args.seed)
    write_atomic(args.out / "differences.csv", differences.to_csv(index=False))
    report = result.report(args.out, summary, differences)
    rows = headline(summary)
    rows = rows[(rows["mode"] == modes[0]) & (rows["token_class"] == "all")]
    print(
        rows[["label", "agreement", "agreement_lo", "agreement_hi", "rho", "n_tokens"]].to_string(
            index=False
        )
    )
    for name in ("table.parquet", "summary.csv", "differences.csv", report.name):
        print(f"wrote {args.out / name}")
    return 0


def _run_pair_study(args: argparse.Namespace) -> int:
    """``iglens study --pairs SET --out DIR``: the counterfactual study's table."""
    from iglens_viz.files import check_output_folder

    from .counterfactual import PAIR_OUTPUT_FILES, pair_study
    from .folder import read_metadata
    from .pairs import CAPITAL_PAIRS

    lenses = tuple(name.strip() for name in args.lenses.split(",") if name.strip())
    if not lenses:
        raise StudyUsageError(
            f"--lenses {args.lenses!r}: name at least one lens, e.g. logit,shortcut"
        )
    if args.pairs != CAPITAL_PAIRS and not Path(args.pairs).is_file():
        raise StudyUsageError(
            f"--pairs {args.pairs!r} is neither {CAPITAL_PAIRS} nor a file; give a .jsonl file "
            f"of {{clean, corrupt, target, contrast}} objects, one per line"
        )
    check_output_folder(args.out, PAIR_OUTPUT_FILES)
    read_metadata(args.out / "metadata.json")  # a damaged one is named now, not after loading
    model, tokenizer = _load(args.model, args.dtype, args.device)
    with _one_line_warnings():
        result = pair_study(
            model,
            tokenizer,
            args.pairs,
            lenses=lenses,
            out=args.out,
            limit=args.limit,
            batch_size=args.batch_size,
            seed=args.seed,
            per_country=args.per_country,
        )
    meta = result.metadata
    done = int(result.table["pair"].nunique()) if len(result.table) else 0
    print(f"{done} pairs of {meta['n_pairs']} ({meta['pairs']}), {meta['seconds']:.1f} s")
    if meta["pairs"] == CAPITAL_PAIRS and meta["n_pairs"] < 200:
        print(f"note: only {meta['n_pairs']} capital pairs for this model (fewer than 200)")
    print(f"wrote {args.out / 'table.parquet'}")
    if done:
        report = result.report(args.out, seed=args.seed)
        answers = result.hypotheses(seed=args.seed)
        for row in answers.itertuples():
            print(f"{row.hypothesis} {row.verdict}: {visible_text(row.sentence, keep='')}")
        print(f"wrote {report}")
    return 0


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Inside the block, a warning prints as one ``iglens: warning: …`` line on stderr."""
    with warnings.catch_warnings():
        warnings.showwarning = lambda message, *_, **__: print(
            f"iglens: warning: {message}", file=sys.stderr
        )
        yield


if __name__ == "__main__":  # python -m iglens_study.cli …
    from iglens_viz.cli import main as iglens_main

    sys.exit(iglens_main(["study", *sys.argv[1:]]))
