"""The ``iglens`` command: attribute a prompt (and the model's answer) and print a table.

``iglens "What is the capital of Vietnam?"`` runs the embedded default model with its chat
template and a short generated answer; ``iglens validate`` runs the causal validation on the
shipped prompt set. User errors print one line and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..adapters import UnsupportedModelError
from .table import attribution_table

EXIT_USER_ERROR = 2


class UserError(Exception):
    """A problem with the command line or its inputs, reported without a traceback."""


def _attribute_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens",
        description="In which layer is each predicted token's probability decided? "
                    "IG-Lens splits p(target) exactly across the model's blocks.",
        epilog="Run `iglens validate --help` for the causal validation of onsets.")
    p.add_argument("prompt", help="the user message (or raw text with --no-chat)")
    p.add_argument("--model", default=None,
                   help="causal LM id or local folder (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--target", default="predicted",
                   help="'predicted' (default), 'next', a token id or a single-token string")
    p.add_argument("--contrast", default=None,
                   help="attribute p(target) - p(contrast); a token id or single-token string")
    p.add_argument("--boundaries", default="all",
                   help="'all' (every block), 'every:K', or a list such as 0,10,20,30")
    p.add_argument("--steps", type=int, default=1, help="interpolation steps per segment")
    p.add_argument("--estimator", choices=["prediction_aware", "riemann"],
                   default="prediction_aware")
    p.add_argument("--position", type=int, action="append", default=None,
                   help="show this position (repeatable; negative counts from the end)")
    p.add_argument("--all-positions", action="store_true",
                   help="show every position, not only the generated answer")
    p.add_argument("--top-k", type=int, default=3,
                   help="largest signed contributions shown per token (default 3)")
    p.add_argument("--generate", type=int, default=None, metavar="N",
                   help="generate N answer tokens (default 16 with chat, 0 with --no-chat)")
    p.add_argument("--no-chat", action="store_true",
                   help="use the prompt as raw text, without the chat template")
    p.add_argument("--json", type=Path, metavar="FILE", help="write all arrays as JSON")
    p.add_argument("--png", type=Path, metavar="FILE",
                   help="write the static figure (heatmap) as PNG")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="write the linked views as one self-contained offline HTML page")
    p.add_argument("--dtype", default=None, help="model dtype, e.g. float32 or bfloat16")
    p.add_argument("--device", default=None, help="model device, e.g. cpu, cuda, auto")
    return p


def _validate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iglens validate",
        description="Causal check of IG-Lens onsets: ablate each block and compare the drop "
                    "in p(target) with the block's contribution, over a prompt set.")
    p.add_argument("--model", default=None, help="causal LM id or local folder")
    p.add_argument("--category", default=None, help="only prompts of this category")
    p.add_argument("--limit", type=int, default=None, help="use at most this many prompts")
    p.add_argument("--mode", choices=["zero", "mean"], default="zero")
    p.add_argument("--csv", type=Path, metavar="FILE", help="write the per-token table as CSV")
    p.add_argument("--png", type=Path, metavar="FILE", help="write the summary plot as PNG")
    return p


def _token_arg(value: str | None):
    """An int when the argument is a number, else the string (a token)."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value


def _load(name, dtype=None, device=None):
    from transformers.utils import logging as hf_logging

    from ..loading import ModelLoadError, load_model

    hf_logging.disable_progress_bar()  # the table is the output; no weight-loading bars
    try:
        return load_model(name, dtype=dtype, device=device)
    except ModelLoadError as err:
        raise UserError(str(err)) from err


def _positions(result, args) -> list[int]:
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
    from ..core import IGLens, boundaries_from_spec

    if args.steps < 1:
        raise UserError(f"--steps must be >= 1, got {args.steps}")
    model, tokenizer = _load(args.model, args.dtype, args.device)
    lens = IGLens(model, tokenizer)
    chat = False if args.no_chat else "auto"
    generate = args.generate if args.generate is not None else (0 if args.no_chat else 16)
    result = lens.attribute(
        args.prompt, target=_token_arg(args.target), contrast=_token_arg(args.contrast),
        boundaries=boundaries_from_spec(args.boundaries, lens.n_blocks), steps=args.steps,
        estimator=args.estimator, chat=chat, max_new_tokens=generate)
    from rich.console import Console
    from rich.text import Text

    # Piped output (files, CI logs) gets a fixed comfortable width instead of rich's 80.
    console = Console(width=None if sys.stdout.isatty() else 110)
    if len(result.answer_positions):
        answer = tokenizer.decode(result.input_ids[result.prompt_length:],
                                  skip_special_tokens=True)
        # The answer is model output: a Text object, so rich never reads it as markup.
        console.print(Text.assemble(("Answer: ", "bold"), answer), highlight=False)
    console.print(attribution_table(result, _positions(result, args), args.top_k))
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), allow_nan=False))
        console.print(f"wrote {args.json}")
    if args.png:
        result.plot_heatmap().savefig(args.png, dpi=130, bbox_inches="tight")
        console.print(f"wrote {args.png}")
    if args.html:
        from ..export.html import to_html

        to_html(result, args.html, selected=_html_selection(result), target_spec=args.target,
                contrast_spec=args.contrast or "", boundary_spec=args.boundaries)
        console.print(f"wrote {args.html}")
    return 0


def _html_selection(result) -> int:
    """The exported page opens on the answer's first token (or the last position)."""
    answer = result.answer_positions
    return int(answer[0]) if len(answer) else len(result.input_ids) - 1


def run_validate(argv: list[str]) -> int:
    """``iglens validate [options]``: onset vs ablation over the shipped prompts."""
    args = _validate_parser().parse_args(argv)
    from ..causal import load_prompts, validate_onset

    prompts = load_prompts(args.category)
    if args.limit is not None:
        prompts = prompts[:args.limit]
    model, tokenizer = _load(args.model)
    result = validate_onset(model, tokenizer, prompts, mode=args.mode)
    print(result.summary().to_string())
    if args.csv:
        result.table.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    if args.png:
        result.plot().savefig(args.png, dpi=130, bbox_inches="tight")
        print(f"wrote {args.png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``iglens`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = run_validate if argv[:1] == ["validate"] else run_attribute
    try:
        return command(argv[1:] if command is run_validate else argv)
    except (UserError, ValueError, UnsupportedModelError, FileNotFoundError) as err:
        print(f"iglens: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
