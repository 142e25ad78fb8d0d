"""The frozen-state local step of MimeLite / Mime and their LAMB variants in one C pass
(``frozen.c``; :mod:`sims.accel.native`).

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

The kernel also reads a :class:`sims.deferred_grad.DeferredGrad`'s block where it is (the
first weight's gradient left in the per-client products' outputs; MimeLite asks for it,
``takes_deferred_grad``), a round's first step from the server rows (a
:class:`sims.row_source.ServerRows` ``theta``) and writes the last step's delta
(``delta_from``): on the benchmark (one thread, interleaved, medians of 3, the machine shared
with other jobs) a MimeLite round 81.5 -> 70.1 ms, MimeLite-LAMB 89.2 -> 81.9 ms with both.
"""
from __future__ import annotations

import ctypes

import torch

from ...row_source import ServerRows
from . import block_table, count, kernel, ptr, rate, threads, usable

PHI_CODES = {"clip": 0, "identity": 1, "update_norm": 2}
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
ARGTYPES = ([_P] * 8 + [_I64, _I64, _P, _F64, _F64, _F64, _I64, _P, _I64, _F64, _F64, _F64, _P]
            + [_I64, _I64, _I64, _P, _P, _I64, _I64])


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
                trust=None, layout=None, out=None, delta_from=None):
    """``out = theta - lr U(g; s)`` (the kernel's rule in ``frozen.c``'s header; ``trust``:
    a :class:`sims.rules.optim.TrustRatio`, per layer of ``layout``). ``m, p, q, c``: ``[R, d]``
    server rows (``q``, ``anchor``, ``c`` may be None), ``runs``: ``(replica, rows)`` of
    :func:`sims.core.batching.replica_runs`; ``lr`` a number or a tensor of one rate per row;
    ``out`` may be ``theta``. ``theta`` may be a :class:`sims.row_source.ServerRows` (a
    round's first step: each run reads its replica's server row where it is);
    ``delta_from`` (a ``ServerRows``): ``out`` is ``server - theta'``, the round's delta (the
    engine's last step). ``g`` may be a :class:`sims.deferred_grad.DeferredGrad`: its block
    is read where it is (:func:`sims.accel.native.block_table`). Returns ``out``, or None (nothing written) when the kernels cannot
    take these tensors."""
    B, d = theta.shape
    got = rate(lr, B, theta.dtype)
    if got is None:
        return None
    lr_value, lr_rows = got
    g, g_table, blk_lo, blk_hi = block_table(g, theta, layout, trust is not None)
    start = theta.server if isinstance(theta, ServerRows) else None
    srv = None if delta_from is None else delta_from.server
    if out is None:
        out = torch.empty(theta.shape, dtype=theta.dtype, device=theta.device)
    if not usable(theta if start is None else start, g, m, p, q, anchor, c, out, lr_rows,
                  srv):
        return None
    fn = kernel("frozen_step", theta.dtype, ARGTYPES)
    scratch_len, consts, offsets = trust_args(trust, layout)
    nt = threads()
    scratch = torch.empty(nt * scratch_len, dtype=theta.dtype) if scratch_len else None
    for rep, rows in runs:                 # one call per replica run, its server rows
        lo = rows.start
        th = ptr(theta, lo * d) if start is None else ptr(start, rep * d)
        fn(ptr(out, lo * d), th, ptr(g, lo * d), ptr(anchor, lo * d),
           ptr(c, rep * d), ptr(m, rep * d), ptr(p, rep * d), ptr(q, rep * d), rows.stop - lo,
           d, ptr(lr_rows, lo), lr_value, float(b1), float(b2), *consts, ptr(scratch),
           scratch_len, nt, d if start is None else 0, ptr(srv, rep * d), ptr(g_table, lo),
           blk_lo, blk_hi)
    count("frozen_step")
    return out
