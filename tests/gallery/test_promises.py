"""A gallery cell that announces a figure, a table or a widget shows one.

:func:`~tests.support.promises.unkept_promises` reads an *executed* notebook: a markdown
cell announces what the next code cell shows by its words (inline code aside: ``plot_token``
is a name, not a promise) or by ending on a colon. The executed gallery is checked in
``test_notebooks.py``'s run of each notebook, in the inline backend a reader's kernel has;
here the rule itself is tested on small notebooks built for it, each kind kept and broken.
"""

from __future__ import annotations

import base64

import nbformat
import pytest

from tests.support import HANG_S, ROOT
from tests.support.promises import WIDGET, unkept_promises


def notebook(markdown: str, *outputs: dict) -> nbformat.NotebookNode:
    """A two-cell notebook: ``markdown``, then a code cell with ``outputs``."""
    code = nbformat.v4.new_code_cell("x")
    code.outputs = [nbformat.from_dict(o) for o in outputs]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), code])


PNG = {
    "output_type": "display_data",
    "data": {"image/png": "iVBOR", "text/plain": "<Figure>"},
    "metadata": {},
}
HTML_TABLE = {
    "output_type": "execute_result",
    "execution_count": 1,
    "data": {"text/html": "<table></table>", "text/plain": "df"},
    "metadata": {},
}
VIEW = {
    "output_type": "display_data",
    "data": {WIDGET[0]: {"model_id": "m"}, "image/png": "iVBOR", "text/plain": "w"},
    "metadata": {},
}
PRINTED = {"output_type": "stream", "name": "stdout", "text": "3\n"}
FIGURE_REPR = {
    "output_type": "execute_result",
    "execution_count": 1,
    "data": {"text/plain": "<Figure size 640x480 with 2 Axes>"},
    "metadata": {},
}


@pytest.mark.parametrize(
    ("markdown", "outputs", "unkept"),
    [
        ("## A static figure\n\nThe detail view with matplotlib.", [], True),
        ("## A static figure\n\nThe detail view with matplotlib.", [FIGURE_REPR], True),  # Agg
        ("## A static figure\n\nThe detail view with matplotlib.", [PNG], False),
        ("Its detail view:", [], True),
        ("Its detail view:", [PRINTED], False),
        ("The table lists each token's halves.", [PRINTED], True),
        ("The table lists each token's halves.", [HTML_TABLE], False),
        ("The widget below explores the conversation.", [PNG], True),
        ("The widget below explores the conversation.", [VIEW], False),
        ("The widget does not show here: see the figure at the end.", [VIEW], False),
        ("`plot_token` shades them.", [], False),  # a name in code is no promise
        ("Every array is plain numpy.", [], False),
        (
            "The paragraph below is printed from the table. It says when they agree.",
            [PRINTED],
            False,
        ),
        ("The table below ranks them. Read it row by row.", [PRINTED], True),  # "X below"
        ("`out=` would stream the table to Parquet. Twelve prompts.", [PRINTED], False),
        ("# Quick start\n\nOpens the widget and exports it:", [], False),  # the title cell
    ],
)
def test_a_promise_is_kept_by_its_kind_of_output(markdown, outputs, unkept):
    assert bool(unkept_promises(notebook(markdown, *outputs))) is unkept


def test_only_the_next_code_cell_keeps_a_promise():
    nb = notebook("A figure:", PNG)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("An aside."))
    assert unkept_promises(nb) == []  # markdown then markdown: the aside announces nothing
    nb.cells.insert(1, nbformat.v4.new_code_cell("y"))  # an empty code cell right after it
    assert unkept_promises(nb) == ["cell 0 announces ['figure']; cell 1 shows nothing"]


def test_a_plot_shows_itself_in_a_kernel_without_pyplot():
    """``att.plot_token(i)`` as a cell's last line shows a picture in a fresh kernel that
    never imported pyplot (IPython shows a bare matplotlib Figure as text there), as in
    ``01_quickstart.ipynb``: the notebook's own kernel, run by nbclient."""
    import nbclient

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import sys\n"
                "import iglens_viz\n"
                "from tests.support.tiny_models import random_ids, tiny_model, tiny_tokenizer\n"
                "att = iglens_viz.IGLens(tiny_model('llama'), tiny_tokenizer())"
                ".attribute(random_ids(6, seed=1))"
            ),
            nbformat.v4.new_code_cell("att.plot_token(2)"),
            nbformat.v4.new_code_cell("print('matplotlib.pyplot' in sys.modules)"),
        ]
    )
    nbclient.NotebookClient(
        nb, timeout=HANG_S, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    assert nb.cells[2].outputs[0]["text"] == "False\n"  # pyplot never loaded
    shown = nb.cells[1].outputs[0]["data"]
    assert "image/png" in shown, shown
    png = base64.b64decode(shown["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
