"""Quadratics whose constants are known exactly, with chosen gradient-noise laws.

Client ``i``'s objective is ``F_i(x) = 1/2 sum_j a_ij (x_j - b_ij)^2`` and its stochastic
gradient ``a_i * (x - b_i) + xi`` with ``xi`` drawn per step from the client's
:class:`NoiseLaw` (Gaussian, Student-t, Cauchy). The global objective is the uniform mean
``f = (1/n) sum_i F_i`` (Fed-EF eq. (1)), so

* ``L = max a`` (smoothness), ``mu = min a`` (strong convexity);
* ``sigma_i^2 = d * Var(xi)`` (local variance; infinite for Cauchy or Student-t with
  ``df <= 2``);
* when all clients share the curvature ``a``, ``grad F_i - grad f = a (b_bar - b_i)`` does
  not depend on ``x``, and ``sigma_g^2 = max_i ||a (b_i - b_bar)||^2`` is exact.

FedAda2's heavy-tail construction (Prop. 2/9: ``F_i(x) = x^2/2 + xi_i x`` with
``xi_i ~ t(i+1)``) is the case ``d = 1``, ``a = 1``, ``b = 0`` with per-client laws.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..core.params import ParamLayout

NOISE_KINDS = ("none", "gaussian", "student_t", "cauchy", "laplace", "rademacher")


@dataclass(frozen=True)
class NoiseLaw:
    kind: str = "gaussian"
    scale: float = 1.0
    df: float | None = None

    def __post_init__(self):
        if self.kind not in NOISE_KINDS:
            raise ValueError(f"unknown noise law {self.kind!r}; choose one of {NOISE_KINDS}")
        if self.scale < 0:
            raise ValueError(f"noise scale must be >= 0, got {self.scale}")
        if self.kind == "student_t" and not (self.df and self.df > 0):
            raise ValueError("a Student-t noise law needs degrees of freedom df > 0")

    def sample(self, rng: np.random.Generator, shape) -> np.ndarray:
        if self.kind == "none" or self.scale == 0:
            return np.zeros(shape)
        draw = {"gaussian": lambda: rng.standard_normal(shape),
                "student_t": lambda: rng.standard_t(self.df, shape),
                "cauchy": lambda: rng.standard_cauchy(shape),
                "laplace": lambda: rng.laplace(0.0, 1.0, shape),
                # +-1 with equal odds: bounded (||xi|| = scale sqrt(d) exactly), variance 1
                "rademacher": lambda: 2.0 * rng.integers(0, 2, shape) - 1.0}[self.kind]
        return self.scale * draw()

    def variance(self) -> float:
        """Per-coordinate variance (``inf`` where the second moment does not exist)."""
        if self.kind == "none":
            return 0.0
        if self.kind in ("gaussian", "rademacher"):
            return self.scale ** 2
        if self.kind == "laplace":
            return 2 * self.scale ** 2
        if self.kind == "student_t" and self.df > 2:
            return self.scale ** 2 * self.df / (self.df - 2)
        return math.inf


class QuadraticProblem:
    def __init__(self, curvature, centers, noise, *, local_steps: int = 1, x0=None,
                 device="cpu", dtype=torch.float64):
        centers = np.atleast_2d(np.asarray(centers, dtype=float))
        self.n_clients, self.d = centers.shape
        curvature = np.broadcast_to(np.asarray(curvature, dtype=float), centers.shape).copy()
        if (curvature <= 0).any():
            raise ValueError("quadratic curvatures must be positive")
        if local_steps < 1:
            raise ValueError(f"local_steps must be >= 1, got {local_steps}")
        self.noise = list(noise) if isinstance(noise, (list, tuple)) else [noise] * self.n_clients
        if len(self.noise) != self.n_clients:
            raise ValueError("give one noise law, or one per client")
        self.local_steps = local_steps
        self.device, self.dtype = torch.device(device), dtype
        self.a_np, self.b_np = curvature, centers
        self.a = torch.as_tensor(curvature, device=self.device, dtype=dtype)
        self.b = torch.as_tensor(centers, device=self.device, dtype=dtype)
        self.layout = ParamLayout.single(self.d)
        self.x_star = (curvature * centers).sum(0) / curvature.sum(0)
        self.f_star = float(self._f_np(self.x_star))
        self.x0 = np.zeros(self.d) if x0 is None else np.broadcast_to(x0, (self.d,)).astype(float)

    # ----------------------------------------------------------------- constants
    def _f_np(self, x):
        return 0.5 * (self.a_np * (x - self.b_np) ** 2).sum(1).mean()

    def constants(self) -> dict[str, float]:
        """The exact L, mu, sigma^2 (max over clients), sigma_g^2 and f(x0) - f*."""
        shared = np.allclose(self.a_np, self.a_np[0])
        mean_b = self.b_np.mean(0)
        sigma_g2 = (float(((self.a_np[0] * (self.b_np - mean_b)) ** 2).sum(1).max())
                    if shared else math.nan)
        return {"L": float(self.a_np.max()), "mu": float(self.a_np.min()),
                "sigma2": max(self.d * law.variance() for law in self.noise),
                "sigma_g2": sigma_g2, "f0_minus_fstar": float(self._f_np(self.x0)) - self.f_star,
                "d": self.d, "n": self.n_clients}

    # ----------------------------------------------------------------- engine protocol
    def init_theta(self, seed: int) -> torch.Tensor:
        return torch.as_tensor(self.x0, device=self.device, dtype=self.dtype)

    pad_value = 0.0  # payload rows the engine adds for clients with fewer steps

    def steps_for(self, client: int) -> int:
        return self.local_steps

    def plan_client(self, rng: np.random.Generator, client: int) -> np.ndarray:
        """Noise draws ``[K, d]`` for one client's local steps."""
        return self.noise[client].sample(rng, (self.local_steps, self.d))

    def stoch_grad(self, theta, clients, payload):
        return self.a[clients] * (theta - self.b[clients]) + payload

    def full_grad(self, theta, clients, salt=None):
        """Each row's exact client gradient ``grad F_i(theta_b) = a_i (theta_b - b_i)``
        (``[B, d]``; the noise is additive and mean zero, so this is the full local gradient
        that Mime's ``c`` averages). ``salt`` is unused: nothing here is drawn."""
        return self.a[clients] * (theta - self.b[clients])

    def reference_full_grad(self, theta, client: int):
        """The same for one client, plainly (the sequential reference path)."""
        return self.a[client] * (theta - self.b[client])

    def reference_grad(self, theta, client: int, payload: np.ndarray):
        noise = torch.as_tensor(payload, device=self.device, dtype=self.dtype)
        return self.a[client] * (theta - self.b[client]) + noise

    def evaluate(self, theta: torch.Tensor, test: bool = True) -> dict[str, torch.Tensor]:
        diff = theta.unsqueeze(1) - self.b  # [R, n, d]
        f = 0.5 * (self.a * diff * diff).sum(-1).mean(-1)
        g = (self.a * diff).mean(1)
        return {"train_loss": f, "suboptimality": f - self.f_star, "grad_norm2": (g * g).sum(-1)}


def heterogeneous_quadratic(n: int, d: int, *, L: float = 1.0, mu: float = 0.1,
                            sigma: float = 1.0, heterogeneity: float = 1.0, seed: int = 0,
                            local_steps: int = 1, noise: str = "gaussian", df=None,
                            x0: float = 0.0, **kw) -> QuadraticProblem:
    """A quadratic with curvatures spread over ``[mu, L]`` shared by all clients, client
    centres ``b_i ~ heterogeneity * N(0, I)`` and per-coordinate noise scale ``sigma/sqrt(d)``
    (so that ``E||xi||^2 = sigma^2`` for Gaussian noise)."""
    rng = np.random.default_rng(seed)
    curvature = np.geomspace(mu, L, d) if d > 1 else np.array([L])
    centers = heterogeneity * rng.standard_normal((n, d))
    law = NoiseLaw(noise, sigma / math.sqrt(d), df)
    return QuadraticProblem(curvature, centers, law, local_steps=local_steps,
                            x0=np.full(d, x0) + 0 * centers[0], **kw)
