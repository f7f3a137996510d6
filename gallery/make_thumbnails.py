"""Execute the gallery notebooks top to bottom and refresh their thumbnails.

Each notebook saves its static figure at the end: to the committed
``thumbnails/<notebook>.png`` only when ``IGLENS_WRITE_THUMBNAILS=1``, which this script sets
for the kernels it starts (otherwise, as when a reader runs a notebook, to a scratch folder:
``$IGLENS_GALLERY_OUT``, else ``iglens_gallery`` in the system's temporary folder). The
notebooks themselves are left unchanged: they are committed without outputs.

    python gallery/make_thumbnails.py                 # every notebook
    python gallery/make_thumbnails.py 02 05           # those whose name starts with 02 / 05
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

GALLERY = Path(__file__).resolve().parent


def notebooks(prefixes=()) -> list[Path]:
    """The gallery's notebooks in order, optionally only those starting with a prefix."""
    found = sorted(GALLERY.glob("[0-9][0-9]_*.ipynb"))
    if prefixes:
        found = [p for p in found if p.name.startswith(tuple(prefixes))]
    return found


def execute(path: Path, timeout: int = 600) -> float:
    """Run one notebook in a python3 kernel with cwd = gallery/; returns the seconds taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(GALLERY)}}
    ).execute()
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    os.environ["IGLENS_WRITE_THUMBNAILS"] = "1"  # the kernels inherit it: refresh on purpose
    for path in notebooks(argv):
        seconds = execute(path)
        print(f"{path.name}: {seconds:.1f} s -> thumbnails/{path.stem}.png", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
