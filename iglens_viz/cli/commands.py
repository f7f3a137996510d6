"""The ``iglens`` command: attribute a prompt (and the model's answer) and print a table.

``iglens "What is the capital of Vietnam?"`` runs the embedded default model with its chat
template and a short generated answer; ``iglens validate`` runs the causal validation on the
shipped prompt set (``iglens -- validate`` attributes the word "validate"). User errors —
every :class:`~iglens_viz.errors.IGLensError` — print one line and exit with status 2,
never a traceback; Ctrl-C prints one line (naming the checkpoint a lens fit keeps) and exits
with status 130. A lens fitted on first use (``--lens tuned``) prints its progress on
stderr. The flags become one
:class:`~iglens_viz.core.request.AttributionRequest`, parsed as the widget's controls are.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.request import ESTIMATORS
from ..errors import IGLensError
from ..views.token_format import visible_text
from .arguments import count_at_least
from .table import answer_table, attribution_table, gate_table, mode_line

if TYPE_CHECKING:
    from ..core.lens import IGLens
    from ..core.result import AttributionResult
    from ..lenses.fit import ProgressPrinter

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a command it interrupted."""


class UserError(IGLensError):
    """A problem with the command line or its inputs, reported without a traceback."""


def _nonempty(text: str) -> str:
    """An argparse type: any text but the empty string (an unset shell variable, likely)."""
    if text == "":
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _attribute_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens",
        description="In which block does each predicted token's probability become readable? "
        "IG-Lens splits p(target) exactly across the model's blocks: each "
        "block's contribution is the change in what the final norm and head can "
        "read, not the block's total effect through later blocks.",
        epilog="Run `iglens study --help` for the study of onsets against ablation and "
        "baselines over many prompts (`iglens validate --help`: the older check). To "
        "attribute a prompt that starts with '-' or is the word 'study', "
        "'validate', 'fit-lens' or 'export-site', put `--` before it: `iglens -- study`. "
        "`iglens fit-lens --help`: fit a lens for --lens. `iglens export-site --help`: the "
        "kernel-free site's files.",
    )
    p.add_argument("prompt", help="the user message (or raw text with --no-chat)")
    p.add_argument(
        "--model",
        default=None,
        help="causal LM id or local folder (default: embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument(
        "--name",
        type=_nonempty,
        default=None,
        help="the model's name in the table and the exported page (default: the "
        "model id, or a local folder's last part)",
    )
    p.add_argument(
        "--target",
        type=_nonempty,
        default=None,
        help="'predicted' (default), 'next', a token id (digits only) or a "
        "single-token string (' 4', with its space, is a token, not id 4)",
    )
    p.add_argument(
        "--contrast",
        type=_nonempty,
        default=None,
        help="attribute p(target) - p(contrast); a token id or single-token string",
    )
    p.add_argument(
        "--answer",
        type=_nonempty,
        default=None,
        metavar="TEXT",
        help="a whole answer to teacher-force after the prompt (e.g. ' Hanoi', with its "
        "space): prints its log-probability ledger across the blocks (no generation)",
    )
    p.add_argument(
        "--vs",
        type=_nonempty,
        default=None,
        metavar="TEXT",
        help="a second answer: the ledger of log p(answer) - log p(vs), block by block",
    )
    p.add_argument(
        "--boundaries",
        default="all",
        help="'all' (every block), 'every:K', 'sublayer' (every attention and MLP "
        "output), or a list such as 0,10,20,30",
    )
    p.add_argument("--steps", default="1", help="interpolation steps per segment (1-1000)")
    p.add_argument("--estimator", choices=ESTIMATORS, default="prediction_aware")
    p.add_argument(
        "--position",
        type=int,
        action="append",
        default=None,
        help="show this position (repeatable; negative counts from the end)",
    )
    p.add_argument(
        "--all-positions",
        action="store_true",
        help="show every position, not only the generated answer",
    )
    p.add_argument(
        "--top-k",
        type=count_at_least(0),
        default=3,
        help="largest signed contributions shown per token (default 3)",
    )
    p.add_argument(
        "--components",
        action="store_true",
        help="also split the shown tokens' contributions over attention heads and "
        "MLPs, and show the largest shares",
    )
    p.add_argument(
        "--generate",
        type=count_at_least(0),
        default=None,
        metavar="N",
        help="generate N answer tokens (default 16 with chat, 0 with --no-chat)",
    )
    p.add_argument(
        "--no-chat",
        action="store_true",
        help="use the prompt as raw text, without the chat template",
    )
    p.add_argument(
        "--lens",
        type=_nonempty,
        default=None,
        metavar="LENS",
        help="the coordinates every state is read in: logit (default, the raw logit lens), "
        "shortcut, tuned, jacobian (fitted on first use and cached) or a lens FILE "
        "(from `iglens fit-lens`, jlens, or a tuned-lens folder)",
    )
    p.add_argument(
        "--counterfactual",
        type=_nonempty,
        default=None,
        metavar="TEXT",
        help="the same question about another subject, as many tokens long (e.g. 'What is "
        "the capital of Italy?'): also print the block-gate game's three ledgers of one "
        "token — where its answer becomes readable, where the answer-specific information "
        "arrives (patching) and each block's shared credit",
    )
    p.add_argument(
        "--gate-position",
        type=int,
        default=None,
        metavar="N",
        help="the position the game gates (default: the answer's first content token, or "
        "the last position without an answer)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="write all arrays as JSON")
    p.add_argument(
        "--png", type=Path, metavar="FILE", help="write the static figure (heatmap) as PNG"
    )
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write the linked views as one self-contained offline HTML page",
    )
    _add_model_options(p)
    return p


