"""The local AMSGrad / Adam step of Fed-AMS, Fed-LAMB, LocalAdam and FedLADA in one C pass
(``adaptive.c``; :mod:`sims.accel.native`).

:meth:`sims.algorithms.adaptive.LocalAdaptive.step` calls :func:`local_adaptive_step` first
(after the opt-in compiled form): per row of the participants' ``[B, d]`` tensors one loop
reads ``g, theta, m, v, vhat`` and writes ``theta, m, v, vhat`` (AMSGrad; Adam and a
round-fixed ``vhat`` write no ``vhat``), the rule's 9 streams, against torch's fused Adam
kernel plus a ``vhat`` rescale pass, a trust-ratio pass group and an amendment pass
(:meth:`~sims.algorithms.adaptive.LocalAdaptive._torch_fused_step`). The rule's options all
take it: AMSGrad (``vhat`` per step or fixed for the round) or Adam, bias correction with
separate counts for ``m`` and ``v``, ``eps`` inside the root, coupled or decoupled weight
decay, FedLADA's amendment (Alg. 3 line 12) with ``g_a`` read from the server's ``[R, d]``
rows (one per replica run, :class:`~sims.algorithms.adaptive.ReplicaRows`, never gathered),
Fed-LAMB's trust ratio (Alg. 2 line 13, per row and layer with ``u`` in a layer-sized
scratch while it is in the cache), one rate per row, a mask of the rows that step.

Any of ``theta``, ``m``, ``v`` and ``vhat`` may be a row source (:mod:`sims.row_source`),
read through a table of row addresses: the server's rows (a round's first step reads the
models and FedLADA's / Fed-AMS's server ``v`` / ``vhat`` where they are), a shared zero row (a
fresh ``m``), or the participants' own state rows (Fed-AMS's and Fed-LAMB's persisting ``m``,
``v``: read and written in place, nothing gathered or written back); with ``delta_from`` the
step writes the round's delta ``server - theta'`` instead of ``theta'`` (the engine's last
step: no subtraction pass after it). Each saves a read and a write of ``[B, d]`` a round; on
the issue-16 benchmark (one thread, interleaved, medians of 3, machine shared with other jobs)
a Fed-AMS round 78.0 -> 73.6 ms, FedLADA 78.4 -> 75.1 ms.

Bias-corrected AMSGrad keeps ``vhat`` in the torch-fused step's units (``vhat c2`` and
``vhat_scale = c2``, :func:`sims.rules.optim.unscaled_vhat`), rescaled inline: ``max(vhat c2 /
s_in, v')``, so the state reads the same whichever form took the step. Ownership
(:class:`sims.ownership.Owned`): an owned ``theta``, ``m``, ``v``, ``vhat`` is written in
place (one pass: read and write the same element), anything else into a new tensor (still
one pass: read the old, write the new); an owned tensor that shares memory with another
operand is not written in place.

Measured on the issue-16 benchmark (``25 x 159,010`` float32, one thread), a round's 10
local steps against the torch-fused form, medians of five runs each: Fed-AMS 31 -> 25 ms,
Fed-LAMB 56 -> 36.5 ms, FedLADA 34 -> 28 ms, LocalAdam 27 -> 25 ms (the ranges, the per-step
and the masked-step numbers: :meth:`sims.algorithms.adaptive.LocalAdaptive.step`). Tested by
``tests/test_native_adaptive.py`` (and, with the kernel on and off,
``tests/test_fast_adaptive.py``, ``tests/test_ownership.py``).
"""
from __future__ import annotations

import ctypes

import torch

from ...core.batching import replica_runs
from ...ownership import NOTHING
from ...row_source import RowSource, ServerRows, SlotRows, backing
from . import block_table, count, kernel, ptr, rate, rows_of, threads, usable
from .frozen import trust_args

MODES = {("amsgrad", "step"): 0, ("amsgrad", "round"): 1, ("adam", "step"): 2,
         ("adam", "round"): 2}
_I64, _F64, _P = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
ARGTYPES = ([_P] * 10 + [_I64, _I64, _I64] + [_P] * 6 + [_F64, _I64, _I64]
            + [_F64] * 5 + [_I64, _I64, _P, _I64, _F64, _F64, _F64, _P, _I64, _I64]
            + [_P, _I64, _I64] + [_P] * 7)


