"""The site's page files (iglens_viz.export.site_page): the bundle and onnxruntime-web's
runtime copied beside an index.html that names nothing off its own origin."""

from __future__ import annotations

import re

import pytest

from iglens_viz.export import site_page
from iglens_viz.export.site_page import PAGE_FILES, require_page_bundle, write_page
from iglens_viz.protocol.bundle import BundleMissingError


def test_the_page_is_the_built_bundle_beside_an_index_that_stays_on_its_origin(tmp_path):
    try:
        sources = require_page_bundle()
    except BundleMissingError:
        pytest.skip("the site's bundle is not built (make js)")
    assert write_page(tmp_path, "<b>evil</b> model") == list(PAGE_FILES)
    for source, relative in zip(sources, PAGE_FILES[1:], strict=True):
        assert (tmp_path / relative).read_bytes() == source.read_bytes()
    index = (tmp_path / "index.html").read_text()
    assert "&lt;b&gt;evil&lt;/b&gt;" in index and "<b>evil" not in index  # the name escaped
    assert not re.search(r"(src|href)=\"(https?:)?//", index)  # nothing off the origin
    assert '<script type="module" src="page/site.js">' in index
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', index)
    assert csp and "default-src 'self'" in csp.group(1) and "http" not in csp.group(1)


def test_a_missing_bundle_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(site_page, "SITE_JS", tmp_path / "absent.js")
    with pytest.raises(BundleMissingError, match="make js"):
        write_page(tmp_path / "site", "m")
    assert not (tmp_path / "site").exists()
