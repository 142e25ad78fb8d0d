"""Local SGD rounds fused with the problem's gradient.

A client rule made only of linear terms (weight decay, FedProx's proximal term, FedCM's
amendment, SCAFFOLD's control variate) makes each local step ``theta <- (1 - decay) theta -
lr_g g(theta) + shift`` with the same ``decay``, ``lr_g`` and ``shift`` at every step of the
round (:class:`sims.rules.terms.AffineSGD`): the problem then runs the whole round at once
(``problem.local_sgd_delta`` for plain SGD, where the MLP takes the Gram path, or
``local_sgd_affine``), gradient and update fused, and returns ``delta``.
"""
from __future__ import annotations

import functools

import torch

from ..rules.terms import AddDecayedWeights, AffineSGD, Amend, ControlVariate, Proximal
from .forms import Plan

LINEAR = (AddDecayedWeights, Proximal, Amend, ControlVariate)


def plan(rule, problem) -> Plan | None:
    if not all(isinstance(t, LINEAR) for t in rule):
        return None
    if not any(hasattr(problem, a) for a in ("local_sgd_delta", "local_sgd", "local_sgd_affine")):
        return None
    return Plan("sgd-round" if len(rule) == 0 else "affine-sgd-round",
                round=functools.partial(local_round, rule))


def affine_of(rule, lr, bcast, cstate) -> AffineSGD:
    """The round's :class:`AffineSGD`: with ``u = a g + b theta + sum_i f_i c_i`` after the
    rule's terms (composed left to right; ``c_i`` tensors: the round's start model, ``g_a``,
    ``c - c_i``), ``theta - lr u = (1 - lr b) theta - lr a g - lr sum_i f_i c_i`` (the shift
    formed in one pass a term)."""
    a, b, terms = 1.0, 0.0, []
    for t in rule:
        if isinstance(t, AddDecayedWeights):
            b = b + t.weight_decay
        elif isinstance(t, Proximal):
            b = b + t.mu
            terms.append((-t.mu, bcast["theta"]))
        elif isinstance(t, ControlVariate):
            terms.append((t.alpha, bcast["c"] - cstate["c"]))
        elif isinstance(t, Amend):
            a, b = t.alpha * a, t.alpha * b
            terms = [(t.alpha * f, c) for f, c in terms] + [(1 - t.alpha, bcast[t.key])]
    shift = None
    for f, c in terms:
        k = -lr * f
        if shift is None:
            shift = c * k
        elif torch.is_tensor(k):
            shift = torch.addcmul(shift, c, k)
        else:
            shift = torch.add(shift, c, alpha=k)
    return AffineSGD(lr if _equal(a, 1) else lr * a, 0.0 if _equal(b, 0) else lr * b, shift)


def _equal(x, value) -> bool:
    """``x == value`` for a number; False for a tensor (per-replica constants, ``[B, 1]``)."""
    return not torch.is_tensor(x) and x == value


def local_round(rule, lr, problem, bcast, b_cast, c_state, ctx, payload, step_mask):
    """``delta`` of the whole local round, or None where the problem has no fused form."""
    affine = affine_of(rule, lr, b_cast, c_state)
    rep, cli = ctx.replica, ctx.clients
    server = bcast["theta"]
    if affine.plain:
        if hasattr(problem, "local_sgd_delta"):
            delta = problem.local_sgd_delta(server, rep, cli, payload, affine.lr)
            if delta is not None:
                return delta
        if hasattr(problem, "local_sgd"):       # (a new tensor; its input left as it is)
            start = b_cast["theta"]
            end = problem.local_sgd(start, cli, payload, affine.lr)
            if end is not None:
                return torch.sub(start, end, out=end)
    if hasattr(problem, "local_sgd_affine"):
        return problem.local_sgd_affine(server, rep, cli, payload, step_mask, affine)
    return None