def _writable(x, mine: bool, others) -> torch.Tensor:
    """``x`` itself when the caller owns it and it shares memory with none of ``others`` (the
    step's other operands, whatever their names: a tensor handed as two entries is two
    operands), else a new tensor like it. A :class:`sims.row_source.SlotRows` owned is
    written in place (a participant's own state rows); any other row source gets a new
    tensor."""
    if isinstance(x, SlotRows):
        return x if mine else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if isinstance(x, RowSource):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if mine and x.is_contiguous():
        p = x.untyped_storage().data_ptr()
        if not any(o is not None and o.untyped_storage().data_ptr() == p for o in others):
            return x
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def local_adaptive_step(rule, theta, g, state, lr, layout, ga=None, owned=None, mask=None,
                        delta_from=None):
    """One step of ``rule`` (a :class:`sims.algorithms.adaptive.LocalAdaptive`, numeric
    constants): ``(theta, state)`` as ``rule.reference_step`` gives them (up to rounding;
    ``vhat`` scaled as the module says), or None (nothing written) when the kernel cannot take
    them. ``ga``: the amendment's ``[B, d]`` rows, or ``(server, rep)``: the server's ``[R,
    d]`` rows and each row's replica (:func:`sims.core.batching.per_replica`); ``lr`` a number or
    one rate per row; ``owned`` a :class:`sims.ownership.Owned` (None: nothing); ``mask``
    (``[B]`` bool, None: every row): the rows that step, the others keeping ``theta`` and
    their state. ``g`` may be a :class:`sims.deferred_grad.DeferredGrad`: its block is read
    where it is (:func:`sims.accel.native.block_table`). ``theta``, ``m``, ``v`` and ``vhat`` may be row
    sources (:mod:`sims.row_source`: the server's rows, zeros, the participants' own state
    rows, read through address tables; an owned :class:`~sims.row_source.SlotRows` ``m`` or
    ``v`` is written in place and handed back as it is). ``delta_from`` (a
    :class:`~sims.row_source.ServerRows`): the first return is the round's delta
    ``server - theta'`` instead of ``theta'`` (the engine's last step)."""
    B, d = theta.shape
    g, g_table, blk_lo, blk_hi = block_table(g, theta, layout, rule.trust is not None)
    mask_u8 = None
    if mask is not None:
        if mask.dtype != torch.bool or mask.shape != (B,) or mask.device.type != "cpu":
            return None
        mask_u8 = mask.contiguous().view(torch.uint8)
    dtype = theta.dtype
    mode = MODES[(rule.rule, rule.vhat)]
    amend = rule.alpha != 1
    if amend and ga is None:
        return None
    got = rate(lr, B, dtype)
    if got is None:
        return None
    lr_value, lr_rows = got
    m, v, vhat = state["m"], state["v"], state["vhat"]
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
    scale_in = state.get("vhat_scale")
    if scale_in is not None:
        if mask is not None and mode == 0 and not rule.bias_correction:
            return None       # the masked rows' vhat would stay scaled in a state without scale
        scale_in = rows_of(scale_in, B, dtype)
        if scale_in is None:
            return None
    n, nm = rows_of(state["n"], B, dtype), rows_of(state["nm"], B, dtype)
    if n is None or nm is None or any(t.shape != theta.shape for t in (
            (g, m, v) if mode == 2 else (g, m, v, vhat))):
        return None
    if delta_from is not None and (not isinstance(delta_from, ServerRows)
                                   or delta_from.shape != theta.shape):
        return None
    rows_in = [backing(x) for x in (theta, m, v, vhat if mode != 2 else None, delta_from)]
    if not usable(*rows_in, g, ga_t, lr_rows, scale_in, n, nm):
        return None
    bc = rule.bias_correction
    own = NOTHING if owned is None else owned
    reads = [*rows_in[:4], g, ga_t, lr_rows, n, nm, scale_in, rows_in[4]]

    def others(i, *outs):                   # every operand but input i, and the outputs so far
        return reads[:i] + reads[i + 1:] + [backing(o) for o in outs]
    out = _writable(theta, own.theta, others(0))
    m_out = _writable(m, own("m"), others(1, out))
    v_out = _writable(v, own("v"), others(2, out, m_out))
    vh_out = None
    if mode == 0:
        vh_out = _writable(vhat, own("vhat"), others(3, out, m_out, v_out))
        if isinstance(vh_out, RowSource):              # (a row source's vhat is not written)
            vh_out = torch.empty(vhat.shape, dtype=dtype)
    scale_out = torch.empty(B, 1, dtype=dtype) if mode == 0 and bc else None
    scratch_len, consts, offsets = trust_args(rule.trust, layout)
    wd = float(rule.weight_decay)
    fn = kernel("adaptive_step", dtype, ARGTYPES)
    scalars = (lr_value, mode, int(bc), float(rule.beta1), float(rule.beta2), float(rule.eps),
               float(rule.alpha), wd, int(rule.wd_mode == "coupled"))
    nt = threads()
    scratch = torch.empty(nt * scratch_len, dtype=dtype) if scratch_len else None
    tables = {}                             # each row source's addresses, made once

    def operand(x, lo):
        if not isinstance(x, RowSource):
            return ptr(x, lo * d), None
        if id(x) not in tables:
            tables[id(x)] = x.addresses()
        return None, ptr(tables[id(x)], lo)
    vh_in = vhat if mode != 2 else None
    for rep, rows in runs:                  # one call per replica run (its g_a row)
        lo, hi = rows.start, rows.stop
        ga_p = ptr(ga_t, (lo if ga_stride else rep) * d)      # rows of g_a, or its server row
        (th_p, th_tab), (m_p, m_tab), (v_p, v_tab) = (operand(x, lo) for x in (theta, m, v))
        (mo_p, mo_tab), (vo_p, vo_tab) = operand(m_out, lo), operand(v_out, lo)
        vh_p, vh_tab = (None, None) if vh_in is None else operand(vh_in, lo)
        srv_tab = None if delta_from is None else operand(delta_from, lo)[1]
        fn(ptr(out, lo * d), th_p, ptr(g, lo * d), mo_p, m_p, vo_p, v_p, ptr(vh_out, lo * d),
           vh_p, ga_p, ga_stride, hi - lo, d, ptr(n, lo), ptr(nm, lo), ptr(scale_in, lo),
           ptr(scale_out, lo), ptr(lr_rows, lo), ptr(mask_u8, lo), *scalars, *consts,
           ptr(scratch), scratch_len, nt, ptr(g_table, lo), blk_lo, blk_hi, th_tab, m_tab,
           v_tab, mo_tab, vo_tab, vh_tab, srv_tab)
    count("adaptive_step")

    def counted(key):
        return state[key] + (1 if mask is None else mask.to(state[key].dtype))
    new = {"m": m_out, "v": v_out, "vhat": vh_out if mode == 0 else vhat,
           "n": counted("n"), "nm": counted("nm"), "k": counted("k")}
    if scale_out is not None:
        new["vhat_scale"] = scale_out
    elif mode != 0 and scale_in is not None:          # vhat passed through as it was kept
        new["vhat_scale"] = state["vhat_scale"]
    return out, new
