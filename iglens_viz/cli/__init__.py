"""Command-line interface (``iglens``)."""

from .arguments import count_at_least
from .commands import main

__all__ = ["count_at_least", "main"]
