"""Acceleration: the fast forms of the update rules, behind one interface.

An algorithm's client rule is a chain of transforms (:mod:`sims.rules`), and the readable
rule is what runs unless this package offers something faster for that very chain:

``plan(rule, problem, device) -> Plan | None``
    The fast form of ``rule`` (keyed on its transforms and their options) on this problem
    and device, or None. A :class:`Plan` has a ``step`` (one local step, same signature and
    result as :func:`sims.rules.base.local_step`, or None where it cannot take the operands)
    and/or a ``round`` (a whole local round fused with the problem's gradient: local SGD,
    plain or with linear terms). Only on the CPU: off it, the readable rule is the only form.

The engine asks :func:`executor` once per run for the run's :class:`Executor` and hands it to
every hook as ``ctx.run``; the executor plans each rule the first time it sees it and keeps
the plan for the run. It also runs Fed-EF's compression (TopK in C). So nothing about
acceleration lives in an algorithm: a wrapper (differential privacy, per-replica
hyperparameters) runs its inner algorithm's rule, and gets that rule's plan.

The forms (what each measured to save, and what was removed: ``docs/speed.md``):

* :mod:`.sgd` -- local SGD rounds, plain or with weight decay / proximal / amendment /
  control-variate terms, fused with the problem's gradient (``problem.local_sgd_delta``,
  ``local_sgd_affine``: the Gram path, oneDNN products);
* :mod:`.adaptive` -- the local AMSGrad / Adam / Yogi step (Fed-AMS, Fed-LAMB, FedLADA,
  LocalAdam, local Yogi) in one C pass (:mod:`.native.adaptive`);
* :mod:`.frozen` -- the frozen-state step of MimeLite / Mime and their LAMB variants in one C
  pass (:mod:`.native.frozen`);
* :mod:`.sm3` -- FedAda2's full and SM3-II client steps in one C pass (:mod:`.native.sm3`);
* :mod:`.mixture` -- a mixture's members each by its own plan (FedAda2-blend);
* TopK and Fed-EF's error feedback in C (:mod:`.native.topk`).

Switches: ``FEDTOOLKIT_ACCEL=0`` (or :func:`enable`) turns every fast form off (the readable
rules everywhere); ``FEDTOOLKIT_NATIVE=0`` turns off the C kernels only
(:func:`sims.accel.native.enable`).
"""
from __future__ import annotations

import os
from collections import Counter

import torch

from ..rules.base import Chain, Readable, READABLE, local_step
from ..rules.compress import TopK, kept_count, layer_blocks
from . import adaptive, frozen, mixture, native, sgd, sm3
from .forms import Plan, numeric  # noqa: F401  (Plan: the planners' result)
from .native import topk as native_topk

_state = {"enabled": os.environ.get("FEDTOOLKIT_ACCEL", "1") != "0"}


def enable(on: bool = True) -> None:
    """Turn the fast forms on or off for this process (default: ``FEDTOOLKIT_ACCEL``, on
    unless ``0``); runs started afterwards plan accordingly."""
    _state["enabled"] = bool(on)


def enabled() -> bool:
    return _state["enabled"]


def status() -> str:
    """For a run's provenance: ``"off"``, or ``"on"`` with the C kernels' status."""
    return "off" if not enabled() else f"on (C kernels: {native.status()})"


def plan(rule, problem=None, device="cpu") -> Plan | None:
    """The fast form of ``rule`` (a :class:`sims.rules.base.Chain`) on ``problem`` and
    ``device``, or None: the readable rule."""
    if not enabled() or torch.device(device).type != "cpu" or not isinstance(rule, Chain):
        return None
    got = sgd.plan(rule, problem)           # (takes per-replica constants: [B, 1] rows)
    if got is not None or not numeric(rule):
        return got
    for planner in (adaptive.plan, frozen.plan, sm3.plan):
        got = planner(rule, problem)
        if got is not None:
            return got
    return mixture.plan(rule, problem, plan)


class Executor(Readable):
    """A run's executor (module docstring): each rule's plan, chosen the first time the rule
    is seen and kept for the run; the readable rule where there is none, or where a plan
    declines the operands. ``used`` counts the steps and rounds each plan took."""

    name = "accelerated"

    def __init__(self, problem=None, device="cpu"):
        self.problem, self.device = problem, torch.device(device)
        self._plans: dict[int, tuple] = {}
        self.used: Counter = Counter()

    def plan_of(self, rule) -> Plan | None:
        got = self._plans.get(id(rule))
        if got is not None and got[0] is rule:
            return got[1]
        found = plan(rule, self.problem, self.device)
        if numeric(rule):                   # (bound per-replica rules are new each chunk)
            self._plans[id(rule)] = (rule, found)
        return found

    def step(self, rule, theta, g, state, lr, mask, info, owned=False):
        p = self.plan_of(rule)
        if p is not None and p.step is not None:
            got = p.step(theta, g, state, lr, mask, info, owned)
            if got is not None:
                self.used[p.name] += 1
                return got
        return local_step(rule, theta, g, state, lr, mask, info)

    def local_round(self, rule, lr, problem, bcast, b_cast, c_state, ctx, payload, mask):
        p = self.plan_of(rule)
        if p is None or p.round is None:
            return None
        got = p.round(lr, problem, bcast, b_cast, c_state, ctx, payload, mask)
        if got is not None:
            self.used[p.name] += 1
        return got

    def compress(self, compressor, x, layout, u=None):
        if isinstance(compressor, TopK) and _cpu_2d(x):
            out = torch.empty_like(x)            # every column is written (blocks tile d)
            blocks = layer_blocks(layout, compressor.scope)
            if all(native_topk.topk_keep(x, out, sl, kept_count(compressor.k, size))
                   is not None for sl, size in zip(blocks.slices, blocks.sizes)):
                self.used["topk"] += 1
                return out
        return compressor(x, layout, u)

    def error_feedback(self, compressor, x, error, layout, u=None, zero=None):
        if isinstance(compressor, TopK) and u is None and _cpu_2d(x):
            if zero is not None:
                error = error.masked_fill(zero.unsqueeze(-1), 0.0)
            blocks = layer_blocks(layout, compressor.scope)
            outs = (torch.empty_like(x), torch.empty_like(x), torch.empty_like(x))
            ks = [kept_count(compressor.k, size) for size in blocks.sizes]
            if native_topk.ef_topk(x, error, blocks.slices, ks, outs):
                self.used["ef_topk"] += 1
                return outs
            zero = None
        return super().error_feedback(compressor, x, error, layout, u, zero)


def _cpu_2d(x) -> bool:
    return torch.is_tensor(x) and x.dim() == 2 and x.device.type == "cpu"


def executor(problem=None, device="cpu") -> Readable:
    """The run's executor: an :class:`Executor` on the CPU with the fast forms on, else the
    readable rules (:data:`sims.rules.base.READABLE`)."""
    if enabled() and torch.device(device).type == "cpu":
        return Executor(problem, device)
    return READABLE
