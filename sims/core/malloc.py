"""Keep freed memory in the process instead of returning it to the kernel.

The batched engine allocates and frees tensors of megabytes every local step
(``[clients, d]`` parameters, gradients, activations). glibc serves requests above its
(adaptive) mmap threshold with fresh ``mmap`` pages, and the page faults on first touch then
cost more than the arithmetic: measured here, a batched weight-gradient product ran at
23 GFLOP/s with fresh pages and at 80 GFLOP/s once freed memory was reused. :func:`tune`
raises the mmap threshold to glibc's maximum (32 MiB) and keeps up to 256 MiB of freed heap
(``mallopt(M_MMAP_THRESHOLD, 32 MiB)``, ``mallopt(M_TRIM_THRESHOLD, 256 MiB)``); the engine
sizes its client chunks so that a ``[chunk, d]`` tensor stays under that threshold
(:data:`CHUNK_BYTES`). Disabling mmap altogether was tried and rejected: the heap then
fragmented and a long run's memory grew without bound.

The setting is process-wide, so the toolkit applies it only where the process is its own:
the commands (``python -m sims.compare``, ``sims.sweep``, the ``reproduce`` entries, the
benchmarks) and the Ray tasks of a sweep call :func:`tune_for_command` as they start
(``FEDTOOLKIT_MALLOC_TUNING=0``, or the older ``FEDTOOLKIT_NO_MALLOC_TUNING=1``, turns it
off). Importing the toolkit or calling :func:`sims.core.engine.run` from a notebook or a
program of one's own leaves malloc alone unless ``FEDTOOLKIT_MALLOC_TUNING=1`` is set (the
engine then applies it at its first run) or :func:`tune` is called. Linux with glibc only.
"""
from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
CHUNK_BYTES = 32 * 1024 * 1024
_done = False


def wanted(default: bool) -> bool:
    """Whether the environment asks for the tuning: ``FEDTOOLKIT_MALLOC_TUNING`` (``1`` / ``0``),
    ``FEDTOOLKIT_NO_MALLOC_TUNING=1`` (off), else ``default``."""
    if os.environ.get("FEDTOOLKIT_NO_MALLOC_TUNING"):
        return False
    env = os.environ.get("FEDTOOLKIT_MALLOC_TUNING")
    if env is None or not env.strip():
        return default
    return env.strip().lower() not in ("0", "false", "no", "off")


def tune_for_command() -> bool:
    """A command's start: the tuning unless the environment turns it off."""
    return tune() if wanted(True) else False


def tune_for_library() -> bool:
    """The engine's first run in a process that is not a command: only when
    ``FEDTOOLKIT_MALLOC_TUNING=1``."""
    return tune() if wanted(False) else False


def applied() -> bool:
    """Whether the tuning is in effect in this process."""
    return _done


def tune() -> bool:
    """Apply the tuning once (Linux with glibc); returns whether it is in effect."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = (libc.mallopt(_M_MMAP_THRESHOLD, CHUNK_BYTES) == 1
              and libc.mallopt(_M_TRIM_THRESHOLD, 256 * 1024 * 1024) == 1)
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok
