"""FedLADA (Sun, Shen, Sun, Ding, Tao): local AMSGrad with an amended global correction.

Spec: ``shared/specs/fedlada.md`` (section numbers below). Conventions (pseudo-gradient sign,
learning-rate decay, weight decay) are in :mod:`sims.algorithms.base`. The paper's
experimental settings (spec 3.1) are quoted on each class; the defaults here are the paper's
where it gives one, except ``lr_decay = 1`` (no decay) and ``weight_decay = 0``, which a
user sets for a paper-scale run (``lr_decay=0.998``, ``weight_decay=1e-3`` or ``1e-2``).

The baselines FedLADA runs against (FedAvg, FedProx, SCAFFOLD, FedCM, FedAdam, FedAdam(*))
are in :mod:`sims.algorithms.baselines`; LocalAdam, FedLADA with ``alpha = 1`` (spec 1.3),
is here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..rules.base import OptimizerError, start
from ..rules.moments import Adaptive
from ..rules.terms import Amend
from .base import (Algorithm, bits, check_common, describe_dataclass, lr_at, masked_rows,
                   mean_of, weight_decay)


@dataclass
class FedLADA(Algorithm):
    """FedLADA, Alg. 3 (spec 1.4): local AMSGrad amended by the global direction ``g_a``.

    Round ``t``; every participant receives ``x^t``, ``v^t`` and ``g_a^t`` and, with
    ``lr = eta_l lr_decay^t``, ``m_0 = 0``, ``vhat_0 = v^t``, ``v_0 = v^t`` (``v_init="server"``;
    ``"zero"`` starts the EMA at 0 -- the algorithm never sets ``v_{i,0}``, spec 5.2)::

        for tau = 1..K:                                        (printed "1..K-1": spec 5.1)
            m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  vhat = max(v, vhat)
            x <- x - lr (alpha m / sqrt(vhat) + (1 - alpha) g_a)        (g_a NOT preconditioned)

    and sends ``delta_i = x^t - x_{i,K}`` and ``vhat_{i,K}`` (2d up). Server (lines 16-18)::

        v^{t+1} = mean_i vhat_{i,K};   x^{t+1} = x^t - eta_g mean_i delta_i
        g_a^{t+1} = mean_i delta_i / (lr K_i)     (= (x^t - x^{t+1}) / (eta_g eta_l K) for equal K)

    so ``g_a^{t+1} = alpha mean_i (1/K_i) sum_tau m/sqrt(vhat) + (1 - alpha) g_a^t`` (Eq. 4)
    holds exactly (with decoupled weight decay the decay term joins the average). No epsilon in
    the denominator and no bias correction: ``vhat >= v^0 = eps_v^2`` (the paper's ``1e-8`` is
    ``eps_v``; its text also says "initial second-order momenta 1e-8", ``v0`` overrides).
    Downlink: ``x``, ``v`` and ``g_a`` (3d; Table 11's "2Nd" leaves ``g_a`` out, which a client
    that skipped the previous round cannot rebuild); ``alpha = 1`` needs no ``g_a`` (2d).
    Paper settings: ``eta_l = 1e-3``, ``eta_g = 1``, ``b1 = 0.9``, ``b2 = 0.99``, ``alpha = 0.1``
    (CIFAR-10) / ``0.05``, weight decay ``1e-2``, decay 0.998.

    The client rule is ``chain(Adaptive("amsgrad", b1, b2, eps=0), Amend(alpha))`` (lines 9-12),
    between the weight-decay terms.

    Reference: :func:`sims.reference.fedlada.ref_fedlada`.
    """
    name = "fedlada"
    eta: float = 1.0
    eta_l: float = 1e-3
    alpha: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    eps_v: float = 1e-8
    v0: float | None = None
    v_init: str = "server"
    weight_decay: float = 0.0
    wd_mode: str = "coupled"
    lr_decay: float = 1.0
    decay_global: bool = False

    def __post_init__(self):
        check_common(self)
        if self.v_init not in ("server", "zero"):
            raise OptimizerError(f"v_init must be 'server' or 'zero', got {self.v_init!r}")
        if not (self.v0 if self.v0 is not None else self.eps_v) > 0:
            raise OptimizerError("the initial second moment must be positive")
        amsgrad = Adaptive("amsgrad", self.beta1, self.beta2, eps=0.0)      # lines 9-11
        self.local_rule = weight_decay(self, amsgrad, *([Amend(self.alpha)] if self.amended
                                                    else []))               # line 12

    @property
    def amended(self) -> bool:
        return self.alpha != 1

    @property
    def initial_v(self) -> float:
        return self.eps_v ** 2 if self.v0 is None else self.v0

    def local_lr(self, t):
        return lr_at(self.eta_l, self.lr_decay, t)

    def init_server(self, theta0):
        server = {"theta": theta0.clone(), "v": torch.zeros_like(theta0).add_(self.initial_v)}
        if self.amended:
            server["ga"] = torch.zeros_like(theta0)
        return server

    def broadcast(self, server):
        return dict(server)

    def local_start(self, bcast, cstate, ctx):
        """Line 5: ``m = 0``, ``vhat = v^t`` and ``v = v^t`` (``v_init="zero"``: ``v = 0``)."""
        rows = self.rows(bcast, ctx)
        v = bcast["v"] if self.v_init == "server" else rows.zeros()
        return start(self.local_rule, rows, v=v, vhat=bcast["v"])

    def client_message(self, delta, lstate, cstate, ctx):
        """Line 14: send ``delta`` and ``vhat``; ``g_a``'s share ``delta / (lr K)``."""
        aux = {"vhat": lstate["vhat"]}
        if self.amended:
            aux["ga"] = delta / (self.local_lr(ctx.t) * lstate["k"].clamp_min(1).unsqueeze(-1))
        return delta, cstate, aux

    def server_step(self, server, mean_message, sums, active, ctx):
        eta = lr_at(self.eta, self.lr_decay, ctx.t) if self.decay_global else self.eta
        new = {"theta": masked_rows(active, server["theta"] - eta * mean_message, server["theta"]),
               "v": masked_rows(active, mean_of(sums, "vhat", mean_message), server["v"])}
        if self.amended:
            new["ga"] = masked_rows(active, mean_of(sums, "ga", mean_message), server["ga"])
        metrics = {"vhat_min": server["v"].min(-1).values}
        return new, metrics

    def uplink_bits(self, layout):
        return bits(layout, 2)

    def downlink_bits(self, layout):
        return bits(layout, 3 if self.amended else 2)

    def client_memory(self, layout) -> int:
        """The model, ``m``, ``v``, ``vhat`` and (amended) ``g_a``."""
        return layout.d * (4 + self.amended)

    def describe(self):
        return describe_dataclass(self)


@dataclass
class LocalAdam(FedLADA):
    """LocalAdam as the paper runs it (spec 1.3, Table 5 "alpha = 1.0 represents the
    local-adaptive scene"): FedLADA with ``alpha = 1`` -- local AMSGrad from the averaged
    ``vhat``, momentum reset each round, ``vhat`` averaged by the server (2d up, 2d down)."""
    name = "localadam"
    alpha: float = 1.0