def _add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default=None, help="model dtype, e.g. float32 or bfloat16")
    p.add_argument("--device", default=None, help="model device, e.g. cpu, cuda, auto")


def _validate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens validate",
        description="Causal check of IG-Lens onsets: ablate each block and compare the drop "
        "in p(target) with the block's contribution, over a prompt set.",
    )
    p.add_argument("--model", default=None, help="causal LM id or local folder")
    p.add_argument("--category", default=None, help="only prompts of this category")
    p.add_argument(
        "--limit", type=count_at_least(1), default=None, help="use at most this many prompts"
    )
    # Zero only: mean ablation needs a reference set per prompt (`iglens study --modes mean`).
    p.add_argument("--mode", choices=("zero",), default="zero")
    p.add_argument("--csv", type=Path, metavar="FILE", help="write the per-token table as CSV")
    p.add_argument("--png", type=Path, metavar="FILE", help="write the summary plot as PNG")
    _add_model_options(p)
    return p


COMMANDS_GROUP = "iglens_viz.commands"
"""The entry-point group where a sibling package registers an ``iglens`` subcommand: a
callable taking the arguments after the command's name and returning the exit status."""

INSTALL_HINT = {
    "study": "`iglens study` comes with the iglens_study package: install it with "
    "`pip install ./iglens_study` from a checkout of this repository",
}
"""What to install for each command another package provides."""


def plugin_command(name: str) -> Callable[[list[str]], int]:
    """The ``iglens NAME`` command another package registers in :data:`COMMANDS_GROUP`;
    a :class:`UserError` saying how to install it when no installed package does."""
    from importlib.metadata import entry_points

    found = list(entry_points(group=COMMANDS_GROUP, name=name))
    if not found:
        raise UserError(INSTALL_HINT.get(name, f"no installed package provides `iglens {name}`"))
    command: Callable[[list[str]], int] = found[0].load()
    return command


def _load(name: str | None, dtype: str | None = None, device: str | None = None) -> tuple[Any, Any]:
    from transformers.utils import logging as hf_logging

    from ..loading import load_model

    hf_logging.disable_progress_bar()  # the table is the output; no weight-loading bars
    return load_model(name, dtype=dtype, device=device)


def _check_outputs(*paths: Path | None) -> None:
    """Refuse bad output paths before any work is done (and before any file is written)."""
    from ..files import check_output_path

    for path in paths:
        if path is not None:
            check_output_path(path)


def _component_split(
    engine: IGLens, result: AttributionResult, positions: list[int]
) -> tuple[list[str], np.ndarray]:
    """The component names and the ``(P, n, C)`` shares at ``positions``, on the result's
    own component axis (a fitted lens adds ``coordinate``)."""
    split = engine.with_components(result, positions)
    names, shares = split.component_names, split.component_shares
    assert names is not None and shares is not None  # with_components always splits
    return names, shares[positions]


