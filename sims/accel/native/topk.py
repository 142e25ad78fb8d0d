"""TopK sparsification of each row of a layer in C (``topk.c``; :mod:`sims.accel.native`).

:class:`sims.rules.compress.TopK` calls :func:`topk_keep` on each layer of the ``[B, d]`` vectors
it compresses, and :func:`ef_topk` for Fed-EF's error feedback around it (``target = delta
+ error``, the message, the residual: Alg. 2 lines 11-12): no sort, no index tensors, no
scatter. Each row's threshold comes from a sample (2,048 entries in 128 runs) that sets a
key about 2 ``k`` entries reach; the pass that reads the row anyway (for :func:`ef_topk`
the one computing ``target``) collects those entries with a vector compare and compress,
(AVX-512, else AVX2, else one by one), and radix selection among them gives the exact
``k``-th magnitude; one more pass writes the message and the residual (streaming stores
with AVX-512) from ``target`` while it is in the cache.
Where the sample misleads (fewer than ``k`` collected: :func:`misled_rows`), the row's
whole first 11 bits are histogrammed instead; the selection is the same either way, and
ties at the ``k``-th magnitude are kept lowest index first (the torch form's choice among
ties is unspecified).

Measured on Fed-EF's TopK-0.01 of ``25 x 159,010`` float32 (the issue-16 benchmark's
messages, layers 784x200, 200, 200x10, 10), one thread, the kernel alone, fastest of 30
calls rotating over 4 input sets (so each call's inputs come from memory), interleaved with
the former kernel (whole-row histogram, a pass writing the message, one for the residual):
:func:`ef_topk` 5.5 ms -> 2.3 ms (with the AVX2 forms instead of AVX-512 2.8 ms, with
neither 4.5 ms, without sampling 4.3 ms: :func:`configure`); :func:`topk_keep` 3.7 ms ->
1.5-1.6 ms (the torch form, :func:`sims.rules.compress.
top_indices` and a scatter: 9.3-10.6 ms). Reading ``delta`` and ``error`` and writing the
three outputs is 5 streams of 16 MB, about 1.4 ms here. In the benchmark's engine rounds
:func:`ef_topk` takes 2.5-3.1 ms a round (6.3 ms before), the rest being page faults on
its fresh outputs and what the engine left in the cache; no row misled there.

Fed-EF's error may be read, and the residual written, through a table of row addresses
(:func:`ef_topk`'s row sources): the participants' own rows of the engine's client state
(:class:`sims.row_source.SlotRows`), the residual written over the error in place, stale
rows (error restarting) read from :class:`~sims.row_source.ZeroRows`' shared zero row. On the
benchmark's error state (50 clients' rows, 25 read and written a round, float32, one
thread, fastest of 80 calls interleaved): gathering the rows, :func:`ef_topk` into new
tensors and writing the residual back 4.0-4.5 ms; in place 2.2-2.4 ms (the residual with
plain stores: its lines were just read; streaming them 2.5 ms).
"""
from __future__ import annotations

import ctypes

import torch

from ...row_source import RowSource, SlotRows, ZeroRows, backing, row_addresses
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


EF_ARGTYPES = [_P] * 5 + [_I64, _I64, _I64, _I64, _P, _I64, _P, _P, _I64]


def ef_topk(delta: torch.Tensor, error, blocks, ks, outs, zero=None) -> bool:
    """Error feedback around TopK over the column blocks ``blocks`` (slices tiling ``d``)
    keeping ``ks[b]`` per row of block ``b``: into ``outs = (target, msg, err)`` (``[B, d]``
    each) ``target = delta + error``, ``msg = TopK(target)`` (:func:`topk_keep`'s selection),
    ``err = target - msg``. False (nothing written) when the kernels cannot take them.

    ``error`` may be a row source (:mod:`sims.row_source`: a :class:`SlotRows` of the
    participants' own error rows, a :class:`ZeroRows`) read through a table of row
    addresses, and ``err`` a :class:`SlotRows` written through one: ``err`` may be the very
    rows ``error`` reads (the residual written over the error in place; the kernel reads a
    row's every entry before it writes any). ``zero`` (``[B]`` bool, None: no row): the
    rows whose error reads as zeros instead (Fed-EF's error restarting), their table entries
    pointing at :class:`ZeroRows`' shared zero row."""
    target, msg, err = outs
    B, d = delta.shape if delta.dim() == 2 else (0, 0)
    er_in, err_out = backing(error), backing(err)
    if delta.dim() != 2 or er_in is None or err_out is None \
            or any(t.shape != delta.shape for t in (error, *outs)) \
            or not usable(delta, er_in, target, msg, err_out):
        return False
    if isinstance(err, RowSource) and not isinstance(err, SlotRows):
        return False                                  # (only own rows are written)
    fresh = [p.untyped_storage().data_ptr() for p in (delta, target, msg)]
    if isinstance(err, SlotRows):
        if err_out.untyped_storage().data_ptr() in fresh:
            return False
        if isinstance(error, SlotRows) and error.storage.data_ptr() == err.storage.data_ptr() \
                and not err.same_rows(error.storage, error.slot):
            return False                              # other rows of the same storage
    if zero is not None and (zero.dtype != torch.bool or zero.shape != (B,)):
        return False
    if sum(sl.stop - sl.start for sl in blocks) != d:
        return False
    nt, widest = threads(), max(sl.stop - sl.start for sl in blocks)
    if widest >= 2 ** 31:
        return False
    er_tab = None
    if isinstance(error, RowSource) or zero is not None:
        er_tab = row_addresses(error)
        if zero is not None:
            at_zero = ZeroRows(B, d, delta.dtype, delta.device).zero_row().data_ptr()
            er_tab = torch.where(zero.cpu(), at_zero, er_tab)
    err_tab = err.addresses() if isinstance(err, SlotRows) else None
    ws = workspace(nt, widest)
    fn = kernel("ef_topk", delta.dtype, EF_ARGTYPES)
    for sl, k in zip(blocks, ks):
        c = sl.start
        fn(ptr(target, c), ptr(msg, c), None if err_tab is not None else ptr(err, c),
           ptr(delta, c), None if er_tab is not None else ptr(error, c), B,
           sl.stop - sl.start, d, int(k), ptr(ws), nt, ptr(er_tab), ptr(err_tab), c)
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
