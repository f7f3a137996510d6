"""Notebooks executed as a reader runs them (nbclient, a real kernel), with limits that a
loaded machine does not reach: they are there so that a hung kernel fails the test.

Measured on the idle 2-core development machine (see :data:`CELL_S`): a kernel starts in
2–5 s, and the slowest gallery cell, with the default model converted and the gallery's lenses
fitted beforehand (:mod:`.real_model`), takes under 3 minutes. A 2-core machine at load 9 runs
about 5 times slower; each limit below is at least 10 times the idle measurement.
"""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

START_S = 600
"""Seconds for the kernel to start (nbclient's default, 60 s, is 12–30 times the idle start:
too close for a loaded machine)."""
CELL_S = 3600
"""Seconds one cell may run: more than 10 times the slowest gallery cell measured idle."""
IOPUB_S = 120
"""Seconds to wait, after a cell's reply, for the rest of its output (nbclient's default, 4 s,
can cut a loaded kernel's figure off)."""


def run_notebook(nb: nbformat.NotebookNode, cwd: Path, kernel_name: str = "python3") -> None:
    """Execute ``nb`` in place in a new ``kernel_name`` kernel started in ``cwd``; a cell that
    raises fails (``nbclient.exceptions.CellExecutionError``)."""
    client = nbclient.NotebookClient(
        nb,
        kernel_name=kernel_name,
        timeout=CELL_S,
        startup_timeout=START_S,
        iopub_timeout=IOPUB_S,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
