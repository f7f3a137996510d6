"""Writing output files safely: the whole file or nothing, and a clear error for a bad path."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .errors import IGLensError

__all__ = ["OutputFileError", "check_output_folder", "check_output_path", "write_atomic"]

StrPath = str | os.PathLike[str]
"""A file or folder path as the functions here take it."""


class OutputFileError(IGLensError, OSError):
    """An output file cannot be written where it was asked for."""


def _writable(folder: Path) -> bool:
    # os.access answers for this process's user (root passes permission bits) and sees a
    # read-only file system (EROFS); files are written as a temporary file plus a rename,
    # so only the folder's permission matters, never the old file's.
    return os.access(folder, os.W_OK | os.X_OK)


def check_output_path(path: StrPath) -> Path:
    """``path`` as a Path, or :class:`OutputFileError` when it is a folder, its folder does
    not exist or is not writable, or its name is too long for the file system (so a command
    can refuse a bad path before doing any work)."""
    path = Path(path)
    try:
        _check_output_path(path)
    except OSError as err:  # a stat that fails otherwise than "no such file"
        raise OutputFileError(f"cannot write {path}: {err.strerror or err}") from None
    return path


def _check_output_path(path: Path) -> None:
    if not path.parent.is_dir():
        raise OutputFileError(f"cannot write {path}: the folder {path.parent} does not exist")
    try:
        longest = os.pathconf(path.parent, "PC_NAME_MAX")
    except (OSError, ValueError):  # no such limit to ask for here
        longest = 255
    size = len(path.name.encode("utf-8", "surrogateescape"))
    if size > longest:  # before any stat of it, which would fail with ENAMETOOLONG
        raise OutputFileError(
            f"cannot write {path}: its name is {size} bytes, longer than "
            f"the {longest} this file system allows; choose a shorter one"
        )
    if path.is_dir():
        raise OutputFileError(
            f"{path} is a folder; give a file name such as "
            f"{path / ('iglens' + (path.suffix or '.out'))}"
        )
    if not _writable(path.parent):
        raise OutputFileError(
            f"cannot write {path}: the folder {path.parent} is not writable; choose another path"
        )


def check_output_folder(folder: StrPath, files: tuple[str, ...] = ()) -> Path:
    """``folder`` as a Path, or :class:`OutputFileError` when it cannot become a writable
    folder: it is a file, it is not writable, or it does not exist and its nearest existing
    parent is a file or not writable. ``files`` (names inside ``folder``) must not be
    folders; a subfolder among them (a name ending in ``/``) must be a writable folder if it
    exists. Nothing is created."""
    folder = Path(folder)
    try:
        _check_output_folder(folder, files)
    except OSError as err:  # a stat that fails otherwise than "no such file"
        raise OutputFileError(f"cannot use the folder {folder}: {err.strerror or err}") from None
    return folder


def _check_output_folder(folder: Path, files: tuple[str, ...]) -> None:
    if folder.exists() and not folder.is_dir():
        raise OutputFileError(f"{folder} is a file, not a folder; give a folder path")
    if folder.is_dir():
        if not _writable(folder):
            raise OutputFileError(f"the folder {folder} is not writable; choose another one")
    else:
        parent = folder.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise OutputFileError(f"cannot create the folder {folder}: {parent} is a file")
        if not _writable(parent):
            raise OutputFileError(
                f"cannot create the folder {folder}: {parent} is not "
                f"writable; choose another folder"
            )
    for name in files:
        path = folder / name
        if name.endswith("/"):
            if path.exists() and not path.is_dir():
                raise OutputFileError(
                    f"{path} is a file where the folder {name} goes; "
                    f"move it away or choose another folder"
                )
            if path.is_dir() and not _writable(path):
                raise OutputFileError(f"the folder {path} is not writable; choose another folder")
        elif path.is_dir():
            raise OutputFileError(
                f"{path} is a folder where the file {name} goes; move it "
                f"away or choose another folder"
            )


def write_atomic(path: StrPath, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, renamed over
    ``path`` at the end, so a reader never sees half a file and a failure leaves no trace.

    Raises :class:`OutputFileError` when ``path`` is a folder, its folder does not exist or
    is not writable, or its name is too long (see :func:`check_output_path`).
    """
    path = check_output_path(path)
    folder = path.parent
    # A short temporary name (".<8 hex of the name>-<random>.tmp", 22 bytes): one made
    # from the file's own name would pass the 255-byte limit of a long, legal name.
    tag = hashlib.sha1(path.name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{tag}-", suffix=".tmp", dir=folder)
    except OSError as err:
        raise OutputFileError(f"cannot write {path}: {err.strerror or err}") from err
    try:
        if isinstance(data, bytes):
            with os.fdopen(fd, "wb") as binary:
                binary.write(data)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as text:
                text.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise OutputFileError(f"cannot write {path}: {err.strerror or err}") from err
        raise
    return path
