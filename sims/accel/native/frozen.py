"""The frozen-state local step of MimeLite / Mime and their LAMB variants in one C pass
(``frozen.c``; :mod:`sims.accel.native`).

With the frozen server terms ``m, P = b2 v + eps, Q = vhat + eps`` (and Mime's ``c``) as the
server's ``[R, d]`` rows and the chunk's replica runs, the kernel reads each run's server row
from the cache for every participant row, so a step streams ``theta``, ``g`` (and Mime's
anchor gradient) once and writes ``theta`` once. With a trust ratio (MimeLite-LAMB,
Mime-LAMB; Fed-LAMB Alg. 2 line 13 on the base direction) each layer of each row is done
while it is in the cache: ``u`` into a layer-sized scratch, the layer norms, the step.
"""
from __future__ import annotations

import ctypes

import torch

from . import count, kernel, ptr, rate, threads, usable

PHI_CODES = {"clip": 0, "identity": 1, "update_norm": 2}
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
# out, theta, g, anchor, c, m, p, q, rows, d, lr_rows, lr, b1, b2, nlayers, offsets, phi,
# phi_min, phi_max, lam, scratch, scratch_len, nthreads
ARGTYPES = ([_P] * 8 + [_I64, _I64, _P, _F64, _F64, _F64, _I64, _P, _I64, _F64, _F64, _F64, _P]
            + [_I64, _I64])


def layer_offsets(layout) -> torch.Tensor:
    """``[L + 1]`` int64 start offsets of the layout's layers (contiguous, in order)."""
    bounds = [0]
    for sl in layout.slices:
        if sl.start != bounds[-1] or (sl.step or 1) != 1:
            raise ValueError("layer slices must tile the flat vector in order")
        bounds.append(sl.stop)
    return torch.tensor(bounds, dtype=torch.int64)


def trust_args(trust, layout):
    """``(scratch_len, consts, offsets)`` for a kernel's trust-ratio arguments (``native.h``'s
    trust step; ``trust`` a :class:`sims.rules.optim.TrustRatio` or None): the largest layer's
    length (a scratch of that many entries a thread), the arguments ``nlayers, offsets,
    phi, phi_min, phi_max, lam``, and the offsets tensor they point into (held by the
    caller until the call returns). No trust ratio: no layers, no scratch."""
    if trust is None:
        return 0, (0, None, 0, 0.0, 0.0, 0.0), None
    offsets = layer_offsets(layout)
    consts = (len(offsets) - 1, ptr(offsets), PHI_CODES[trust.phi], float(trust.phi_min),
              float(trust.phi_max), float(trust.lam))
    return int((offsets[1:] - offsets[:-1]).max()), consts, offsets


def frozen_step(theta, g, m, p, q, runs, lr, b1: float, b2: float, *, anchor=None, c=None,
                trust=None, layout=None, out=None):
    """``out = theta - lr U(g; s)`` (the kernel's rule in ``frozen.c``'s header; ``trust``:
    a :class:`sims.rules.trust.TrustRatio`, per layer of ``layout``). ``m, p, q, c``: ``[R,
    d]`` server rows (``q``, ``anchor``, ``c`` may be None), ``runs``: ``(replica, rows)``
    over the rows of ``theta``; ``lr`` a number or a tensor of one rate per row; ``out`` may
    be ``theta``. Returns ``out``, or None (nothing written) when the kernels cannot take
    these tensors."""
    B, d = theta.shape
    got = rate(lr, B, theta.dtype)
    if got is None:
        return None
    lr_value, lr_rows = got
    if out is None:
        out = torch.empty_like(theta)
    if not usable(theta, g, m, p, q, anchor, c, out, lr_rows):
        return None
    fn = kernel("frozen_step", theta.dtype, ARGTYPES)
    scratch_len, consts, offsets = trust_args(trust, layout)
    nt = threads()
    scratch = torch.empty(nt * scratch_len, dtype=theta.dtype) if scratch_len else None
    for rep, rows in runs:                 # one call per replica run, its server rows
        lo = rows.start
        fn(ptr(out, lo * d), ptr(theta, lo * d), ptr(g, lo * d), ptr(anchor, lo * d),
           ptr(c, rep * d), ptr(m, rep * d), ptr(p, rep * d), ptr(q, rep * d), rows.stop - lo,
           d, ptr(lr_rows, lo), lr_value, float(b1), float(b2), *consts, ptr(scratch),
           scratch_len, nt)
    count("frozen_step")
    return out
