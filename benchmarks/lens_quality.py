"""Lens quality per depth on held-out text: KL(final ‖ lens) and top-1 agreement, every lens
asked for beside the logit lens, for one model.

Not a test: nothing here asserts. The held-out text is the model's own evaluation corpus
(``iglens_viz.lenses.corpus``, 16 openings the fit never sees, sampled by the model with
seed 1). Fitted lenses are resolved the way ``lens=`` resolves them: read from the cache,
or fitted with the defaults on first use (a tuned or Jacobian fit takes long on a CPU).

    python benchmarks/lens_quality.py --lenses shortcut --json docs/data/lens_quality_default.json
    python benchmarks/lens_quality.py --model gemma-3-270m --lenses shortcut \\
        --json docs/data/lens_quality_gemma.json
    python benchmarks/lens_quality.py --model gemma-3-270m --lenses tuned --add \\
        --json docs/data/lens_quality_gemma.json   # one more lens, the others kept
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a load_model() name (default model)")
    parser.add_argument("--lenses", default="shortcut", help="comma-separated fitted lenses")
    parser.add_argument("--json", type=Path, default=None, help="write the table here")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--add", action="store_true", help="keep the other lenses already in --json's file"
    )
    args = parser.parse_args(argv)
    if args.add and args.json is None:
        parser.error("--add needs --json, the file to add to")
    lenses = [s.strip() for s in args.lenses.split(",") if s.strip()]

    import torch

    import iglens_viz
    from iglens_viz.lenses import evaluate_lens, resolve_lens

    torch.set_num_threads(args.threads)
    model, tokenizer = iglens_viz.load_model(args.model)
    name = str(getattr(model.config, "_name_or_path", "") or args.model or "default model")
    kept = _kept_rows(args.json, name) if args.add and args.json.exists() else {}
    rows: dict[str, dict] = {}
    for spec in lenses:
        started = time.perf_counter()
        lens = resolve_lens(spec, model, tokenizer)
        resolved = time.perf_counter() - started
        started = time.perf_counter()
        ev = evaluate_lens(lens, model, tokenizer)
        rows[spec] = {
            "kl": ev.kl.tolist(),
            "top1": ev.top1.tolist(),
            "positions": ev.positions,
            "fingerprint": lens.fingerprint,
            "settings": dict(lens.settings),
            "resolve_seconds": round(resolved, 1),
            "evaluate_seconds": round(time.perf_counter() - started, 1),
        }
        rows.setdefault("logit", {"kl": ev.logit_kl.tolist(), "top1": ev.logit_top1.tolist()})
        print(f"{spec}: resolved in {resolved:.0f} s, {ev.positions} positions", file=sys.stderr)
    depths = range(len(rows["logit"]["kl"]))
    order = ["logit", *lenses]
    print(f"\n{name}: KL(final ‖ lens) in nats / top-1 agreement, held-out text\n")
    print("| depth | " + " | ".join(f"{k} KL | {k} top-1" for k in order) + " |")
    print("|---:|" + "---:|---:|" * len(order))
    for L in depths:
        cells = " | ".join(f"{rows[k]['kl'][L]:.3f} | {rows[k]['top1'][L]:.3f}" for k in order)
        print(f"| {L} | {cells} |")
    if args.json is not None:
        payload = {
            "model": name,
            "lenses": {**kept, **rows},  # a lens measured again replaces its row
            "threads": args.threads,
            "versions": {
                "iglens_viz": iglens_viz.__version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _kept_rows(path: Path, name: str) -> dict:
    """The lens rows already in ``path`` for ``--add``, checked before anything is measured:
    a lens-quality table of the same model, whose logit-lens row is the same held-out
    measurement."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        sys.exit(f"--add: cannot read {path} as JSON ({err}): pick another file")
    if not isinstance(old, dict) or not isinstance(old.get("lenses"), dict):
        sys.exit(f"--add: {path} is not a lens-quality table (no 'lenses'): pick another file")
    if old.get("model") != name:
        sys.exit(f"--add: {path} is {old.get('model')!r}'s table; it cannot take rows of {name!r}")
    return old["lenses"]


if __name__ == "__main__":
    sys.exit(main())
