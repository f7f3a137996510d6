"""Writing output files safely: the whole file or nothing, and a clear error for a bad path;
and proving cached files intact: checksums compared again when a file's stamp changes.

The cache's checks (:func:`checksum_problem`): a file's SHA-256 checksum is recorded when
it is written; a later read compares it again only when the file's stamp — its size,
modification time, change time (not settable) or inode — differs from when its checksum
last matched, as recorded in the folder's ``.iglens_verified.json``
(:data:`VERIFIED_RECORD`). So a file rewritten in place (zeroed, random bytes, one digit
changed, time stamps put back) is hashed and found, while an unchanged file costs one
``stat``. The converted default model (:mod:`iglens_viz.loading.cache`) and the fitted
lenses (:mod:`iglens_viz.lenses.cache`) are checked this way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import IGLensError

__all__ = [
    "VERIFIED_RECORD",
    "OutputFileError",
    "check_output_folder",
    "check_output_path",
    "checksum_problem",
    "record_verified",
    "sha256_file",
    "stat_key",
    "write_atomic",
]

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


# ---------------------------------------------------------------- checksums of cached files

VERIFIED_RECORD = ".iglens_verified.json"
"""In a cache folder: each file's stamp (:func:`stat_key`) when its checksum last matched."""


def sha256_file(path: StrPath) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks (SHA-256 beats BLAKE2b where the CPU has
    SHA extensions: 1.7 s against 3.6 s for the 538 MB weights on a busy 2-core machine)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def stat_key(st: os.stat_result) -> list[int]:
    """A file's stamp, what changes when it is rewritten: size, mtime, ctime (not settable)
    and inode."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


# Checksums proven in this process, for a cache folder where the record cannot be written.
_PROVEN: dict[tuple[str, tuple[int, ...]], str] = {}


def _read_verified(folder: Path) -> dict[str, Any]:
    """The record of checksums already proven in ``folder``; empty when absent or unreadable."""
    try:
        record = json.loads((folder / VERIFIED_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    return files if isinstance(files, dict) else {}


def record_verified(folder: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Add ``entries`` (file name → ``{"stat": stat_key, "sha256": hex}``) to the record of
    proven checksums in ``folder``, replaced atomically; a read-only folder is no error (the
    files are hashed again next time). Two processes writing at once may lose one's entries:
    those files are hashed again, never trusted wrongly."""
    files = {**_read_verified(folder), **entries}
    tmp = folder / f"{VERIFIED_RECORD}.{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(json.dumps({"files": files}))
        tmp.chmod(0o644)
        os.replace(tmp, folder / VERIFIED_RECORD)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def checksum_problem(
    folder: Path, files: Mapping[str, Mapping[str, Any]], *, only_changed: bool = True
) -> str | None:
    """Why a file of ``folder`` does not have the SHA-256 checksum recorded for it, or None.

    ``files`` maps names in ``folder`` to their records (``{"sha256": hex, …}``). With
    ``only_changed`` (every read), only the files whose stamp changed since their checksum
    last matched are hashed (see the module's text); else every file is. Each match is
    recorded (:func:`record_verified`)."""
    proven = _read_verified(folder) if only_changed else {}
    updated: dict[str, dict[str, Any]] = {}
    for name, record in sorted(files.items()):
        path = folder / name
        try:
            key = stat_key(path.stat())
            seen = proven.get(name)
            memo = _PROVEN.get((str(path.absolute()), tuple(key)))
            if only_changed and (
                (
                    isinstance(seen, dict)
                    and seen.get("stat") == key
                    and seen.get("sha256") == record.get("sha256")
                )
                or memo == record.get("sha256")
            ):
                continue
            digest = sha256_file(path)
            after = stat_key(path.stat())
        except OSError as err:
            return f"{name} cannot be read ({err.strerror or err})"
        if digest != record.get("sha256"):
            return f"{name} does not match the sha256 checksum recorded when it was written"
        if after == key:  # not rewritten while it was read
            updated[name] = {"stat": key, "sha256": digest}
            _PROVEN[(str(path.absolute()), tuple(key))] = digest
    if updated:
        record_verified(folder, updated)
    return None
