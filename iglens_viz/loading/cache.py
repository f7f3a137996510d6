"""The iglens_viz cache: where it is, and the record that proves a converted folder intact.

The conversion is written into a temporary folder beside the target and renamed into place
when done. Its last file, ``iglens_source.json``, records the size and SHA-256 checksum of
every file in the folder. Every load checks that every file still has those bytes: the sizes
always, and the checksum of each file whose size, modification time, change time or inode
differs from when its checksum last matched (recorded in ``.iglens_verified.json``; the
mechanism is :func:`iglens_viz.files.checksum_problem`, shared with the lens cache). So a
file rewritten in place (zeroed, random bytes, one digit changed) is hashed and found, while
an unchanged folder costs one ``stat`` per file: hashing the 538 MB of weights takes 0.4 s of
CPU with SHA extensions and several seconds on a busy or slow machine, against ~3 s for a
first load in a process. Only damage that changes no file's metadata (bit rot under the file
system) goes unseen on load; all checksums are compared again when loading the folder fails,
and on demand with :func:`verify_default_model`. A damaged folder is converted again.

A temporary folder left behind by a killed conversion (``.<name>.tmp-*``) is removed on the
next load of the default model, once the process named in its owner file is gone (checked on
the same host), or, with no owner file, once nothing in it changed for two minutes, or once
nothing in it changed for an hour.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Literal

from ..files import VERIFIED_RECORD, checksum_problem, record_verified, sha256_file, stat_key

MARKER = "iglens_source.json"  # written last inside the cache folder: proof it is complete
_MARKER_FORMAT = 2  # 2: the marker lists every file with its size and sha256
OWNER = ".iglens_owner.json"  # inside a temporary conversion folder: the process writing it
OWN_FILES = (MARKER, OWNER, VERIFIED_RECORD)  # iglens_viz's bookkeeping, not listed in the marker
_STALE_TMP_S = 3600  # a temporary conversion folder unchanged this long is abandoned
# A conversion writes its owner file right after creating its folder, so a folder without one
# that has not changed for this long was left by a killed process (or an older iglens_viz).
_NO_OWNER_STALE_S = 120

_Checksums = Literal["changed", "all", "sizes"]
"""Which checksums a cache check compares (see :func:`cache_problem`)."""


# --------------------------------------------------------------------------- cache location


def cache_dir() -> Path:
    """The iglens_viz cache directory (not created here).

    ``$IGLENS_CACHE`` if set; otherwise the platform's user cache directory:
    ``$XDG_CACHE_HOME/iglens_viz`` or ``~/.cache/iglens_viz`` on Linux,
    ``~/Library/Caches/iglens_viz`` on macOS, ``%LOCALAPPDATA%\\iglens_viz\\Cache`` on Windows.
    """
    override = os.environ.get("IGLENS_CACHE")
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "iglens_viz" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "iglens_viz"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "iglens_viz"


# ------------------------------------------------------------------ marker: sizes and checksums


def _write_marker(folder: Path, gguf_path: Path) -> None:
    """Write ``iglens_source.json`` (last): the source, and every file's size and sha256.

    The files are also made readable by everyone (0o644), as the folder is (0o755). The owner
    file stays until the folder is renamed into place, so a process killed while this hashes
    leaves a folder that the next load knows to be abandoned.
    """
    files, verified = {}, {}
    for path in sorted(folder.iterdir()):
        if path.name in OWN_FILES or not path.is_file():
            continue
        path.chmod(0o644)
        digest = sha256_file(path)
        files[path.name] = {"bytes": path.stat().st_size, "sha256": digest}
        verified[path.name] = {"stat": stat_key(path.stat()), "sha256": digest}
    marker = {
        "format": _MARKER_FORMAT,
        "source": str(gguf_path),
        "source_bytes": gguf_path.stat().st_size,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "files": files,
    }
    record_verified(folder, verified)
    (folder / MARKER).write_text(json.dumps(marker, indent=2))


def cache_problem(
    folder: Path, gguf_path: Path, *, checksums: _Checksums = "changed"
) -> str | None:
    """Why ``folder`` is not a finished, intact conversion of ``gguf_path``; ``None`` if it is.

    Compares every file's size with the marker, then its SHA-256 checksum: ``checksums`` is
    ``"changed"`` (every load: only files whose size, mtime, ctime or inode differ from when
    their checksum last matched), ``"all"`` (reads every byte) or ``"sizes"`` (no checksum).
    """
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return (
            f"it has no {MARKER}: a conversion that did not finish"
            if os.path.isdir(folder)
            else "there is no folder"
        )
    except (OSError, ValueError) as err:
        return f"its {MARKER} cannot be read ({err})"
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, dict) or not files:
        return f"its {MARKER} lists no file sizes (written by an older iglens_viz)"
    names = set(files)
    if not (
        "config.json" in names
        and "tokenizer_config.json" in names
        and any(n.endswith(".safetensors") for n in names)
    ):
        return f"its {MARKER} does not list config.json, the weights and the tokenizer"
    try:
        if marker.get("source_bytes") != gguf_path.stat().st_size:
            return f"it was converted from another version of {gguf_path.name}"
    except OSError:
        pass  # the source is only needed to convert again
    for name, record in sorted(files.items()):
        if (
            Path(name).name != name
            or name in OWN_FILES
            or not isinstance(record, dict)
            or not isinstance(record.get("bytes"), int)
            or not isinstance(record.get("sha256"), str)
        ):
            return f"its {MARKER} is malformed"
        try:
            size = (folder / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != record.get("bytes"):
            return f"{name} has {size:,} bytes instead of {record['bytes']:,}"
    if checksums == "sizes":
        return None
    return checksum_problem(folder, files, only_changed=checksums == "changed")


# ---------------------------------------------------------------- temporary and damaged folders


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host; ``True`` when that cannot be told (Windows)."""
    if os.name != "posix" or pid <= 0:
        return True
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, another user's
        return True
    return True