def _positions(result: AttributionResult, args: argparse.Namespace) -> list[int]:
    T = len(result.input_ids)
    if args.position:
        out = []
        for p in args.position:
            if not -T <= p < T:
                raise UserError(f"--position {p} is outside the {T} positions")
            out.append(p % T)
        return out
    if args.all_positions or not len(result.answer_positions):
        return list(range(T))
    return result.answer_positions.tolist()


def run_attribute(argv: list[str]) -> int:
    """``iglens PROMPT [options]``."""
    args = _attribute_parser().parse_args(argv)
    from rich.console import Console
    from rich.text import Text

    from ..core import AttributionRequest, IGLens
    from ..files import write_atomic

    default_generate = 0 if args.no_chat or args.answer is not None else 16
    generate = args.generate if args.generate is not None else default_generate
    request = AttributionRequest.from_controls(
        args.prompt,
        {
            "target": args.target,
            "contrast": args.contrast,
            "boundaries": args.boundaries,
            "estimator": args.estimator,
            "steps": args.steps,
        },
        chat=False if args.no_chat else "auto",
        max_new_tokens=generate,
        answer=args.answer,
        versus=args.vs,
    )
    _check_outputs(args.json, args.png, args.html)
    if args.lens is not None:
        request = _with_lens(request, args.lens)
    model, tokenizer = _load(args.model, args.dtype, args.device)
    engine = IGLens(model, tokenizer, name=args.name)
    from ..lenses.fit import fit_progress

    with fit_progress(fit_printer()):  # a lens fitted on first use shows its progress
        result = engine.run(request)
    positions = _positions(result, args)
    split = _component_split(engine, result, positions) if args.components else None

    # Piped output (files, CI logs) gets a fixed comfortable width instead of rich's 80.
    console = Console(width=None if sys.stdout.isatty() else 110, highlight=False)
    console.print(Text(mode_line(result, tokenizer)))
    if len(result.answer_positions):
        answer = tokenizer.decode(
            result.input_ids[result.prompt_length :], skip_special_tokens=True
        )
        # Model output is untrusted: control characters (ESC sequences that retitle or clear
        # the terminal, OSC 8 links) and bidi overrides are printed as visible escapes, and
        # it is a Text object, so rich never reads it as markup either.
        console.print(Text.assemble(("Answer: ", "bold"), visible_text(answer)))
    console.print(
        attribution_table(
            result,
            positions,
            args.top_k,
            split,
        )
    )
    if result.answer is not None:
        console.print(answer_table(result, args.top_k))
    gates = _gate_ledger(engine, result, args) if args.counterfactual is not None else None
    if gates is not None:
        console.print(gate_table(gates, args.counterfactual))
    written = []
    if args.json:
        out = result.to_dict()
        if split is not None:
            out["components"] = {
                "names": split[0],
                "positions": positions,
                "shares": _json_shares(split[1]),
            }
        if gates is not None:
            out["gates"] = gates.to_dict()
        written.append(write_atomic(args.json, json.dumps(out, allow_nan=False)))
    if args.png:
        png = io.BytesIO()
        result.plot_heatmap().savefig(png, format="png", dpi=130, bbox_inches="tight")
        written.append(write_atomic(args.png, png.getvalue()))
    if args.html:
        result.to_html(args.html)
        written.append(args.html)
    for path in written:
        console.print(Text(f"wrote {path}"))
    return 0


def _gate_ledger(engine: IGLens, result: AttributionResult, args: argparse.Namespace) -> Any:
    """The block-gate game of ``--counterfactual`` at ``--gate-position`` (default: the
    position the widget opens on), the result's prompt and answer as they were attributed."""
    from ..protocol.opening import opening_position

    T = len(result.input_ids)
    if args.gate_position is None:
        start = (result.prompt_length or T) - 1
        position = opening_position(result.tokens, result.target_tokens, start)
    elif -T <= args.gate_position < T:
        position = args.gate_position % T
    else:
        raise UserError(f"--gate-position {args.gate_position} is outside the {T} positions")
    answer = result.input_ids[result.prompt_length or T :].tolist()
    return engine.gate_ledger(
        args.prompt,
        args.counterfactual,
        chat=result.request.chat,
        answer=answer or None,
        position=position,
    )


