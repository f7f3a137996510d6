"""Notebooks executed as a reader runs them (nbclient, a real kernel), with limits that a
loaded machine does not reach: they are there so that a hung kernel fails the test.

Measured on the shared 2-core development machine at load 5-7 (``pytest -m gallery``, with the
default model converted and the gallery's lenses fitted beforehand by :mod:`.real_model`): a
notebook's first cell (the kernel's imports) takes 2-4 s; the slowest cell of the gallery is
09_which_lens's lens evaluation, 335 s (the next, 11_whole_answers's, 57 s); the whole gallery
12.5 minutes. A 2-core machine at load 9 is about 1.5 times slower than that, an idle one about
2 times faster. :data:`CELL_S` is more than 10 times the slowest cell as measured here.
"""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

START_S = 600
"""Seconds for the kernel to start (nbclient's default, 60 s, is too close for a loaded machine:
a first cell of imports alone takes 2-4 s here)."""
CELL_S = 3600
"""Seconds one cell may run: more than 10 times the slowest gallery cell (335 s, see above)."""
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
