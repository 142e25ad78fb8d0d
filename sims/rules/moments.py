"""Moment-based transforms: Adam, AMSGrad, AdaGrad and Yogi (one :class:`Adaptive` with the
options where the papers disagree), heavy-ball momentum and an exponential average.

:class:`Adaptive` with ``g`` the incoming update::

    m = b1 m + (1 - b1) g                              (m = g when b1 = 0)
    v = b2 v + (1 - b2) g^2                            adam, amsgrad
      = v + g^2                                        adagrad
      = v - (1 - b2) g^2 sign(v - g^2)                 yogi (Zaheer et al. 2018, Alg. 2)
    n, nm = n + 1, nm + 1                              steps v and m have seen
    m_c, v_c = m / (1 - b1^nm), v / (1 - b2^n)          bias_correction (else m, v; adagrad: never)
    vhat = max(vhat, v)                                amsgrad (vhat="step"); torch.optim's
                                                        order: the max of the raw v, corrected after
         = max(vhat, v_c)                               correct_before_max (Fed-LAMB Alg. 2 lines
                                                        11-12: the max of the corrected v)
         = vhat                                         vhat="fixed" (a round-fixed vhat, read only)
    u = m_c / sqrt(s + eps)    (eps_inside)   or   m_c / (sqrt(s) + eps)
        s = vhat (amsgrad; corrected unless correct_before_max) else v_c; eps = 0: m_c / sqrt(s)

State ``m, v`` (``vhat`` for AMSGrad) start at ``0, v0, v0`` and the counts ``n, nm`` at 0;
an algorithm may start them elsewhere (``init(like, v=...)``). The conventions each paper
uses are set where the rule is built: Fed-EF's server AMSGrad (Alg. 2 lines 17-19: eps inside
the root, no bias correction), Reddi et al.'s server Adam / AdaGrad / Yogi (``tau`` outside
the root, ``v0 = tau^2``; :mod:`.server`), Fed-LAMB's and FedLADA's local AMSGrad
(:mod:`sims.algorithms.fed_lamb`, :mod:`sims.algorithms.fedlada`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import OptimizerError, Rows, Transform, check_beta

KINDS = ("adam", "amsgrad", "adagrad", "yogi")


@dataclass(frozen=True)
class Adaptive(Transform):
    kind: str = "adam"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    eps_inside: bool = True
    v0: float = 0.0
    bias_correction: bool = False
    vhat: str = "step"
    correct_before_max: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise OptimizerError(f"unknown adaptive rule {self.kind!r}; choose one of {KINDS}")
        check_beta(beta1=self.beta1, beta2=self.beta2)
        if self.eps < 0 or self.v0 < 0:
            raise OptimizerError(f"eps and v0 must be >= 0, got eps={self.eps}, v0={self.v0}")
        if self.vhat not in ("step", "fixed"):
            raise OptimizerError(f"vhat must be 'step' or 'fixed', got {self.vhat!r}")

    @property
    def keys(self) -> tuple:
        return ("m", "v", "vhat", "n", "nm") if self.kind == "amsgrad" else ("m", "v", "n", "nm")

    def init(self, like, **given) -> dict:
        rows = Rows.of(like)
        state = {"m": rows.zeros(), "v": rows.full(self.v0), "n": rows.counts(),
                 "nm": rows.counts()}
        if self.kind == "amsgrad":
            state["vhat"] = rows.full(self.v0)
        state.update(given)
        return state

    def update(self, u, state, theta, info):
        g = u
        b1, b2 = self.beta1, self.beta2
        m = b1 * state["m"] + (1 - b1) * g if b1 else g
        g2 = g * g
        if self.kind == "adagrad":
            v = state["v"] + g2
        elif self.kind == "yogi":
            v = state["v"] - (1 - b2) * g2 * torch.sign(state["v"] - g2)
        else:
            v = b2 * state["v"] + (1 - b2) * g2
        n, nm = state["n"] + 1, state["nm"] + 1
        new = {"m": m, "v": v, "n": n, "nm": nm}
        bc = self.bias_correction and self.kind != "adagrad"
        m_c, v_c = m, v
        if bc:
            m_c = m / (1 - b1 ** nm.unsqueeze(-1))
            v_c = v / (1 - b2 ** n.unsqueeze(-1))
        second = v_c
        if self.kind == "amsgrad":
            vhat = state["vhat"]
            if self.vhat == "step":
                vhat = torch.maximum(vhat, v_c if self.correct_before_max else v)
                new["vhat"] = vhat
            second = vhat
            if bc and not self.correct_before_max:
                second = vhat / (1 - b2 ** n.unsqueeze(-1))
        if not self.eps:
            return m_c / torch.sqrt(second), new
        if self.eps_inside:
            return m_c / torch.sqrt(second + self.eps), new
        return m_c / (torch.sqrt(second) + self.eps), new


@dataclass(frozen=True)
class Momentum(Transform):
    """Heavy-ball momentum, ``m = beta m + u`` (the update is ``m``): FedAvgM's server
    momentum (Hsu, Qi & Brown 2019, "Measuring the effects of non-identical data
    distribution", Alg. 1: ``v <- beta v + Delta``, ``w <- w - v`` with server rate 1)."""
    beta: float = 0.9

    keys = ("m",)

    def __post_init__(self):
        check_beta(beta=self.beta)

    def init(self, like, **given) -> dict:
        return {"m": Rows.of(like).zeros(), **given}

    def update(self, u, state, theta, info):
        m = self.beta * state["m"] + u
        return m, {"m": m}


@dataclass(frozen=True)
class Ema(Transform):
    """The exponential average ``m = beta m + (1 - beta) u`` as the update (SGD with momentum
    in its averaging form: Mime's ``sgdm`` base optimizer)."""
    beta: float = 0.9

    keys = ("m",)

    def __post_init__(self):
        check_beta(beta=self.beta)

    def init(self, like, **given) -> dict:
        return {"m": Rows.of(like).zeros(), **given}

    def update(self, u, state, theta, info):
        m = self.beta * state["m"] + (1 - self.beta) * u
        return m, {"m": m}
