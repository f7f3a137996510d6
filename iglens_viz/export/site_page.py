"""The kernel-free site's page (issue 38, the page stage): ``index.html`` at the folder's root
and ``page/`` beside it, written into a site folder by :func:`write_page`::

    DIR/
      index.html                         the page: the question box, the progress, the views
      page/site.js, page/site.css        the bundle (js/site.js, built by ``make js``)
      page/ort/ort-wasm-simd-threaded.jsep.{wasm,mjs}
                                         onnxruntime-web's WebAssembly (and WebGPU) runtime,
                                         served by the site itself: the page fetches nothing
                                         off its own origin

The page's Content-Security-Policy allows scripts, workers and fetches from the site's own
origin only, and WebAssembly compilation (``'wasm-unsafe-eval'``).
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path

from ..protocol import bundle

__all__ = ["PAGE_FILES", "require_page_bundle", "write_page"]

ORT_FILES = ("ort-wasm-simd-threaded.jsep.wasm", "ort-wasm-simd-threaded.jsep.mjs")
"""onnxruntime-web's files the bundle loads (copied to ``iglens_viz/static/ort/`` by the build)."""

PAGE_FILES = (
    "index.html",
    "page/site.js",
    "page/site.css",
    *(f"page/ort/{name}" for name in ORT_FILES),
)
"""Every file :func:`write_page` writes, relative to the site's folder."""

SITE_JS = bundle.STATIC / "site.js"
SITE_CSS = bundle.STATIC / "site.css"
MISSING_SITE_BUNDLE = (
    "the site's bundle (iglens_viz/static/site.js and static/ort/) is not built: run "
    "`make js` (npm ci && npm run build) in a checkout"
)

_CSP = (
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:; "
    "connect-src 'self' blob: data:; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:"
)

_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title}</title>
<link rel="stylesheet" href="page/site.css">
<style>
html {{ color-scheme: light dark; }}
body {{ margin: 0; padding: 16px; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }}
.iglens-site-form {{ display: flex; gap: 8px; flex-wrap: wrap; margin: 8px 0; }}
.iglens-site-form input {{ flex: 1 1 24em; font: inherit; padding: 4px 6px; }}
.iglens-site-header progress {{ width: 100%; max-width: 40em; }}
.iglens-site-status, .iglens-site-backend, .iglens-site-check {{ margin: 4px 0; font-size: 13px; }}
.iglens-site-answer {{ font-weight: 600; white-space: pre-wrap; }}
</style>
</head>
<body>
<h1 style="font-size: 17px; margin: 0 0 8px">{title}</h1>
<p style="margin: 0 0 8px; font-size: 13px">The model runs in this tab; nothing leaves it.</p>
<div id="iglens-site"></div>
<script type="module" src="page/site.js"></script>
</body>
</html>
"""


def require_page_bundle() -> list[Path]:
    """The built files the page copies (the site's bundle and onnxruntime-web's); a
    :class:`~iglens_viz.protocol.bundle.BundleMissingError` when they were not built."""
    sources = [SITE_JS, SITE_CSS, *(bundle.STATIC / "ort" / name for name in ORT_FILES)]
    if not all(p.is_file() for p in sources):
        raise bundle.BundleMissingError(MISSING_SITE_BUNDLE)
    return sources


def write_page(directory: str | Path, title: str) -> list[str]:
    """Write ``index.html`` and ``page/`` into the site folder ``directory``; the paths written
    (relative to it)."""
    root = Path(directory)
    sources = require_page_bundle()
    (root / "page" / "ort").mkdir(parents=True, exist_ok=True)
    for source, relative in zip(sources, PAGE_FILES[1:], strict=True):
        shutil.copyfile(source, root / relative)
    text = _INDEX.format(csp=_CSP, title=html.escape(f"IG-Lens: {title}, in your browser"))
    (root / "index.html").write_text(text, encoding="utf-8")
    return list(PAGE_FILES)
