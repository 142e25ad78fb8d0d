"""Functional, batched update rules (optax-style ``init`` / ``step`` pairs).

Every rule works on a batch of flat parameter vectors ``theta`` of shape ``[B, d]`` with
explicit state (a dict of tensors), so one call advances many clients (or many seeds'
servers) at once and state can be checkpointed. ``step(theta, g, state, mask)`` returns the
new ``(theta, state)``; rows where the boolean ``mask`` is False are left untouched (a
client with no data left in its epoch takes no step).

Conventions are per paper and written on each rule:

* :class:`SGD` -- ``theta - lr * g``.
* :class:`AMSGrad` -- Fed-EF Alg. 2 lines 17-19 (and Fed-LAMB/FedLADA local AMSGrad):
  ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``, ``vhat = max(vhat, v)``,
  ``theta - lr * m / sqrt(vhat + eps)``: epsilon *inside* the square root and no bias
  correction by default (Fed-EF spec 6.3); ``eps_inside_sqrt=False`` gives
  ``m / (sqrt(vhat) + eps)`` and ``bias_correction=True`` the torch.optim convention.
* :class:`Adam` -- the same without the max (``amsgrad=False`` reading of the above).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def _masked(mask, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    if mask is None:
        return new
    return torch.where(mask.view(-1, *([1] * (new.dim() - 1))), new, old)


class OptimizerError(ValueError):
    """A nonsensical optimizer hyperparameter."""


def _check_positive(**values):
    for key, val in values.items():
        if not val > 0:
            raise OptimizerError(f"{key} must be positive, got {val}")


@dataclass(frozen=True)
class SGD:
    lr: float

    def __post_init__(self):
        _check_positive(lr=self.lr)

    def init(self, theta: torch.Tensor) -> dict:
        return {}

    def direction(self, g: torch.Tensor, state: dict):
        return g, state

    def step(self, theta, g, state, mask=None):
        return _masked(mask, theta - self.lr * g, theta), state


@dataclass(frozen=True)
class Adam:
    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    eps_inside_sqrt: bool = True
    bias_correction: bool = False
    amsgrad: bool = False

    def __post_init__(self):
        _check_positive(lr=self.lr, eps=self.eps)
        for key in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise OptimizerError(f"{key} must be in [0, 1), got {getattr(self, key)}")

    def init(self, theta: torch.Tensor) -> dict:
        z = torch.zeros_like(theta)
        state = {"m": z, "v": z.clone(), "t": torch.zeros(theta.shape[0], dtype=theta.dtype,
                                                          device=theta.device)}
        if self.amsgrad:
            state["vhat"] = z.clone()
        return state

    def direction(self, g: torch.Tensor, state: dict):
        """The preconditioned direction ``m / sqrt(vhat + eps)`` and the advanced state."""
        m = self.beta1 * state["m"] + (1 - self.beta1) * g
        v = self.beta2 * state["v"] + (1 - self.beta2) * g * g
        t = state["t"] + 1
        new = {"m": m, "v": v, "t": t}
        second = v
        if self.amsgrad:
            second = new["vhat"] = torch.maximum(state["vhat"], v)
        if self.bias_correction:
            m = m / (1 - self.beta1 ** t).unsqueeze(-1)
            second = second / (1 - self.beta2 ** t).unsqueeze(-1)
        if self.eps_inside_sqrt:
            denom = torch.sqrt(second + self.eps)
        else:
            denom = torch.sqrt(second) + self.eps
        return m / denom, new

    def step(self, theta, g, state, mask=None):
        u, new = self.direction(g, state)
        new = {k: _masked(mask, v, state[k]) for k, v in new.items()}
        return _masked(mask, theta - self.lr * u, theta), new


def AMSGrad(lr: float, **kw) -> Adam:
    """AMSGrad as in Fed-EF Alg. 2 lines 17-19 (see the module docstring)."""
    return Adam(lr, amsgrad=True, **kw)


SERVER_RULES = {"sgd": SGD, "adam": Adam, "amsgrad": AMSGrad}


def make_rule(name: str, lr: float, **kw):
    if name not in SERVER_RULES:
        raise OptimizerError(f"unknown optimizer {name!r}; choose one of {sorted(SERVER_RULES)}")
    return SERVER_RULES[name](lr, **kw)


# ---------------------------------------------------------------------------------------
# Appended for the synthetic experiments (FedAda2 heavy-tail section, spec fedada2.md 1.1,
# 1.11 and 2.8). Same ``init`` / ``step`` / ``direction`` protocol as the rules above.

@dataclass(frozen=True)
class AdaGrad:
    """AdaGrad with optional momentum: FedAda2's server update (SU, spec 1.1) and its client
    AGDU with delay ``z = 1`` (Alg. 9, spec 1.11).

    ``v = v + g^2`` (started at ``v0``), ``m = beta1 m + (1 - beta1) g`` and
    ``theta - lr * m / (sqrt(v) + eps)``: epsilon *outside* the square root, no bias
    correction. Client AdaGrad in FedAda2 restarts from ``v0 = 0`` every round (the engine
    or runner calls ``init`` per round); with one local step the step is then the
    normalized gradient ``lr * g / (|g| + eps)``, at most ``lr`` per coordinate. The server
    rule of FedAda2 uses ``v0 >= tau^2`` and ``eps = tau``; each step is then also at most
    ``lr`` per coordinate (FedAda2 Lemma 16).
    """
    lr: float
    eps: float = 1e-8
    beta1: float = 0.0
    v0: float = 0.0

    def __post_init__(self):
        _check_positive(lr=self.lr, eps=self.eps)
        if not 0.0 <= self.beta1 < 1.0:
            raise OptimizerError(f"beta1 must be in [0, 1), got {self.beta1}")
        if self.v0 < 0:
            raise OptimizerError(f"v0 must be >= 0, got {self.v0}")

    def init(self, theta: torch.Tensor) -> dict:
        return {"m": torch.zeros_like(theta), "v": torch.full_like(theta, self.v0)}

    def direction(self, g: torch.Tensor, state: dict):
        v = state["v"] + g * g
        m = self.beta1 * state["m"] + (1 - self.beta1) * g if self.beta1 else g
        return m / (torch.sqrt(v) + self.eps), {"m": m, "v": v}

    def step(self, theta, g, state, mask=None):
        u, new = self.direction(g, state)
        new = {k: _masked(mask, v, state[k]) for k, v in new.items()}
        return _masked(mask, theta - self.lr * u, theta), new


@dataclass(frozen=True)
class ClippedSGD:
    """SGD on the gradient clipped to norm at most ``clip`` (per row): ``theta - lr * g *
    min(1, clip / ||g||)``; the "clipping" control of FedAda2 spec 2.8 (``clip = 1``)."""
    lr: float
    clip: float = 1.0

    def __post_init__(self):
        _check_positive(lr=self.lr, clip=self.clip)

    def init(self, theta: torch.Tensor) -> dict:
        return {}

    def direction(self, g: torch.Tensor, state: dict):
        norm = g.norm(dim=-1, keepdim=True)
        return g * torch.clamp(self.clip / norm.clamp_min(1e-300), max=1.0), state

    def step(self, theta, g, state, mask=None):
        u, _ = self.direction(g, state)
        return _masked(mask, theta - self.lr * u, theta), state
