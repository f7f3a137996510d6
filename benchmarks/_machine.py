"""What the benchmarks share: the machine line's CPU name, and the Llama-3.2-1B shape.

The benchmarks run as scripts (``python benchmarks/<name>.py``), so this module is imported
from the scripts' own folder.
"""

from __future__ import annotations

import platform

LLAMA_1B_SHAPE = {
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128_256,
    "tie_word_embeddings": True,
    "max_position_embeddings": 2048,
}
"""Llama-3.2-1B's sizes (``LlamaConfig`` keywords) without its depth (16 blocks): the
benchmarks build random-weight models of this shape, no download."""


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else what :mod:`platform` says."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        return cpu
