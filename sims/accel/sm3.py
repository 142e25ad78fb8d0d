"""FedAda2's full-preconditioner, SM3-II and SM3-I client steps in C.

Planned for a client rule that is one :class:`sims.rules.sm3.SM3` with the full, the SM3-II
or the SM3-I preconditioner updated at every step (``delay = 1``, no freezing, no clipping):
:func:`sims.accel.native.sm3.sm3_step` reads ``g``, ``theta``, ``mu`` (Adam: ``m``) and
writes ``theta``, ``mu``, ``nu`` (Adam: ``m``), the cover's minimum and maxima folded in
(one pass; SM3-I two over a matrix layer, its maxima of ``g^2`` coming first).
"""
from __future__ import annotations

import functools

import torch

from ..rules.sm3 import SM3
from .forms import Plan
from .native import library
from .native.sm3 import layer_desc, sm3_step


def plan(rule, problem) -> Plan | None:
    items = list(rule)
    if len(items) != 1 or not isinstance(items[0], SM3):
        return None
    sm3 = items[0]
    if (sm3.precond not in ("full", "sm3-ii", "sm3-i") or sm3.delay != 1 or sm3.freeze_epochs
            or sm3.clip or library() is None):
        return None
    return Plan("sm3-C", step=functools.partial(step, sm3))


def step(sm3, theta, g, state, lr, mask, info, owned):
    """One step through the kernel (or None: the readable rule)."""
    cover = sm3.cover(info.layout)
    if layer_desc(cover) is None:
        return None
    full = sm3.precond == "full"
    rows = None if mask is None else mask.nonzero().squeeze(-1)
    k = state["k"] + (1 if mask is None else mask.to(state["k"].dtype))
    kr = k if rows is None else k.index_select(0, rows)

    def out(key):                     # where the new rows go: in place when owned
        t = state[key]
        if owned and t.is_contiguous():
            return t
        return torch.empty_like(t) if rows is None else t.clone()
    theta_out = theta                 # (the engine's: its unmasked rows are left alone)
    mu_out = out("mu")
    nu_out = None if full else out("nu")
    m_out = out("m") if sm3.adam else None
    if torch.is_tensor(lr) and lr.numel() > 1:                  # a rate per (stepped) row
        lr = lr.reshape(-1) if rows is None else lr.reshape(-1).index_select(0, rows)
    c1 = c2 = None
    if sm3.adam and sm3.bias_correction:
        c1 = 1 - sm3.beta1 ** kr
        c2 = 1 - sm3.beta2 ** (kr + info.t if sm3.count_offset == "round" else kr)
    ok = sm3_step(cover, theta, g, state["mu"], lr, sm3.eps, m=state.get("m"),
                  beta1=sm3.beta1, beta2=sm3.beta2, c1=c1, c2=c2, rows=rows,
                  theta_out=theta_out, mu_out=mu_out, m_out=m_out, nu_out=nu_out,
                  sm3i=sm3.precond == "sm3-i")
    if not ok:
        return None
    new = {**state, "mu": mu_out, "nu": mu_out if full else nu_out, "k": k}
    if sm3.adam:
        new["m"] = m_out
    return theta_out, new
