"""The local AMSGrad / Adam / Yogi step in one C pass (``adaptive.c``; :mod:`sims.accel.native`).

Per row of the participants' ``[B, d]`` tensors one loop reads ``g, theta, m, v, vhat`` and
writes ``theta, m, v, vhat`` (AMSGrad; Adam, Yogi and a round-fixed ``vhat`` write no ``vhat``):
the rule's 9 streams. Every option of the rule takes it: AMSGrad (``vhat`` per step, the max of
the corrected ``v``, or fixed for the round), Adam or Yogi (``eps`` outside the root), bias correction with separate counts
for ``m`` and ``v``, ``eps`` inside the root, coupled or decoupled weight decay, FedLADA's
amendment (Alg. 3 line 12) with ``g_a`` read from the server's ``[R, d]`` rows (one per
replica run, never gathered), Fed-LAMB's trust ratio (Alg. 2 line 13, per row and layer with
``u`` in a layer-sized scratch while it is in the cache), one rate per row, a mask of the rows
that step. An output is written in place where the caller owns its tensor (the engine's
buffers), else into a new tensor (one pass either way).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from . import count, kernel, ptr, rate, rows_of, threads, usable
from .frozen import trust_args

MODES = {("amsgrad", "step"): 0, ("amsgrad", "fixed"): 1, ("adam", "step"): 2,
         ("adam", "fixed"): 2, ("yogi", "step"): 3, ("yogi", "fixed"): 3}
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
# out, theta, g, m_out, m, v_out, v, vh_out, vh, ga, ga_stride, rows, d, n, nm, lr_rows,
# row_mask, lr, mode, bc, b1, b2, eps, alpha, wd, wd_coupled, nlayers, offsets, phi,
# phi_min, phi_max, lam, scratch, scratch_len, nthreads
ARGTYPES = ([_P] * 10 + [_I64, _I64, _I64] + [_P] * 4 + [_F64, _I64, _I64]
            + [_F64] * 5 + [_I64, _I64, _P, _I64, _F64, _F64, _F64, _P, _I64, _I64])


@dataclass(frozen=True)
class AdaptiveKernel:
    """The kernel's constants, read off a client rule by :mod:`sims.accel.adaptive`."""
    kind: str                 # "amsgrad", "adam" or "yogi" (eps outside the root)
    vhat: str                 # "step" or "fixed"
    beta1: float
    beta2: float
    eps: float
    bias_correction: bool
    alpha: float = 1.0
    weight_decay: float = 0.0
    coupled: bool = True
    trust: object = None      # a sims.rules.trust.TrustRatio, or None


def _out(x: torch.Tensor, mine: bool, others) -> torch.Tensor:
    """``x`` itself when the caller owns it and it shares memory with none of ``others``,
    else a new tensor like it."""
    if mine and x.is_contiguous():
        p = x.untyped_storage().data_ptr()
        if not any(o is not None and o.untyped_storage().data_ptr() == p for o in others):
            return x
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def adaptive_step(kr: AdaptiveKernel, theta, g, m, v, vhat, n, nm, lr, layout, ga=None,
                  owned_theta=False, owned_state=False, mask=None):
    """One step: ``(theta', m', v', vhat')`` as the rule gives them (up to rounding), or None
    (nothing written) when the kernel cannot take the operands. ``ga``: the amendment's
    ``[B, d]`` rows, or ``(server [R, d], rep [B])``, each row reading its replica's server
    row; ``lr`` a number or one rate per row; ``n``, ``nm`` ``[B]`` the counts before the step;
    ``mask`` (``[B]`` bool, None: every row): the rows that step, the others keeping ``theta``
    and their state; ``owned_*``: whether ``theta`` / ``m, v, vhat`` may be written in place."""
    B, d = theta.shape
    mask_u8 = None
    if mask is not None:
        if mask.dtype != torch.bool or mask.shape != (B,) or mask.device.type != "cpu":
            return None
        mask_u8 = mask.contiguous().view(torch.uint8)
    dtype = theta.dtype
    mode = MODES[(kr.kind, kr.vhat)]
    amend = kr.alpha != 1
    got = rate(lr, B, dtype)
    if got is None or (amend and ga is None):
        return None
    lr_value, lr_rows = got
    runs, ga_t, ga_stride = [(0, slice(0, B))], None, 0
    if amend:
        if torch.is_tensor(ga):
            if ga.shape != theta.shape:
                return None
            ga_t, ga_stride = ga, d
        else:
            ga_t, rep = ga
            if ga_t.dim() != 2 or ga_t.shape[1] != d or rep.shape != (B,):
                return None
            runs = replica_runs(rep)
    n, nm = rows_of(n, B, dtype), rows_of(nm, B, dtype)
    ins = (g, m, v) if mode >= 2 else (g, m, v, vhat)
    if n is None or nm is None or any(t.shape != theta.shape for t in ins):
        return None
    if not usable(theta, *ins, ga_t, lr_rows, n, nm):
        return None
    reads = [theta, g, m, v, vhat if mode < 2 else None, ga_t, lr_rows, n, nm]

    def others(x, *outs):                   # every operand but x, and the outputs so far
        return [r for r in reads if r is not x] + list(outs)
    out = _out(theta, owned_theta, others(theta))
    m_out = _out(m, owned_state, others(m, out))
    v_out = _out(v, owned_state, others(v, out, m_out))
    vh_out = _out(vhat, owned_state, others(vhat, out, m_out, v_out)) if mode == 0 else None
    scratch_len, consts, offsets = trust_args(kr.trust, layout)
    fn = kernel("adaptive_step", dtype, ARGTYPES)
    scalars = (lr_value, mode, int(kr.bias_correction), float(kr.beta1), float(kr.beta2),
               float(kr.eps), float(kr.alpha), float(kr.weight_decay), int(kr.coupled))
    nt = threads()
    scratch = torch.empty(nt * scratch_len, dtype=dtype) if scratch_len else None
    vh_in = vhat if mode < 2 else None
    for rep, rows in runs:                  # one call per replica run (its g_a row)
        lo, hi = rows.start, rows.stop
        ga_p = ptr(ga_t, (lo if ga_stride else rep) * d)      # rows of g_a, or its server row
        fn(ptr(out, lo * d), ptr(theta, lo * d), ptr(g, lo * d), ptr(m_out, lo * d),
           ptr(m, lo * d), ptr(v_out, lo * d), ptr(v, lo * d), ptr(vh_out, lo * d),
           ptr(vh_in, lo * d), ga_p, ga_stride, hi - lo, d, ptr(n, lo), ptr(nm, lo),
           ptr(lr_rows, lo), ptr(mask_u8, lo), *scalars, *consts, ptr(scratch), scratch_len,
           nt)
    count("adaptive_step")
    return out, m_out, v_out, (vh_out if mode == 0 else vhat)


def replica_runs(rep: torch.Tensor) -> list[tuple[int, slice]]:
    """``(replica, rows)`` for each run of equal consecutive entries of ``rep[B]``."""
    runs, lengths = torch.unique_consecutive(rep, return_counts=True)
    out, lo = [], 0
    for r, length in zip(runs.tolist(), lengths.tolist()):
        out.append((r, slice(lo, lo + length)))
        lo += length
    return out
