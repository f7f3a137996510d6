"""Argument types shared by the ``iglens`` commands and the commands other packages register."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["count_at_least"]


def count_at_least(least: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``least``, refused with a message naming both."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
        return value

    return parse
