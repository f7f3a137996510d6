"""Static exports of an attribution: one self-contained, offline HTML page."""

from .html import to_html

__all__ = ["to_html"]
