"""The packaging tests' helpers: the checkout built into a wheel and an sdist with npm and
node hidden, and commands run in an environment without them.

:data:`TIMEOUT` bounds a hang, not a speed: the slowest command here (``python -m build`` of
wheel and sdist, or a pip install of the wheel) takes under a minute on an idle 2-core
machine; 30 minutes is more than 30 times that, above what a 2-core machine at load 9
(about 5 times slower) needs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import HANG_S, ROOT

BUNDLE = ("iglens_viz/static/widget.js", "iglens_viz/static/widget.css")
"""The front-end bundle every wheel and sdist must carry (built by ``make js``)."""
TIMEOUT = HANG_S
"""Seconds one packaging command may take before the test fails (see the module's text)."""


def unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"the packaging tests need {reason}")
    pytest.skip(f"the packaging tests need {reason}")


def _path_without_node() -> str:
    """This process's PATH without the directories that hold npm or node."""
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(Path(d, exe).exists() for exe in ("npm", "node"))
    ]
    return os.pathsep.join(keep)


def no_node_env(extra_path: Path | None = None) -> dict[str, str]:
    path = _path_without_node()
    if extra_path is not None:
        path = os.pathsep.join([str(extra_path), path])
    assert shutil.which("npm", path=path) is None and shutil.which("node", path=path) is None
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    env.update(PATH=path, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg")
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, (
        f"{args} exited {proc.returncode}\n--- stdout\n"
        f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


def build_dists(out: Path) -> dict[str, Path]:
    """``python -m build`` of the checkout into ``out`` (sdist, then the wheel from the sdist),
    npm hidden: ``{"wheel": path, "sdist": path}``."""
    missing = [p for p in BUNDLE if not (ROOT / p).is_file()]
    if missing:
        unavailable(f"the built bundle ({', '.join(missing)}: run `make js`)")
    for module in ("build", "hatchling", "hatch_jupyter_builder"):
        try:
            __import__(module)
        except ImportError:
            unavailable(f"{module} (pip install -e '.[test]')")
    run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        cwd=out,
        env=no_node_env(),
    )
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}
