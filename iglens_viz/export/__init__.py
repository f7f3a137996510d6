"""Static exports of an attribution: one self-contained, offline HTML page; and the
kernel-free site's folder (the model's graphs, weights and tokenizer for the browser)."""

from .html import to_html
from .site import export_site

__all__ = ["export_site", "to_html"]
