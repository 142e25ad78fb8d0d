"""A mixture's members each by its own plan (FedAda2's blended clients, Alg. 5).

Each member's rows are gathered, stepped by the member's plan where it has one (else its
readable rule), and written back; rows past a member's step budget keep ``theta`` and their
state, as :class:`sims.rules.mixture.Mixture` says.
"""
from __future__ import annotations

import functools

import torch

from ..rules.base import local_step
from ..rules.mixture import Mixture
from .forms import Plan


def plan(rule, problem, plan_of) -> Plan | None:
    """The mixture's plan, its members planned by ``plan_of`` (:func:`sims.accel.plan`)."""
    items = list(rule)
    if len(items) != 1 or not isinstance(items[0], Mixture):
        return None
    mix = items[0]
    members = [plan_of(m, problem) for m in mix.members]
    if all(p is None or p.step is None for p in members):
        return None
    return Plan("mixture", step=functools.partial(step, mix, members))


def step(mix, plans, theta, g, state, lr, mask, info, owned):
    """Every member's rows through its plan (module docstring)."""
    active = torch.ones_like(info.k, dtype=torch.bool) if mask is None else mask
    new_theta = theta
    states = []
    for l, (member, p, st) in enumerate(zip(mix.members, plans, state["members"])):
        idx = (mix.rows_of(l, info) & active).nonzero().squeeze(-1)
        if len(idx) == 0:
            states.append(st)
            continue
        sub = {**{k: v.index_select(0, idx) for k, v in st.items()},
               "k": info.k.index_select(0, idx)}
        sub_info = info.rows(idx)
        th = theta.index_select(0, idx)
        lr_l = lr.index_select(0, idx) if torch.is_tensor(lr) and lr.dim() > 0 else lr
        got = None if p is None or p.step is None else p.step(
            th, g.index_select(0, idx), sub, lr_l, None, sub_info, True)
        if got is None:
            got = local_step(member, th, g.index_select(0, idx), sub, lr_l, None, sub_info)
        th, new = got
        new_theta.index_copy_(0, idx, th)
        states.append({k: st[k].index_copy(0, idx, new[k]) for k in st})
    k = state["k"] + active.to(state["k"].dtype)
    return new_theta, {**state, "members": states, "k": k}
