"""The package's version: its one source.

``pyproject.toml`` reads it (hatch's ``[tool.hatch.version]``), ``iglens_viz.__version__`` is
it, the exported pages and the study's metadata write it, and a test holds ``package.json``
(the front-end bundle's version) to it. A leaf module: it imports nothing.
"""

__version__ = "0.1.0"
