"""TopK sparsification of each row of a layer in C (``topk.c``; :mod:`sims.native`).

:class:`sims.compress.TopK` calls :func:`topk_keep` on each layer of the ``[B, d]`` vectors
it compresses: radix selection of the ``k``-th magnitude on the floats' bit patterns, then
one pass writing the kept entries and zeros, with no sort, no index tensors and no scatter.
Ties at the ``k``-th magnitude are kept lowest index first (the torch form's choice among
ties is unspecified). Measured on Fed-EF's TopK-0.01 of ``25 x 159,010`` float32 (the
issue-16 benchmark's messages), one thread: 3.3 ms against 9.3-10.6 ms for the torch form
(:func:`sims.compress.top_indices` and a scatter); the first histogram keeps 4 interleaved
counts (4.1 ms with one: equal neighbours waited on each other's increments).
"""
from __future__ import annotations

import ctypes

import torch

from . import count, kernel, ptr, threads, usable

_I64, _P = ctypes.c_int64, ctypes.c_void_p
ARGTYPES = [_P, _P, _I64, _I64, _I64, _I64, _P, _I64]


def topk_keep(x: torch.Tensor, out: torch.Tensor, sl: slice, k: int):
    """``out[:, sl]`` = ``x[:, sl]`` with all but each row's ``k`` largest magnitudes zeroed
    (``x``, ``out``: ``[B, d]`` contiguous, same dtype; ``sl`` a contiguous slice of the
    columns). Returns ``out``, or None (nothing written) when the kernels cannot take them."""
    if x.dim() != 2 or out.shape != x.shape or not usable(x, out):
        return None
    B, d = x.shape
    start, stop = sl.start or 0, d if sl.stop is None else sl.stop
    if (sl.step or 1) != 1 or not 0 <= start <= stop <= d:
        return None
    n, nt = stop - start, threads()
    cand = torch.empty(nt * max(n, 1), dtype=torch.int64)
    fn = kernel("topk_keep", x.dtype, ARGTYPES)
    fn(ptr(out, start), ptr(x, start), B, n, d, int(k), ptr(cand), nt)
    count("topk_keep")
    return out


EF_ARGTYPES = [_P] * 5 + [_I64, _I64, _I64, _I64, _P, _I64]


def ef_topk(delta: torch.Tensor, error: torch.Tensor, blocks, ks, outs) -> bool:
    """Error feedback around TopK over the column blocks ``blocks`` (slices tiling ``d``)
    keeping ``ks[b]`` per row of block ``b``: into ``outs = (target, msg, err)`` (``[B, d]``
    each) ``target = delta + error``, ``msg = TopK(target)`` (:func:`topk_keep`'s selection),
    ``err = target - msg``. False (nothing written) when the kernels cannot take them."""
    target, msg, err = outs
    if delta.dim() != 2 or any(t.shape != delta.shape for t in (error, *outs)) \
            or not usable(delta, error, *outs):
        return False
    B, d = delta.shape
    if sum(sl.stop - sl.start for sl in blocks) != d:
        return False
    nt = threads()
    cand = torch.empty(nt * max(sl.stop - sl.start for sl in blocks), dtype=torch.int64)
    fn = kernel("ef_topk", delta.dtype, EF_ARGTYPES)
    for sl, k in zip(blocks, ks):
        fn(*(ptr(t, sl.start) for t in (target, msg, err, delta, error)), B,
           sl.stop - sl.start, d, int(k), ptr(cand), nt)
    count("ef_topk")
    return True
