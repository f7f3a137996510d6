"""Where each lens puts the IG-Lens onset on the built-in capitals set (issue 20).

Not a test: nothing here asserts. On the default model (``iglens_viz.load_model()``,
SmolLM2-135M-Instruct) it attributes, for every prompt of the built-in ``capitals`` study set
(``iglens_study.prompts``: "The capital of {country} is" and "The capital city of
{country} is", raw text, no chat template), the answer's first token at the prompt's last
position, exactly as the study does (``iglens_study.run._targets``), once under each
lens (default: the raw logit lens and the linear shortcut), and records per prompt and lens:

* ``onset`` — ``result.onset`` at the last position, the block (1 … n) of the segment with
  the largest signed contribution;
* ``p_final`` — f(h_n), the model's own probability of the target (the same under every
  lens: T_n is the identity);
* ``top1`` — whether the target is the model's top-1 next token;
* ``p_start`` — f(h̃_0), the target's probability read at the embeddings through the lens;
* ``onset_contribution`` — that segment's contribution;
* ``completeness`` — |Σ contributions − Δp| at that position, and ``result.completeness_error``
  (every position of the result): float64 first differences along the path, so these are
  rounding and cannot fail;
* ``model_gap`` — |f(h_n) − the model's own softmax probability of the target| (its logits
  from a plain ``model(ids)`` call), a check that can fail: a wrong final norm, head or
  position would show here;
* ``readout_gap`` — the largest |lens probability − an independent readout| over depths
  0 … n, the independent readout built here from block hooks, the lens's own matrices and
  biases, and float64 copies of the model's final norm and head.

It prints, per lens, the onset counts in four block ranges (0–9, 10–19, 20–24, 25–30 on
30 blocks; see ``block_ranges``), the median and the
share in the last six blocks; the paired difference (second lens − first lens) with its
median and a bootstrap 95% interval over countries (a country's two phrasings are resampled
together); the same restricted to the prompts whose target is top-1 or has p_final ≥ 0.1;
and the largest completeness error under each lens.

``--limit N`` takes a seeded random subset of N countries (both phrasings of each); without
it, every country of the set. Deterministic for a given ``--seed``.

Usage::

    python benchmarks/lens_onsets.py                       # every country (~7 min on 2 cores)
    python benchmarks/lens_onsets.py --limit 10            # smoke run
    python benchmarks/lens_onsets.py --json docs/data/lens_onsets_default.json
    python benchmarks/lens_onsets.py --lenses logit,shortcut,tuned
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

LAST_SIX = 6


def block_ranges(n_blocks: int) -> tuple[tuple[int, int], ...]:
    """The table's block ranges: thirds of the depths, the last third ending before the last
    six blocks, then the last six (0–9, 10–19, 20–24, 25–30 for 30 blocks)."""
    third = n_blocks // 3
    return (
        (0, third - 1),
        (third, 2 * third - 1),
        (2 * third, n_blocks - LAST_SIX),
        (n_blocks - LAST_SIX + 1, n_blocks),
    )


def _countries(prompts: list) -> list[str]:
    """The country each prompt asks about, from the study's own templates."""
    from iglens_study.prompts import CAPITAL_TEMPLATES

    out = []
    for p in prompts:
        for template in CAPITAL_TEMPLATES:
            head, tail = template.split("{country}")
            if p.text.startswith(head) and p.text.endswith(tail):
                out.append(p.text[len(head) : len(p.text) - len(tail)])
                break
        else:  # pragma: no cover - the set is built from these templates
            raise ValueError(f"not a capitals prompt: {p.text!r}")
    return out


def _template_index(text: str) -> int:
    from iglens_study.prompts import CAPITAL_TEMPLATES

    for i, template in enumerate(CAPITAL_TEMPLATES):
        head, tail = template.split("{country}")
        if text.startswith(head) and text.endswith(tail):
            return i
    return -1


def select(limit: int | None, seed: int) -> list:
    """The capitals prompts of ``limit`` countries drawn with ``seed`` (all without it), in
    the set's order."""
    from iglens_study.prompts import builtin_set

    prompts = builtin_set("capitals")
    countries = _countries(prompts)
    names = sorted(set(countries))
    if limit is not None and limit < len(names):
        rng = np.random.default_rng(seed)
        keep = set(rng.choice(len(names), size=limit, replace=False).tolist())
        chosen = {names[i] for i in keep}
    else:
        chosen = set(names)
    return [(p, c) for p, c in zip(prompts, countries) if c in chosen]


