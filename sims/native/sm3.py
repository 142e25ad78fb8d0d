"""FedAda2's client AdaGrad / Adam step with the SM3-II preconditioner in one C pass
(``sm3.c``; :mod:`sims.native`): the fast form of
:meth:`sims.algorithms.fedada2.JointAdaptive.reference_local_step` with ``z = 1``, called by
:meth:`~sims.algorithms.fedada2.JointAdaptive._native_rows_step`.

Each (row, layer) is one loop over the layer's entries that reads ``g``, ``theta`` (Adam:
``m``) and the cover accumulators ``mu`` and writes ``theta`` (``m``), the new ``mu`` (the
rows' and columns' maxima of this step's ``nu``, kept in registers and a cache-resident
scratch) and, when asked, ``nu``: the ``cover_min`` before and the ``cover_max`` after, which
torch's fused kernel needs as passes of their own, are folded into it. A cover whose every
layer is a vector (``SM3Cover(full=True)``) is the full preconditioner: ``nu`` is written
into ``mu`` itself (tested; the algorithms keep that one on torch's fused kernels, measured
as fast or faster).

Measured on the issue-16 benchmark's ``25 x 159,010`` float32 (MLP 784-200-10), one
thread, in place, caches flushed before each call, fastest of 15: AdaGrad 1.3 ms, Adam
2.0 ms, against 2.3 / 3.1 ms for torch's fused kernel with ``cover_min_into`` before and
``cover_max_nonneg`` after; without writing ``nu`` (the rule's minimum with ``z = 1``, where
nothing reads it) 0.9 / 1.6 ms. In cache (one row) 0.22 / 0.34 ns an entry, against
0.11 ns for the step's ``sqrt`` and division alone: with the batch the step is bound by
its memory streams. Whole rounds (``benchmarks/algorithms_vs_loop.py --threads 1``): the
local step of FedAda2 / FedAda2-Adam / FedAda2-blend 28.7 / 33.9 / 34.1 ms a round before,
16.2 / 24.6 / 21.3 ms after; 2.31 / 2.60 / 2.40x of fused Fed-SGD before, 1.97 / 2.18 /
2.17x after (two quiet runs); run back to back with ``FEDTOOLKIT_NATIVE=0`` and without
(``--repeats 3``, load ~1): 2.51 / 2.69 / 2.48x and 2.06 / 2.29 / 2.19x, local step 34.4 /
39.2 / 36.5 and 18.0 / 28.1 / 22.5 ms. Writing ``nu`` costs 0.35 / 0.3 ms of the engine's
1.5 / 2.2 ms step (AdaGrad / Adam, medians, one thread).
"""
from __future__ import annotations

import ctypes
import weakref

import torch

from . import count, kernel, ptr, threads, usable

MAX_AXES = 8                     # sm3.c's SM3_MAX_AXES
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
ARGTYPES = ([_P] * 9 + [_I64, _I64, _I64, _I64, _P, _P, _P, _F64, _F64, _I64, _F64, _F64, _P]
            + [_I64])
_descs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def layer_desc(cover):
    """``(desc, layers)``: the kernel's description of ``cover`` (:class:`sims.optim.SM3Cover`),
    per layer ``[theta offset, first accumulator, k, n_0, .., n_{k-1}]`` (``k = 1``: a
    vector, one accumulator per entry; empty layers left out), int64, and the number of
    layers in it; None when a layer has more than :data:`MAX_AXES` axes or the layers or
    their accumulators do not tile ``theta`` / ``mu`` in order. Cached per cover."""
    if cover not in _descs:
        _descs[cover] = _describe(cover)
    return _descs[cover]


def _describe(cover):
    out, at, acc, layers = [], 0, 0, 0
    for sl, shape, spans in cover.blocks:
        n = sl.stop - sl.start
        dims = list(shape) if len(shape) > 1 else [n]
        if (sl.start != at or (sl.step or 1) != 1 or len(dims) > MAX_AXES
                or [o for o, _ in spans] != [acc + sum(dims[:a]) for a in range(len(dims))]
                or [s for _, s in spans] != dims):
            return None
        at, acc = sl.stop, acc + sum(dims)
        if n:
            out += [sl.start, spans[0][0], len(dims), *dims]
            layers += 1
    if at != cover.layout.d or acc != cover.size:
        return None
    return torch.tensor(out, dtype=torch.int64), layers


def applies(cover, theta, *tensors) -> bool:
    """Whether :func:`sm3_step` can take ``cover`` and these tensors (``theta`` ``[B, d]``
    first): the kernels built, the cover's layers described (:func:`layer_desc`), every
    tensor contiguous on the CPU, all float32 or all float64."""
    return (theta.dim() == 2 and theta.shape[1] == cover.layout.d
            and layer_desc(cover) is not None and usable(theta, *tensors))


def sm3_step(cover, theta, g, mu, lr: float, eps: float, *, m=None, beta1: float = 0.9,
             beta2: float = 0.999, c1=None, c2=None, rows=None, theta_out, mu_out,
             m_out=None, nu_out=None) -> bool:
    """One step of the rows ``rows`` (``[n]`` indices; None: every row) by ``sm3.c``'s rule
    (its header): AdaGrad with ``m`` None, else Adam with the bias corrections ``c1``,
    ``c2`` (``n`` values, one per stepped row in ``rows``' order; None: off). ``theta``,
    ``g``, ``m`` ``[B, d]``, ``mu`` ``[B, cover.size]``; the outputs (same shapes; each may be
    its input, for in place; ``nu_out`` None: ``nu`` not written) get the stepped rows, their
    other rows are not touched. Returns False (nothing written) when the kernels cannot take
    these tensors or this cover."""
    got = layer_desc(cover)
    if got is None or theta.dim() != 2:
        return False
    desc, layers = got
    adam = m is not None
    B, d = theta.shape
    same = [g, theta_out] + ([m, m_out] if adam else []) + ([nu_out] if nu_out is not None
                                                            else [])
    if (d != cover.layout.d or mu.shape != (B, cover.size) or mu_out.shape != mu.shape
            or any(t is None or t.shape != theta.shape for t in same)):
        return False
    if not usable(theta, mu, mu_out, *same):
        return False
    idx = (torch.arange(B, dtype=torch.int64) if rows is None
           else rows.to(torch.int64).contiguous())
    n = len(idx)
    step = rs2 = None
    if c1 is not None:
        step = (float(lr) / c1.reshape(n).to(torch.float64)).contiguous()
    if c2 is not None:
        rs2 = c2.reshape(n).to(torch.float64).rsqrt().contiguous()
    fn = kernel("sm3_step", theta.dtype, ARGTYPES)
    m_ptrs = (ptr(m_out), ptr(m)) if adam else (None, None)

    nt = threads()
    scratch = theta.new_empty(nt * max(cover.size, 1))      # a layer's maxima, per thread
    if n:
        fn(ptr(theta_out), ptr(theta), ptr(g), *m_ptrs, ptr(mu_out), ptr(mu), ptr(nu_out),
           ptr(idx), n, d, cover.size, layers, ptr(desc), ptr(step), ptr(rs2), float(lr),
           float(eps), int(adam), float(beta1), float(beta2), ptr(scratch), nt)
    count("sm3_step")
    return True
