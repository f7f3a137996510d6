"""docs/figures/gates-vietnam.png: the block-gate game's three ledgers of one token.

The default model's Vietnam chat prompt with its greedy answer, gated at the answer's first
content token (" Ho", the widget's opening position), against "What is the capital of
Italy?" (the answer's subject swapped). Run from the repository root::

    .venv/bin/python docs/figures/make_gate_figure.py
"""

from __future__ import annotations

from pathlib import Path

import iglens_viz as ig
from iglens_viz.protocol.opening import opening_position

OUT = Path(__file__).with_name("gates-vietnam.png")


def main() -> None:
    model, tokenizer = ig.load_model()
    engine = ig.IGLens(model, tokenizer)
    question = "What is the capital of Vietnam?"
    result = engine.attribute(question, chat=True, max_new_tokens=12)
    position = opening_position(result.tokens, result.target_tokens, result.prompt_length - 1)
    ledger = engine.gate_ledger(
        question,
        "What is the capital of Italy?",
        chat=True,
        answer=result.input_ids[result.prompt_length :].tolist(),
        position=position,
    )
    fig = ledger.plot()
    fig.set_size_inches(11, 3.6)
    fig.savefig(OUT, dpi=110, bbox_inches="tight")
    for sentence in ledger.sentences().values():
        print(sentence)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
