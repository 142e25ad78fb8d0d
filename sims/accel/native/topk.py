"""TopK sparsification of each row of a layer in C (``topk.c``; :mod:`sims.accel.native`).

:func:`topk_keep` keeps each row's ``k`` largest magnitudes of a layer of ``[B, d]`` vectors,
and :func:`ef_topk` does Fed-EF's error feedback around it (``target = delta + error``, the
message, the residual: Alg. 2 lines 11-12): no sort, no index tensors, no scatter. Each
row's threshold comes from a sample (2,048 entries in 128 runs) that sets a key about 2 ``k``
entries reach; the pass that reads the row anyway (for :func:`ef_topk` the one computing
``target``) collects those entries with a vector compare and compress (AVX-512, else AVX2,
else one by one), and radix selection among them gives the exact ``k``-th magnitude; one
more pass writes the message and the residual from ``target`` while it is in the cache.
Where the sample misleads (fewer than ``k`` collected: :func:`misled_rows`), the row's
whole first 11 bits are histogrammed instead; the selection is the same either way, and
ties at the ``k``-th magnitude are kept lowest index first, as
:class:`sims.rules.compress.TopK` keeps them.
"""
from __future__ import annotations

import ctypes

import torch

from . import count, kernel, library, ptr, threads, usable

_I64, _P = ctypes.c_int64, ctypes.c_void_p
ARGTYPES = [_P, _P, _I64, _I64, _I64, _I64, _P, _I64]


def workspace(nt: int, n: int) -> torch.Tensor:
    """The kernels' scratch for ``nt`` threads and rows of ``n``: per thread, room for ``n``
    (rounded up to even) + 16 int32 candidate indices and as many keys of up to 8 bytes
    (``topk.c``'s ``topk_ws``); only the pages of the candidates a row collects are
    touched."""
    return torch.empty(nt * (n + 18) * 2, dtype=torch.int64)


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
    if n >= 2 ** 31:
        return None
    ws = workspace(nt, n)                # held while the kernel runs
    fn = kernel("topk_keep", x.dtype, ARGTYPES)
    fn(ptr(out, start), ptr(x, start), B, n, d, int(k), ptr(ws), nt)
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
            or not usable(delta, error, target, msg, err):
        return False
    B, d = delta.shape
    if sum(sl.stop - sl.start for sl in blocks) != d:
        return False
    nt, widest = threads(), max(sl.stop - sl.start for sl in blocks)
    if widest >= 2 ** 31:
        return False
    ws = workspace(nt, widest)
    fn = kernel("ef_topk", delta.dtype, EF_ARGTYPES)
    for sl, k in zip(blocks, ks):
        c = sl.start
        fn(ptr(target, c), ptr(msg, c), ptr(err, c), ptr(delta, c), ptr(error, c), B,
           sl.stop - sl.start, d, int(k), ptr(ws), nt)
    count("ef_topk")
    return True


def configure(simd: int | None = None, sampling: bool | None = None) -> int | None:
    """For the tests: the kernels' vector forms used up to level ``simd`` (2: AVX-512, 1:
    AVX2, 0: none; no more than compiled in), the sampled threshold taken where it applies
    or never (``sampling``: every row then histograms its whole first 11 bits), for this
    process; None leaves a setting as it is. Returns the level compiled in (None: no
    library). Every setting selects the same."""
    lib = library()
    if lib is None:
        return None
    fn = lib.topk_config
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return int(fn(-1 if simd is None else int(simd),
                  -1 if sampling is None else int(bool(sampling))))


def misled_rows() -> int:
    """Rows so far whose sampled threshold let fewer than ``k`` entries through (each then
    took the whole-row histogram instead): 0 on Fed-EF's deltas in the benchmark."""
    lib = library()
    if lib is None:
        return 0
    fn = lib.topk_misled_rows
    fn.argtypes, fn.restype = [], ctypes.c_int64
    return int(fn())
