"""The training process's compute settings: torch's thread count, and glibc's allocator kept from unmapping."""

from __future__ import annotations

import ctypes
import functools
import sys

import torch

__all__ = ["configure", "keep_freed_memory"]

# glibc's mallopt parameters (malloc.h) and the values set: allocations up to 64 MiB from the heap, which keeps
# up to 256 MiB free at its top and grows 64 MiB at a time
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
KEPT = {M_MMAP_THRESHOLD: 64 << 20, M_TRIM_THRESHOLD: 256 << 20, M_TOP_PAD: 64 << 20}


def configure(threads: int) -> None:
    """Compute with `threads` torch threads, and keep freed memory in the process (`keep_freed_memory`)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)
    keep_freed_memory()


@functools.cache  # the settings last for the process: once is enough
def keep_freed_memory() -> bool:
    """Keep glibc from handing freed memory back to the kernel between steps; whether it took the settings.

    By default glibc maps an allocation above its threshold (128 KiB at first, a tensor of a few hundred
    rows here) on its own pages and unmaps it when freed, and trims the heap when its top is free, so every
    step's activations fault their pages in again. On this project's 2-core machine that cost R = 10 MemN2N
    replicas (tensors of 640 rows) about a quarter of their step time and a single MemN2N run at batch 64
    about a fifth (`benchmarks/replicas.py`, docs/benchmarks.md). Off glibc (macOS, musl) it does nothing.
    """
    if not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own symbols: glibc's, where it is glibc
    return mallopt is not None and all(mallopt(param, value) == 1 for param, value in KEPT.items())