def measure(model, tokenizer, items: list, lenses: list[str], progress: bool = True) -> list:
    """One row per prompt: the target and the model's output, then one entry per lens."""
    import iglens_viz
    from iglens_study.run import _targets

    ig = iglens_viz.IGLens(model, tokenizer)
    fitted = {lens: ig.resolve_lens(lens) for lens in lenses}  # fitted or read once, first
    readout = IndependentReadout(model)
    rows = []
    started = time.perf_counter()
    for k, (prompt, country) in enumerate(items):
        ids = ig.input_ids(prompt.text)
        target = _targets(tokenizer, prompt, ids.numel())
        row: dict = {"country": country, "template": _template_index(prompt.text)}
        states, model_probs = readout.run(ids)
        for lens in lenses:
            r = ig.attribute(ids, target=target, lens=lens)
            assert r.lens_name == lens, (r.lens_name, lens)
            t = len(r.input_ids) - 1
            y = int(r.target_ids[t])
            contrib = np.asarray(r.contributions[t], dtype=np.float64)
            probs = np.asarray(r.lens_probs[t], dtype=np.float64)
            top = int(r.top_ids[t, -1, 0])
            row.update(  # the same under every lens: T_n is the identity
                answer=prompt.answer,
                target=r.target_tokens[t],
                target_id=y,
                p_final=float(probs[-1]),
                top1=bool(top == y),
                model_top1=r.token_text.get(top, ""),
            )
            row[lens] = {
                "onset": int(r.onset[t]),
                "onset_contribution": float(contrib[r.onset_segment[t]]),
                "p_start": float(probs[0]),
                "completeness": float(abs(contrib.sum() - float(r.delta_p[t]))),
                "completeness_error": float(r.completeness_error),
                "model_gap": abs(float(probs[-1]) - float(model_probs[y])),
                "readout_gap": max(
                    abs(float(probs[L]) - float(readout.probs(fitted[lens], states[L], L)[y]))
                    for L in range(len(states))
                ),
            }
        rows.append(row)
        ig.clear_cache()
        if progress and (k + 1) % 20 == 0:
            print(
                f"  {k + 1}/{len(items)} prompts, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    return rows


class IndependentReadout:
    """The states h_0 … h_n at the last position from hooks on the model's own blocks, and
    f(T_L(h)) from float64 copies of its final norm and head: written apart from the
    library's capture and readout, to check them."""

    def __init__(self, model) -> None:
        import copy

        import torch

        self.model = model
        base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        self.blocks = list(base.layers)
        self.norm = copy.deepcopy(base.norm).to(torch.float64)
        self.head = model.get_output_embeddings().weight.detach().to(torch.float64)
        self.cap = getattr(model.config, "final_logit_softcapping", None)

    def run(self, ids):
        """The states at the last position (float64, ``[n+1, d]``) and the model's own
        probabilities there (its ``logits`` in float64, softmaxed)."""
        import torch

        states: list = []
        first = self.blocks[0].register_forward_pre_hook(
            lambda _m, args, kwargs: states.append(
                (kwargs.get("hidden_states", args[0] if args else None))[0, -1]
            ),
            with_kwargs=True,
        )

        def keep(_module, _inputs, out) -> None:
            states.append((out[0] if isinstance(out, tuple) else out)[0, -1])

        after = [block.register_forward_hook(keep) for block in self.blocks]
        try:
            with torch.no_grad():
                logits = self.model(ids.view(1, -1)).logits[0, -1]
        finally:
            for handle in (first, *after):
                handle.remove()
        probs = torch.softmax(logits.to(torch.float64), -1)
        return torch.stack(states).to(torch.float64), probs

    def probs(self, lens, h, depth: int):
        """f(T_depth(h)): the lens's translator, then the final norm, the head, softmax."""
        import torch

        matrix, bias = lens.matrices.get(depth), lens.biases.get(depth)
        if matrix is not None:
            h = matrix.to(torch.float64) @ h
        if bias is not None:
            h = h + bias.to(torch.float64)
        with torch.no_grad():
            logits = self.head @ self.norm(h.view(1, -1))[0]
        if self.cap:
            logits = self.cap * torch.tanh(logits / self.cap)
        return torch.softmax(logits, -1)


def _rounded(value):
    """A row for the JSON file: floats to 6 significant digits (the file stays small)."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


def distribution(onsets: np.ndarray, n_blocks: int) -> dict:
    ranges = block_ranges(n_blocks)
    out = {f"{a}-{b}": int(((onsets >= a) & (onsets <= b)).sum()) for a, b in ranges}
    out["n"] = int(onsets.size)
    out["median"] = float(np.median(onsets)) if onsets.size else float("nan")
    out["last_six_share"] = (
        float((onsets > n_blocks - LAST_SIX).mean()) if onsets.size else float("nan")
    )
    return out


def paired(diff: np.ndarray, groups: np.ndarray, n_boot: int, seed: int) -> dict:
    """Median of the paired differences and a percentile bootstrap 95% interval over
    countries (each resampled country brings all its prompts)."""
    if diff.size == 0:
        return {"n": 0, "median": float("nan"), "ci95": [float("nan"), float("nan")]}
    names, codes = np.unique(groups, return_inverse=True)
    by_group = [diff[codes == g] for g in range(len(names))]
    rng = np.random.default_rng(seed)
    meds = np.empty(n_boot)
    for b in range(n_boot):
        pick = rng.integers(0, len(names), size=len(names))
        meds[b] = np.median(np.concatenate([by_group[g] for g in pick]))
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return {
        "n": int(diff.size),
        "countries": len(names),
        "median": float(np.median(diff)),
        "mean": float(diff.mean()),
        "ci95": [float(lo), float(hi)],
        "share_later": float((diff > 0).mean()),
        "share_same": float((diff == 0).mean()),
        "share_earlier": float((diff < 0).mean()),
    }


def summarize(rows: list, lenses: list[str], n_blocks: int, n_boot: int, seed: int) -> dict:
    confident = np.array([r["top1"] or r["p_final"] >= 0.1 for r in rows])
    countries = np.array([r["country"] for r in rows])
    summary: dict = {"all": {}, "confident": {}, "paired": {}, "completeness": {}}
    summary["n_blocks"] = n_blocks
    summary["confident_count"] = int(confident.sum())
    summary["top1_count"] = int(sum(r["top1"] for r in rows))
    onsets = {lens: np.array([r[lens]["onset"] for r in rows]) for lens in lenses}
    for lens in lenses:
        summary["all"][lens] = distribution(onsets[lens], n_blocks)
        summary["confident"][lens] = distribution(onsets[lens][confident], n_blocks)
        summary["all"][lens]["histogram"] = np.bincount(
            onsets[lens], minlength=n_blocks + 1
        ).tolist()
        summary["completeness"][lens] = {
            "max_abs_sum_minus_delta_p": max(r[lens]["completeness"] for r in rows),
            "max_result_completeness_error": max(r[lens]["completeness_error"] for r in rows),
            "max_model_gap": max(r[lens]["model_gap"] for r in rows),
            "max_readout_gap": max(r[lens]["readout_gap"] for r in rows),
        }
    for lens in lenses[1:]:
        diff = onsets[lens] - onsets[lenses[0]]
        summary["paired"][f"{lens}-{lenses[0]}"] = {
            "all": paired(diff, countries, n_boot, seed),
            "confident": paired(diff[confident], countries[confident], n_boot, seed),
        }
    return summary


def print_table(summary: dict, lenses: list[str], n_prompts: int, n_countries: int) -> None:
    ranges = [f"{a}-{b}" for a, b in block_ranges(summary["n_blocks"])]
    for subset, label in (
        ("all", f"all {n_prompts} prompts ({n_countries} countries)"),
        (
            "confident",
            f"target top-1 or p_final >= 0.1: {summary['confident_count']} prompts "
            f"({summary['top1_count']} top-1)",
        ),
    ):
        print(f"\nonset of the answer's first token, {label}")
        print(f"{'lens':<10}" + "".join(f"{r:>8}" for r in ranges) + f"{'median':>8}{'last 6':>8}")
        for lens in lenses:
            d = summary[subset][lens]
            print(
                f"{lens:<10}"
                + "".join(f"{d[r]:>8}" for r in ranges)
                + f"{d['median']:>8.1f}{100 * d['last_six_share']:>7.0f}%"
            )
        for name, p in summary["paired"].items():
            q = p[subset]
            print(
                f"paired {name}: n={q['n']}, median {q['median']:+.1f} blocks "
                f"(95% CI {q['ci95'][0]:+.1f} … {q['ci95'][1]:+.1f}), mean {q['mean']:+.2f}; "
                f"later {100 * q['share_later']:.0f}%, same {100 * q['share_same']:.0f}%, "
                f"earlier {100 * q['share_earlier']:.0f}%"
            )
    print("\ncompleteness, max |sum of contributions - delta p| at the attributed position")
    for lens in lenses:
        c = summary["completeness"][lens]
        print(
            f"{lens:<10} {c['max_abs_sum_minus_delta_p']:.3g} "
            f"(result.completeness_error, every position: {c['max_result_completeness_error']:.3g})"
        )
    print("\nchecks that can fail, the largest gap over the prompts")
    for lens in lenses:
        c = summary["completeness"][lens]
        print(
            f"{lens:<10} |f(h_n) - the model's own p| {c['max_model_gap']:.3g}; "
            f"|lens probability - independent readout| {c['max_readout_gap']:.3g}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a load_model() name (default model)")
    parser.add_argument("--limit", type=int, default=None, help="a seeded subset of N countries")
    parser.add_argument("--seed", type=int, default=0, help="subset and bootstrap seed")
    parser.add_argument("--lenses", default="logit,shortcut", help="comma-separated, first = base")
    parser.add_argument("--boot", type=int, default=10000, help="bootstrap resamples")
    parser.add_argument("--json", type=Path, default=None, help="write rows and summary here")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: steadiest on a shared 2-core box)"
    )
    args = parser.parse_args(argv)
    lenses = [s.strip() for s in args.lenses.split(",") if s.strip()]

    import torch

    import iglens_viz

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model, tokenizer = iglens_viz.load_model(args.model)
    n_blocks = int(model.config.num_hidden_layers)
    items = select(args.limit, args.seed)
    n_countries = len({c for _, c in items})
    print(
        f"{getattr(model.config, '_name_or_path', '') or 'default model'}: {n_blocks} blocks; "
        f"{len(items)} capitals prompts ({n_countries} countries"
        f"{'' if args.limit is None else f', seeded subset, seed {args.seed}'}); "
        f"lenses {', '.join(lenses)}",
        file=sys.stderr,
    )
    rows = measure(model, tokenizer, items, lenses)
    summary = summarize(rows, lenses, n_blocks, args.boot, args.seed)
    print_table(summary, lenses, len(items), n_countries)
    seconds = time.perf_counter() - started
    print(f"\n{seconds:.0f} s", file=sys.stderr)
    if args.json is not None:
        ig = iglens_viz.IGLens(model, tokenizer)
        lens_info = {}
        for lens in lenses:
            fitted = ig.resolve_lens(lens)
            lens_info[lens] = {
                "kind": str(getattr(fitted, "kind", lens)),
                "fingerprint": str(getattr(fitted, "fingerprint", "")),
                "settings": {k: v for k, v in dict(getattr(fitted, "settings", {})).items()},
            }
        payload = {
            "model": str(getattr(model.config, "_name_or_path", "")),
            "n_blocks": n_blocks,
            "set": "capitals (iglens_viz.studies.prompts, both phrasings, no chat template)",
            "target": "the answer's first token (tokenizer(answer, add_special_tokens=False)[0],"
            " answer with its leading space) at the prompt's last position",
            "limit_countries": args.limit,
            "seed": args.seed,
            "countries": n_countries,
            "prompts": len(items),
            "lenses": lenses,
            "lens_info": lens_info,
            "bootstrap": args.boot,
            "threads": args.threads,
            "seconds": round(seconds, 1),
            "versions": {
                "iglens_viz": iglens_viz.__version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
            "summary": summary,
            "rows": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        rows_text = ",\n".join(json.dumps(_rounded(r), separators=(",", ":")) for r in rows)
        head = json.dumps({k: v for k, v in payload.items() if k != "rows"}, indent=1, default=str)
        args.json.write_text(
            head[:-2] + ',\n "rows": [\n' + rows_text + "\n ]\n}\n", encoding="utf-8"
        )
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
