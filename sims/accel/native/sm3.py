"""FedAda2's client AdaGrad / Adam step with the full, the SM3-II or the SM3-I preconditioner
in C (``sm3.c``; :mod:`sims.accel.native`): the fast form of :class:`sims.rules.sm3.SM3`
updated every step (``z = 1``), planned by :mod:`sims.accel.sm3`. SM3-I (``sm3i``) takes
two passes over a matrix layer (the sets' maxima of ``g^2`` first, then the step); the full
and SM3-II forms one, as follows.

Each (row, layer) is one loop over the layer's entries that reads ``g``, ``theta`` (Adam:
``m``) and the cover accumulators ``mu`` and writes ``theta`` (``m``), the new ``mu`` (the
rows' and columns' maxima of this step's ``nu``, kept in registers and a cache-resident
scratch) and, when asked, ``nu``: the ``cover_min`` before and the ``cover_max`` after are
folded into it. A cover whose every layer is a vector (``SM3Cover(full=True)``) is the full
preconditioner (DJA, joint-adaptive, FedAdaAdagrad, FedAdaAdam): ``nu`` is written into
``mu`` itself (``nu_out`` None: its ``nu`` is its ``mu``).
"""
from __future__ import annotations

import ctypes
import weakref

import torch

from . import count, kernel, ptr, threads, usable

MAX_AXES = 8                     # sm3.c's SM3_MAX_AXES
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
# theta_out, theta, g, m_out, m, mu_out, mu, nu_out, rows, nrows, d, size, nlayers, desc,
# step_size, rsqrt_c2, lr, eps, adam, b1, b2, scratch, nthreads, sm3i
ARGTYPES = ([_P] * 9 + [_I64] * 4 + [_P] * 3 + [_F64, _F64, _I64, _F64, _F64, _P, _I64, _I64])
_descs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def layer_desc(cover):
    """``(desc, layers)``: the kernel's description of ``cover`` (:class:`sims.rules.optim.SM3Cover`),
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


def sm3_step(cover, theta, g, mu, lr, eps: float, *, m=None, beta1: float = 0.9,
             beta2: float = 0.999, c1=None, c2=None, rows=None, theta_out, mu_out,
             m_out=None, nu_out=None, sm3i: bool = False) -> bool:
    """One step of the rows ``rows`` (``[n]`` indices; None: every row) by ``sm3.c``'s rule
    (its header): AdaGrad with ``m`` None, else Adam with the bias corrections ``c1``,
    ``c2`` (``n`` values, one per stepped row in ``rows``' order; None: off); ``lr`` a
    number or ``n`` rates, one per stepped row. ``theta``,
    ``g``, ``m`` ``[B, d]``, ``mu`` ``[B, cover.size]``; the outputs (contiguous tensors of
    the same shapes; each may be its input, for in place; ``nu_out`` None: ``nu`` not
    written, as for the full preconditioner, whose ``nu`` is ``mu``) get the stepped rows,
    their other rows are not touched. ``sm3i``: SM3-I's rule (``sm3.c``'s ``SM3I_LAYER``;
    ``nu_out`` must be given) instead of SM3-II's. Returns False (nothing written) when the
    kernels cannot take these operands or this cover."""
    got = layer_desc(cover)
    if got is None or theta.dim() != 2 or (sm3i and nu_out is None):
        return False
    desc, layers = got
    adam = m is not None
    B, d = theta.shape
    outs = [theta_out, mu_out] + ([m_out] if adam else []) + (
        [nu_out] if nu_out is not None else [])
    ins = [theta, g, mu] + ([m] if adam else [])
    if (d != cover.layout.d or mu.shape != (B, cover.size) or mu_out.shape != (B, cover.size)
            or any(t.shape != (B, d) for t in outs + ins if t is not mu_out and t is not mu)):
        return False
    if not usable(*ins, *outs):
        return False
    idx = None if rows is None else rows.to(torch.int64).contiguous()
    n = B if idx is None else len(idx)
    step = rs2 = None
    per_row = torch.is_tensor(lr) and lr.numel() > 1
    if per_row and lr.numel() != n:
        return False
    rate = lr.reshape(n).to(torch.float64) if per_row else float(lr)
    if c1 is not None:
        step = (rate / c1.reshape(n).to(torch.float64)).contiguous()
    elif per_row:
        step = rate.contiguous()
    if c2 is not None:
        rs2 = c2.reshape(n).to(torch.float64).rsqrt().contiguous()
    fn = kernel("sm3_step", theta_out.dtype, ARGTYPES)
    nt = threads()
    scratch = None                          # a layer's maxima, per thread (matrices only)
    if any(len(shape) > 1 for _, shape, _ in cover.blocks):
        scratch = theta_out.new_empty(nt * max(cover.size, 1))
    if n:
        fn(ptr(theta_out), ptr(theta), ptr(g), ptr(m_out), ptr(m), ptr(mu_out), ptr(mu),
           ptr(nu_out), ptr(idx), n, d, cover.size, layers, ptr(desc), ptr(step), ptr(rs2),
           0.0 if per_row else rate, float(eps), int(adam), float(beta1), float(beta2),
           ptr(scratch), nt, int(sm3i))
    count("sm3_step")
    return True
