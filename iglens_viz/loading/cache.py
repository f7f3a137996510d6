"""The iglens_viz cache: where it is, and the record that proves a converted folder intact.

The conversion is written into a temporary folder beside the target and renamed into place
when done. Its last file, ``iglens_source.json``, records the size and SHA-256 checksum of
every file in the folder. Every load compares the sizes (under a millisecond), so a truncated
or missing file is noticed and the model is converted again, with a note on stderr. Checksums
are *not* recomputed on every load: hashing the ~540 MB takes about 0.4 s even from a warm
disk cache on a CPU with SHA extensions (more without them, or from a cold disk), against
~3 s for a first load in a process and ~0.6 s for a repeated one, while the failures met in
practice (a killed process, a full disk, an interrupted copy) change sizes. They are compared
when loading the folder fails anyway (a mismatch then means: convert again), and on demand
with :func:`verify_default_model`. A temporary folder left behind by a killed conversion
(``.<name>.tmp-*``) is removed on the next load of the default model, once the process that
wrote it is gone (checked on the same host) or nothing in it has changed for an hour.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path

_MARKER = "iglens_source.json"   # written last inside the cache folder: proof it is complete
_MARKER_FORMAT = 2               # 2: the marker lists every file with its size and sha256
_OWNER = ".iglens_owner.json"    # inside a temporary conversion folder: the process writing it
_STALE_TMP_S = 3600              # a temporary conversion folder unchanged this long is abandoned


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



# --------------------------------------------------------------------------- marker: sizes and checksums

def _sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_marker(folder: Path, gguf_path: Path) -> None:
    """Write ``iglens_source.json`` (last): the source, and every file's size and sha256.

    The files are also made readable by everyone (0o644), as the folder is (0o755).
    """
    (folder / _OWNER).unlink(missing_ok=True)
    files = {}
    for path in sorted(folder.iterdir()):
        if path.name == _MARKER or not path.is_file():
            continue
        path.chmod(0o644)
        files[path.name] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    marker = {"format": _MARKER_FORMAT, "source": str(gguf_path),
              "source_bytes": gguf_path.stat().st_size,
              "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "files": files}
    (folder / _MARKER).write_text(json.dumps(marker, indent=2))


def _cache_problem(folder: Path, gguf_path: Path, *, checksums: bool = False) -> str | None:
    """Why ``folder`` is not a finished, intact conversion of ``gguf_path``; ``None`` if it is.

    Compares every file's size with the marker (cheap); with ``checksums=True`` also its
    SHA-256 (reads every byte, ~0.4 s for the default model).
    """
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return (f"it has no {_MARKER}: a conversion that did not finish"
                if os.path.isdir(folder) else "there is no folder")
    except (OSError, ValueError) as err:
        return f"its {_MARKER} cannot be read ({err})"
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, dict) or not files:
        return f"its {_MARKER} lists no file sizes (written by an older iglens_viz)"
    names = set(files)
    if not ("config.json" in names and "tokenizer_config.json" in names
            and any(n.endswith(".safetensors") for n in names)):
        return f"its {_MARKER} does not list config.json, the weights and the tokenizer"
    try:
        if marker.get("source_bytes") != gguf_path.stat().st_size:
            return f"it was converted from another version of {gguf_path.name}"
    except OSError:
        pass                               # the source is only needed to convert again
    for name, record in sorted(files.items()):
        if Path(name).name != name or not isinstance(record, dict) \
                or not isinstance(record.get("bytes"), int):
            return f"its {_MARKER} is malformed"
        try:
            size = (folder / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != record.get("bytes"):
            return f"{name} has {size:,} bytes instead of {record['bytes']:,}"
    if checksums:
        for name, record in sorted(files.items()):
            try:
                if _sha256(folder / name) != record.get("sha256"):
                    return f"{name} does not match the sha256 checksum recorded when it was written"
            except OSError as err:
                return f"{name} cannot be read ({err.strerror or err})"
    return None



# --------------------------------------------------------------------------- temporary and damaged folders

def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host; ``True`` when that cannot be told (Windows)."""
    if os.name != "posix" or pid <= 0:
        return True
    try:
        os.kill(pid, 0)                  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except OSError:                      # PermissionError: alive, another user's
        return True
    return True


def _is_abandoned(tmp: Path, now: float) -> bool:
    """True for a temporary conversion folder no process is writing any more.

    Its owner file names the process; it is abandoned when that process is gone (checked on
    the same host only), or when nothing in it changed for :data:`_STALE_TMP_S` seconds.
    """
    try:
        newest = max([tmp.stat().st_mtime] + [p.stat().st_mtime for p in tmp.iterdir()])
    except OSError:
        return False
    if now - newest > _STALE_TMP_S:
        return True
    try:
        owner = json.loads((tmp / _OWNER).read_text())
        return owner["host"] == socket.gethostname() and not _pid_alive(int(owner["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False                     # no owner file yet: a conversion just starting


def _remove_stale_tmp(target: Path) -> list[Path]:
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
        return                            # another process removed it already
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)

