"""Command-line interface (``iglens``)."""

from .commands import main

__all__ = ["main"]
