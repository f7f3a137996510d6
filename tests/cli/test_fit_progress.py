"""The ``iglens`` command during a lens fit (issue 32, item 1): the first ``--lens tuned``
prints every phase with the time left (it printed nothing for 240 s), and Ctrl-C ends it
with one line naming the checkpoint it keeps, exit status 130; the same command resumes.

The tiny model's fit takes seconds, so the subprocess slows each step's KL down (a test-only
patch of ``iglens_viz.lenses.tuned.kl_to_final``) to be interrupted midway.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.support import HANG_S

PROMPT = "w3 w5 w7 w9"

SCRIPT = textwrap.dedent("""
    import signal, sys, time
    from iglens_viz.lenses import tuned

    # Ctrl-C as a terminal delivers it: a process started in the background of a shell
    # without job control (`make test &`, CI scripts) inherits SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler (the run exits 0 and the test fails).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    real = tuned.kl_to_final
    pause = float(sys.argv[2])

    def slow(*args, **kwargs):  # this test's slow machine: each depth's loss takes longer
        time.sleep(pause)
        return real(*args, **kwargs)

    tuned.kl_to_final = slow
    from iglens_viz.cli.commands import main

    sys.exit(main(["--model", sys.argv[1], "--lens", "tuned", "--no-chat", sys.argv[3]]))
""")

INTERRUPTED = re.compile(
    r"^iglens: interrupted: the tuned lens's checkpoint at step (\d+)/250 is kept in "
    r"(.+\.partial\.pt); run the same command again to resume$"
)


def test_a_first_lens_fit_prints_every_phase_with_the_time_left(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    from iglens_viz.cli import commands

    argv = ["--model", tiny_model_dir, "--lens", "tuned", "--no-chat", PROMPT]
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    commands.fit_printer.cache_clear()
    commands.fit_printer().every = 0  # every report (a log gets one line per 10 s)
    try:
        assert commands.main(argv) == 0
    finally:
        commands.fit_printer.cache_clear()
    err = capsys.readouterr().err.splitlines()
    fit_lines = [line for line in err if line.startswith("iglens: the tuned lens: ")]
    for phase in ("sampling its fit corpus", "reading the corpus's states", "fitting"):
        lines = [line for line in fit_lines if f": {phase} " in line]
        assert lines, phase
        assert any(re.search(r", about \d+ (s|min) left", line) for line in lines[1:-1]), phase
    assert fit_lines[-1].startswith("iglens: the tuned lens: fitting 250/250 steps, KL ")
    # a second run reads the cached lens: nothing to report
    assert commands.main(argv) == 0
    assert "the tuned lens" not in capsys.readouterr().err


def _run(model_dir: str, cache: Path, pause: float) -> subprocess.Popen:
    env = {**os.environ, "IGLENS_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, model_dir, str(pause), PROMPT],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_ctrl_c_during_a_fit_prints_one_line_exits_130_and_the_rerun_resumes(
    tiny_model_dir, tmp_path
):
    cache = tmp_path / "cache"
    proc = _run(tiny_model_dir, cache, pause=0.02)
    try:
        deadline = time.monotonic() + HANG_S
        while not list((cache / "lenses").glob("tuned-*.partial.pt")):  # step 10 is kept
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"no checkpoint in {HANG_S} s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        out, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = err.splitlines()
    assert [line for line in lines if line.startswith("iglens: interrupted")] == lines[-1:]
    found = INTERRUPTED.match(lines[-1])
    assert found, lines[-1]
    step, path = int(found.group(1)), Path(found.group(2))
    assert 10 <= step < 250 and path.parent == cache / "lenses"
    assert torch.load(path, weights_only=True)["step"] == step  # the checkpoint it names
    assert not list((cache / "lenses").glob("tuned-*.safetensors"))
    assert out == ""  # no table: the command did not finish

    again = _run(tiny_model_dir, cache, pause=0.0)
    out, err = again.communicate(timeout=HANG_S)
    assert again.returncode == 0, err
    assert f"resumed after {step}" in err and "fitting 250/250 steps" in err
    assert "IG-Lens" in out  # the table
    assert not path.exists() and len(list((cache / "lenses").glob("tuned-*.safetensors"))) == 1
