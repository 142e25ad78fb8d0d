"""The frozen-state local step of MimeLite / Mime and their LAMB variants in one C pass
(``frozen.c``; :mod:`sims.native`).

:meth:`sims.algorithms.fed_lamb.MimeLite._frozen_step_fast` calls :func:`frozen_step` with
the frozen server terms ``m, P = b2 v + eps, Q = vhat + eps`` (and Mime's ``c``) as the
server's ``[R, d]`` rows and the chunk's replica runs; the kernel reads each run's server
row from the cache for every participant row, so a step streams ``theta``, ``g`` (and Mime's
anchor gradient) once and writes ``theta`` once. With a trust ratio (MimeLite-LAMB,
Mime-LAMB; Fed-LAMB Alg. 2 line 13 on the base direction) each layer of each row is done
while it is in the cache: ``u`` into a layer-sized scratch, the layer norms, the step.

Measured on the issue-16 benchmark's ``25 x 159,010`` float32, one thread, cold cache:
MimeLite's step 1.3 ms against 3.3 ms in the eager blocked form (1.6 ms while the float
kernel took its root and division in double).
"""
from __future__ import annotations

import ctypes

import torch

from . import count, kernel, ptr, threads, usable

PHI_CODES = {"clip": 0, "identity": 1, "update_norm": 2}
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
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


def frozen_step(theta, g, m, p, q, runs, lr, b1: float, b2: float, *, anchor=None, c=None,
                trust=None, layout=None, out=None):
    """``out = theta - lr U(g; s)`` (the kernel's rule in ``frozen.c``'s header; ``trust``:
    a :class:`sims.optim.TrustRatio`, per layer of ``layout``). ``m, p, q, c``: ``[R, d]``
    server rows (``q``, ``anchor``, ``c`` may be None), ``runs``: ``(replica, rows)`` of
    :func:`sims.batching.replica_runs`; ``lr`` a number or a tensor of one rate per row;
    ``out`` may be ``theta``. Returns ``out``, or None (nothing written) when the kernels
    cannot take these tensors."""
    B, d = theta.shape
    lr_rows = None
    if torch.is_tensor(lr):
        if lr.numel() == 1:
            lr = float(lr)
        elif lr.numel() == B:
            lr_rows = lr.reshape(B).to(theta.dtype).contiguous()
        else:
            return None
    out = torch.empty_like(theta) if out is None else out
    if not usable(theta, g, m, p, q, anchor, c, out, lr_rows):
        return None
    fn = kernel("frozen_step", theta.dtype)
    fn.argtypes = ARGTYPES
    if trust is not None:
        offsets = layer_offsets(layout)
        phi = PHI_CODES[trust.phi]
        scratch_len = int((offsets[1:] - offsets[:-1]).max())
        consts = (len(offsets) - 1, ptr(offsets), phi, float(trust.phi_min),
                  float(trust.phi_max), float(trust.lam))
    else:
        offsets, scratch_len, consts = None, 0, (0, None, 0, 0.0, 0.0, 0.0)
    nt, size = threads(), theta.element_size()
    scratch = theta.new_empty(nt * scratch_len) if scratch_len else None
    lr_value = 0.0 if lr_rows is not None else float(lr)

    def at(t, row):                        # the address of row ``row`` of a [n, d] tensor
        return None if t is None else ctypes.c_void_p(t.data_ptr() + row * d * size)

    for rep, rows in runs:                 # one call per replica run, its server rows
        lo = rows.start
        fn(at(out, lo), at(theta, lo), at(g, lo), at(anchor, lo), at(c, rep), at(m, rep),
           at(p, rep), at(q, rep), rows.stop - lo, d,
           None if lr_rows is None else ctypes.c_void_p(lr_rows.data_ptr() + lo * size),
           lr_value, float(b1), float(b2), *consts, ptr(scratch), scratch_len, nt)
    count("frozen_step")
    return out
