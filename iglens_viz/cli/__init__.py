"""Command-line interface (``iglens``)."""

from .main import main

__all__ = ["main"]
