"""iglens_viz's test suite: laid out as the package is (``tests/core/`` tests ``iglens_viz/core/``,
...), its shared helpers and fixtures in :mod:`tests.support`."""
