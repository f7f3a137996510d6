"""What the tests share: one home for every helper and fixture.

* :mod:`.tiny_models` — tiny random models of every family, their tokenizer, and references
  computed with the models' own modules (never with iglens_viz).
* :mod:`.tolerances` — numeric tolerances derived from the dtype and the size of a computation.
* :mod:`.real_model` — the embedded default model, loaded once per run, and the lenses the
  gallery fits (fitted once per run, before any notebook).
* :mod:`.widget_page` — a widget's page end, in process (the messages of its comm).
* :mod:`.kernel` — a started ipykernel and its client, driven as a front end drives it.
* :mod:`.model_files` — tiny model folders and GGUF files written as the loaders read them.
* :mod:`.packaging` — the wheel and sdist built from the checkout, npm hidden.

``tests/conftest.py`` turns the shared ones into fixtures.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (``gallery/``, ``docs/``, ``js/`` and ``iglens_viz/`` are in it)."""

HANG_S = 1800
"""Seconds after which a subprocess, worker thread or kernel that a test waits for counts as
hung, and the test fails. A limit, not a speed check: no such wait in the suite comes near it
on a working machine, loaded or not (the slowest, the resumed 250-step tuned fit of
tests/cli/test_fit_progress.py, runs in under a minute on the shared 2-core machine at load
5-7), so 30 minutes is more than 30 times the longest measured."""
