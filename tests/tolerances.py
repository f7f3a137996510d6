"""The old home of :mod:`tests.support.tolerances`, kept for the tests that still import it by
this name (tests/ui/, iglens_study/tests/): the same module object, not a copy."""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # a kernel or script of tests/ui puts only tests/ on the path
    sys.path.append(_ROOT)

from tests.support import tolerances  # noqa: E402

sys.modules[__name__] = tolerances
