"""The local AMSGrad / Adam / Yogi step in one C pass (Fed-AMS, Fed-LAMB, FedLADA, LocalAdam,
local Yogi).

Planned for a client rule of the form ``[AddDecayedWeights] Adaptive [TrustRatio] [Amend]
[AddDecayedWeights]`` (at most one weight decay) whose :class:`sims.rules.moments.Adaptive`
is AMSGrad (``vhat`` per step, the max of the corrected ``v`` when bias-corrected) or Adam,
with ``eps`` inside the root, or Yogi with ``eps`` outside: :func:`sims.accel.native.adaptive.adaptive_step`. The rows'
``g_a`` is read from the server's rows (one per replica run), not gathered.
"""
from __future__ import annotations

import functools

from ..rules.moments import Adaptive
from ..rules.terms import AddDecayedWeights, Amend
from ..rules.trust import TrustRatio
from .forms import Plan
from .native import library
from .native.adaptive import AdaptiveKernel, adaptive_step


def kernel_of(rule) -> tuple | None:
    """``(AdaptiveKernel, amend key)`` for a rule the kernel computes, else None."""
    items = list(rule)
    wd, coupled = 0.0, True
    if items and isinstance(items[0], AddDecayedWeights):
        wd = items.pop(0).weight_decay
    if not items or not isinstance(items[0], Adaptive):
        return None
    ada = items.pop(0)
    trust = items.pop(0) if items and isinstance(items[0], TrustRatio) else None
    amend = items.pop(0) if items and isinstance(items[0], Amend) else None
    if items and isinstance(items[0], AddDecayedWeights) and not wd:
        wd, coupled = items.pop(0).weight_decay, False
    if items or ada.kind not in ("amsgrad", "adam", "yogi"):
        return None
    if ada.eps and ada.eps_inside == (ada.kind == "yogi"):
        return None                     # (eps inside the root for AMSGrad / Adam, outside for Yogi)
    if ada.kind == "amsgrad" and ada.bias_correction and not ada.correct_before_max:
        return None                     # (torch.optim's order: the kernel's is Fed-LAMB's)
    kr = AdaptiveKernel(ada.kind, ada.vhat, ada.beta1, ada.beta2, ada.eps,
                        ada.bias_correction, 1.0 if amend is None else amend.alpha, wd,
                        coupled, trust)
    return kr, None if amend is None else amend.key


def plan(rule, problem) -> Plan | None:
    got = kernel_of(rule)
    if got is None or library() is None:
        return None
    return Plan("adaptive-C", step=functools.partial(step, *got))


def step(kr, ga_key, theta, g, state, lr, mask, info, owned):
    """One step through the kernel (or None: the readable rule)."""
    ga = None
    if ga_key is not None:
        rows = info.bcast
        per = getattr(rows, "per_replica", None)
        ga = per(ga_key) if per is not None else rows[ga_key]
    got = adaptive_step(kr, theta, g, state["m"], state["v"], state.get("vhat"), state["n"],
                        state["nm"], lr, info.layout, ga, owned_theta=True, owned_state=owned,
                        mask=mask)
    if got is None:
        return None
    out, m, v, vhat = got
    one = 1 if mask is None else mask.to(state["k"].dtype)
    new = {**state, "m": m, "v": v, "n": state["n"] + one, "nm": state["nm"] + one,
           "k": state["k"] + one}
    if "vhat" in state:
        new["vhat"] = vhat
    return out, new
