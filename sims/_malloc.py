"""Keep freed memory in the process instead of returning it to the kernel.

The batched engine allocates and frees tensors of tens of megabytes every local step
(``[clients, d]`` parameters, gradients, activations). glibc serves such requests with
fresh ``mmap`` pages by default, and the page faults on first touch then cost more than the
arithmetic: measured here, a batched weight-gradient product ran at 23 GFLOP/s with fresh
pages and at 80 GFLOP/s once freed memory was reused. :func:`tune` asks glibc to serve large
requests from its heap and not to trim it (``mallopt(M_MMAP_MAX, 0)``,
``mallopt(M_TRIM_THRESHOLD, 1 GiB)``), the usual remedy short of swapping in jemalloc.

It is applied once when :mod:`sims.engine` is imported, on Linux with glibc only; set the
environment variable ``FEDTOOLKIT_NO_MALLOC_TUNING=1`` to leave malloc alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_done = False


def tune() -> bool:
    """Apply the tuning once; returns whether it is in effect."""
    global _done
    if _done:
        return True
    if os.environ.get("FEDTOOLKIT_NO_MALLOC_TUNING") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_MAX, 0) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok
