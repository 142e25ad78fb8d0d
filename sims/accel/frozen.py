"""The frozen-state step of MimeLite / Mime and their LAMB variants in one C pass.

Planned for a client rule ``[FirstGradient | SVRG] Frozen(base) [TrustRatio]`` with an
AMSGrad or Adam base (``eps`` inside the root, no bias correction): each step is ``theta -
lr U(g; s)`` with ``s`` the server's state, frozen for the round, so ``P = b2 v + eps`` and
``Q = vhat + eps`` are formed once per broadcast (kept against the broadcast tensors
themselves) and the kernel (:func:`sims.accel.native.frozen.frozen_step`) reads each
replica's row of ``m, P, Q`` (and Mime's ``c``) from the cache for all its participants.
"""
from __future__ import annotations

import functools
import weakref

import torch

from ..rules.frozen import Frozen
from ..rules.moments import Adaptive
from ..rules.terms import SVRG, FirstGradient
from ..rules.trust import TrustRatio
from .forms import Plan
from .native import library
from .native.adaptive import replica_runs
from .native.frozen import frozen_step


def plan(rule, problem) -> Plan | None:
    items = list(rule)
    first = svrg = False
    if items and isinstance(items[0], FirstGradient):
        first = bool(items.pop(0))
    elif items and isinstance(items[0], SVRG):
        svrg = bool(items.pop(0))
    if not items or not isinstance(items[0], Frozen):
        return None
    frozen = items.pop(0)
    trust = items.pop(0) if items and isinstance(items[0], TrustRatio) else None
    base = frozen.base
    if (items or not isinstance(base, Adaptive) or base.kind not in ("adam", "amsgrad")
            or not base.eps_inside or base.bias_correction or library() is None):
        return None
    return Plan("frozen-C", step=functools.partial(step, _Terms(base, frozen.prefix), first,
                                                   svrg, trust))


class _Terms:
    """``(m, b2 v + eps, vhat + eps)`` of the frozen state, per replica (``[R, d]``), formed
    once per broadcast: kept against the broadcast tensors (weak references and their
    in-place versions), so a new round's, chunk's or replica's broadcast recomputes them."""

    def __init__(self, base, prefix):
        self.base, self.prefix, self._cache = base, prefix, None

    def __call__(self, bcast):
        per = getattr(bcast, "per_replica", None)
        keys = ["m", "v"] + (["vhat"] if self.base.kind == "amsgrad" else [])
        got = [per(self.prefix + k) if per is not None else (bcast[self.prefix + k], None)
               for k in keys]
        srcs = tuple(t for t, _ in got)
        rep = got[0][1]
        versions = tuple(t._version for t in srcs)
        c = self._cache
        if c is not None and c[1] == versions and all(w() is t for w, t in zip(c[0], srcs)):
            return c[2], rep
        b2, eps = self.base.beta2, self.base.eps
        terms = (srcs[0], torch.mul(srcs[1], b2).add_(eps),
                 torch.add(srcs[2], eps) if len(srcs) > 2 else None)
        self._cache = (tuple(weakref.ref(t) for t in srcs), versions, terms)
        return terms, rep


def step(terms, first, svrg, trust, theta, g, state, lr, mask, info, owned):
    """One step through the kernel (or None: the readable rule)."""
    (m, p, q), rep = terms(info.bcast)
    B = theta.shape[0]
    if rep is None:                              # a plain dict of rows: each its own replica
        runs = [(b, slice(b, b + 1)) for b in range(B)]
    else:
        runs = replica_runs(rep)
    anchor = c = None
    if svrg:
        anchor = info.extra["anchor_grad"]
        per = getattr(info.bcast, "per_replica", None)
        c = per("c")[0] if per is not None else info.bcast["c"]
    out = frozen_step(theta, g, m, p, q, runs, lr, terms.base.beta1, terms.base.beta2,
                      anchor=anchor, c=c, trust=trust, layout=info.layout,
                      out=theta if mask is None else None)
    if out is None:
        return None
    if mask is not None:
        out = torch.where(mask.view(-1, 1), out, theta)
    new = dict(state)
    one = 1 if mask is None else mask.to(state["k"].dtype)
    if first:
        now = (info.k == 0).unsqueeze(-1)
        if mask is not None:
            now = now & mask.view(-1, 1)
        new["gx"] = torch.where(now, g, state["gx"])
    new["k"] = state["k"] + one
    return out, new
