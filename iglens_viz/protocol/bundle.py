"""Where the built front-end bundle lives (no anywidget import here: the export uses it)."""

from __future__ import annotations

from pathlib import Path

from ..errors import IGLensError

STATIC = Path(__file__).resolve().parent.parent / "static"
"""The package's ``static/`` folder, filled by the build hook (``npm run build``)."""
BUNDLE_JS = STATIC / "widget.js"
"""ES module: ``export default {render}`` for anywidget, ``mount``/``createModel`` for pages."""
BUNDLE_CSS = STATIC / "widget.css"
"""The views' stylesheet (every class prefixed ``iglens-``)."""

MISSING_BUNDLE = (
    "the front-end bundle (iglens_viz/static/widget.js) is not built: reinstall "
    "from a checkout with npm available (pip install -e .) or run "
    "`npm ci && npm run build`"
)


class BundleMissingError(IGLensError, FileNotFoundError):
    """The front-end bundle was not built (a checkout installed without npm)."""