def _is_abandoned(tmp: Path, now: float) -> bool:
    """True for a temporary conversion folder no process is writing any more.

    Its owner file names the process; it is abandoned when that process is gone (checked on
    the same host only), when it has no owner file and nothing in it changed for
    :data:`_NO_OWNER_STALE_S` seconds, or when nothing changed for :data:`_STALE_TMP_S`.
    """
    try:
        newest = max([tmp.stat().st_mtime] + [p.stat().st_mtime for p in tmp.iterdir()])
    except OSError:
        return False
    if now - newest > _STALE_TMP_S:
        return True
    try:
        owner = json.loads((tmp / OWNER).read_text())
    except FileNotFoundError:  # just made, or its writer was killed long ago
        return now - newest > _NO_OWNER_STALE_S
    except (OSError, ValueError):
        return False
    try:
        return owner["host"] == socket.gethostname() and not _pid_alive(int(owner["pid"]))
    except (KeyError, TypeError, ValueError):
        return False


def remove_stale_tmp(target: Path) -> list[Path]:
    """Remove abandoned ``.<name>.tmp-*`` folders beside ``target``; return those removed.

    The names are compared as plain strings (no glob), so brackets in paths mean nothing.
    Errors (a read-only cache, a folder removed meanwhile) are ignored.
    """
    prefix = f".{target.name}.tmp-"
    try:
        entries = [p for p in target.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []
    now, removed = time.time(), []
    for tmp in entries:
        if not tmp.is_symlink() and tmp.is_dir() and _is_abandoned(tmp, now):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def _discard(folder: Path) -> None:
    """Remove a damaged ``folder``: rename it aside first, so the target name frees at once."""
    aside = folder.parent / f".{folder.name}.tmp-old-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return  # another process removed it already
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)