def _with_lens(request: Any, spec: str) -> Any:
    """``request`` reading its states through the lens ``spec`` (the core resolves it)."""
    import dataclasses

    if "lens" not in {f.name for f in dataclasses.fields(request)}:
        if spec == "logit":
            return request
        raise UserError(
            f"--lens {spec}: this build's attribution core has no lens= yet; "
            f"only --lens logit (the default) works"
        )
    return request.replace(lens=spec)


def _fit_lens_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens fit-lens",
        description="Fit a lens (the coordinates IG-Lens reads every state in) on a model "
        "and save it as one .safetensors file, for `iglens --lens FILE` or "
        "iglens_viz.load_lens. Without --texts it fits on the model's own samples from "
        "shipped openings (offline, reproducible).",
    )
    p.add_argument("--kind", required=True, choices=("shortcut", "tuned", "jacobian"))
    p.add_argument("--model", default=None, help="causal LM id or local folder")
    p.add_argument(
        "--texts",
        type=Path,
        default=None,
        metavar="FILE",
        help="a UTF-8 text file, one fitting text per line (blank lines skipped)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="FILE", help="the lens file")
    p.add_argument("--ridge", type=float, default=None, help="shortcut: ridge term (default 0)")
    p.add_argument(
        "--steps", type=count_at_least(0), default=None, help="tuned: steps (default 250)"
    )
    p.add_argument("--seed", type=count_at_least(0), default=None, help="tuned: seed (default 0)")
    p.add_argument(
        "--evaluate",
        action="store_true",
        help="print the per-depth KL and top-1 agreement on the held-out corpus",
    )
    _add_model_options(p)
    return p


def _read_texts(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read the texts in {path}: {err}") from None
    texts = [line for line in lines if line.strip()]
    if not texts:
        raise UserError(f"{path} holds no text (one fitting text per line)")
    return texts


def run_fit_lens(argv: list[str]) -> int:
    """``iglens fit-lens --kind K [--model M] [--texts FILE] --out FILE``."""
    args = _fit_lens_parser().parse_args(argv)
    from ..lenses import evaluate_lens, fit_lens, save_lens

    texts = _read_texts(args.texts) if args.texts is not None else None
    options: dict[str, Any] = {}
    for name, value, kinds in (
        ("ridge", args.ridge, ("shortcut",)),
        ("steps", args.steps, ("tuned",)),
        ("seed", args.seed, ("tuned",)),
    ):
        if value is not None:
            if args.kind not in kinds:
                raise UserError(f"--{name} is for --kind {' or '.join(kinds)}, not {args.kind}")
            options[name] = value
    _check_outputs(args.out)
    model, tokenizer = _load(args.model, args.dtype, args.device)
    lens = fit_lens(model, tokenizer, args.kind, texts, progress=fit_printer(), **options)
    save_lens(lens, args.out)
    if args.evaluate:
        print(evaluate_lens(lens, model, tokenizer).to_frame().to_string(index=False))
    print(f"wrote {args.out}")
    return 0


def _json_shares(shares: np.ndarray) -> list[Any]:
    """The shares as nested lists, None where not finite (JSON has no NaN)."""
    out = shares.astype(object)
    out[~np.isfinite(shares)] = None
    return out.tolist()


def run_validate(argv: list[str]) -> int:
    """``iglens validate [options]``: onset vs ablation over the shipped prompts."""
    args = _validate_parser().parse_args(argv)
    from ..causal import load_prompts, validate_onset
    from ..files import write_atomic

    prompts = load_prompts(args.category)
    if args.limit is not None:
        prompts = prompts[: args.limit]
    _check_outputs(args.csv, args.png)
    model, tokenizer = _load(args.model, args.dtype, args.device)
    result = validate_onset(model, tokenizer, prompts, mode=args.mode)
    print(result.summary().to_string())
    if args.csv:
        write_atomic(args.csv, result.table.to_csv(index=False))
        print(f"wrote {args.csv}")
    if args.png:
        png = io.BytesIO()
        result.plot().savefig(png, format="png", dpi=130, bbox_inches="tight")
        write_atomic(args.png, png.getvalue())
        print(f"wrote {args.png}")
    return 0


def _export_site_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens export-site",
        description="Write the kernel-free site's folder: the model's ONNX graphs and weight "
        "parts (each at most 48 MiB), its tokenizer and chat template, and manifest.json "
        "(every file's size and sha256), the page that runs them in the browser, and the "
        "pre-computed lessons it shows at first paint. Needs pip install 'iglens_viz[site]'; "
        "takes minutes for the default model.",
    )
    p.add_argument("directory", type=Path, metavar="DIR", help="a new or empty folder")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it is not empty")
    p.add_argument("--model", default=None, help="causal LM id or local folder")
    p.add_argument("--name", type=_nonempty, default=None, help="the model's name in the manifest")
    p.add_argument(
        "--top-k", type=count_at_least(1), default=5, help="top tokens per row (default 5)"
    )
    lessons = p.add_mutually_exclusive_group()
    lessons.add_argument(
        "--lesson",
        action="append",
        type=_nonempty,
        metavar="QUESTION",
        help="a pre-computed lesson (chat, 12 new tokens); repeat for several (default: "
        '"What is the capital of Vietnam?" when the tokenizer has a chat template)',
    )
    lessons.add_argument("--no-lessons", action="store_true", help="ship no lessons")
    return p


def run_export_site(argv: list[str]) -> int:
    """``iglens export-site DIR [--overwrite] [--model M] [--lesson Q … | --no-lessons]``: the
    site's folder, then its files and sizes."""
    args = _export_site_parser().parse_args(argv)
    from ..export.site import export_site, site_files

    def report(step: Any) -> None:
        print(f"iglens: export-site: {step}", file=sys.stderr, flush=True)

    model, tokenizer = _load(args.model) if args.model is not None else (None, None)
    manifest = export_site(
        args.directory,
        model,
        tokenizer,
        name=args.name,
        top_k=args.top_k,
        overwrite=args.overwrite,
        progress=report,
        lessons=() if args.no_lessons else args.lesson,
    )
    files = site_files(manifest)
    width = max(len(path) for path, _ in files)
    for path, size in files:
        print(f"{path:<{width}}  {size / 1e6:9.3f} MB")
    total = sum(size for _, size in files)
    print(f"{'total':<{width}}  {total / 1e6:9.3f} MB")
    where = visible_text(str(args.directory), keep="")
    print(f"wrote {where} ({visible_text(manifest['model']['name'], keep='')})")
    return 0


@functools.lru_cache(maxsize=1)
def fit_printer() -> ProgressPrinter:
    """The one printer of this process's lens-fit progress lines (stderr)."""
    from ..lenses.fit import ProgressPrinter

    return ProgressPrinter()


def _interrupted(err: KeyboardInterrupt) -> int:
    """Ctrl-C: one line, naming the checkpoint a lens fit kept, and status 130."""
    from ..lenses.fit import kept_checkpoint

    fit_printer().end_line()
    kept = kept_checkpoint(err)
    line = "iglens: interrupted"
    if kept is not None:
        line += (
            f": {kept} is kept in {visible_text(str(kept.path), keep='')}; run the same command "
            f"again to resume"
        )
    print(line, file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _undecodable(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps such bytes as surrogates)."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return arg.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``iglens`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        bad = _undecodable(argv)
        if bad is not None:
            raise UserError(f"the argument {bad} is not valid UTF-8 text")
        if argv[:1] == ["validate"]:
            return run_validate(argv[1:])
        if argv[:1] == ["study"]:
            return plugin_command("study")(argv[1:])
        if argv[:1] == ["fit-lens"]:
            return run_fit_lens(argv[1:])
        if argv[:1] == ["export-site"]:
            return run_export_site(argv[1:])
        return run_attribute(argv)
    except IGLensError as err:  # messages may quote a model name or a token: made visible
        fit_printer().end_line()
        print(f"iglens: error: {visible_text(str(err))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as err:
        return _interrupted(err)
    except SystemExit as done:  # argparse: --help (0) or a usage error (2, already printed)
        return done.code if isinstance(done.code, int) else EXIT_USER_ERROR
