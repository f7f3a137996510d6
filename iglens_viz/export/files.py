"""Writing output files safely: the whole file or nothing, and a clear error for a bad path."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import IGLensError

__all__ = ["OutputFileError", "check_output_path", "write_atomic"]


class OutputFileError(IGLensError, OSError):
    """An output file cannot be written where it was asked for."""


def check_output_path(path) -> Path:
    """``path`` as a Path, or :class:`OutputFileError` when it is a folder or its folder does
    not exist (so a command can refuse a bad path before doing any work)."""
    path = Path(path)
    if path.is_dir():
        raise OutputFileError(f"{path} is a folder; give a file name such as "
                              f"{path / ('iglens' + (path.suffix or '.out'))}")
    if not path.parent.is_dir():
        raise OutputFileError(f"cannot write {path}: the folder {path.parent} does not exist")
    return path


def write_atomic(path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, renamed over
    ``path`` at the end, so a reader never sees half a file and a failure leaves no trace.

    Raises :class:`OutputFileError` when ``path`` is a folder, its folder does not exist or
    is not writable.
    """
    path = check_output_path(path)
    folder = path.parent
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise OutputFileError(f"cannot write {path}: {err.strerror or err}") from err
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise OutputFileError(f"cannot write {path}: {err.strerror or err}") from err
        raise
    return path
