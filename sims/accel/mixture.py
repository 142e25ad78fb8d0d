"""A mixture's members each by its own plan (FedAda2's blended clients, Alg. 5).

Each member steps only its own rows: a member with a fast step takes it under the mask of
its rows (the kernels step those rows in place in the chunk's ``theta`` and in the member's
state), a plain-SGD member updates its rows in place, and any other member's rows are
gathered, stepped by its readable rule and written back. Rows past a member's step budget
keep ``theta`` and their state, as :class:`sims.rules.mixture.Mixture` says.
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
    states = []
    for l, (member, p, st) in enumerate(zip(mix.members, plans, state["members"])):
        mine = mix.rows_of(l, info) & active
        idx = mine.nonzero().squeeze(-1)
        if len(idx) == 0:
            states.append(st)
            continue
        got = None
        if p is not None and p.step is not None:       # its rows, in place where it may
            got = p.step(theta, g, {**st, "k": info.k}, lr, mine, info, owned)
        if got is not None:
            theta, new = got
            states.append({k: new[k] for k in st})
            continue
        lr_l = lr.index_select(0, idx) if torch.is_tensor(lr) and lr.dim() > 0 else lr
        if len(member) == 0 and not torch.is_tensor(lr_l):          # plain SGD, in place
            theta.index_add_(0, idx, g.index_select(0, idx), alpha=-lr_l)
            states.append(st)
            continue
        sub = {**{k: v.index_select(0, idx) for k, v in st.items()},
               "k": info.k.index_select(0, idx)}
        th, new = local_step(member, theta.index_select(0, idx), g.index_select(0, idx), sub,
                             lr_l, None, info.rows(idx))
        theta.index_copy_(0, idx, th)
        states.append({k: st[k].index_copy(0, idx, new[k]) for k in st})
    k = state["k"] + active.to(state["k"].dtype)
    return theta, {**state, "members": states, "k": k}
