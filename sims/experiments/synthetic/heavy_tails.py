"""FedAda2's heavy-tailed quadratics (spec fedada2.md sections 2.3-2.8) on the Monte-Carlo
runner.

Constructions (``d = 1``, ``f(x) = x^2 / 2``, ``grad f(x) = x``, ``x* = 0``, ``x_0 = 1``):

* ``student_t`` (Prop. 2/9, Thm 4/13): ``F_i(x, xi) = x^2/2 + xi_i x`` with ``xi_i ~
  t_{i+1}`` for clients ``i = 1..N`` (here client 0 is ``t_2``, the only one with an infinite
  variance; client ``j`` is ``t_{j+2}``).
* ``cauchy`` (Prop. 10): client 0 ``Cauchy(0, gamma)``, ``gamma = 0.2 in (0, 1/3)``, the
  others ``N(0, 1)``.

Clients are sampled with :class:`~sims.experiments.montecarlo.Sampler` ``include_first`` (client 0
always, plus ``s - 1`` others without replacement: spec 2.8 (b), the sharpest signal),
``s = 3`` of ``N = 10``, one local step by default (spec 2.8: "use sampler (b), K = 1").

Methods (all see the same noise draws):

* ``fedavg`` -- client SGD with ``eta_t = 1/(t + t0)``, server averaging (lr 1);
* ``client_adagrad`` -- client AdaGrad restarted from ``v = 0`` every round, ``eps = 0.5``,
  Prop. 9 (ii)'s schedule ``eta_t = 1/((t + t0)(1 - eps_hat))`` with ``eps_hat = 0``,
  ``t0 = 2`` (so ``eta_t < eps``; spec 2.8);
* ``client_adagrad_iv`` -- the same with Prop. 9 (iv)'s schedule ``eta_t = 1/t^2``
  (``|x_t - x_0| <= K pi^2/6`` a.s.);
* ``clipped_sgd`` -- client SGD on gradients clipped to ``|g| <= 1``, ``eta_t = 1/(t + t0)``;
* ``server_adagrad`` -- client SGD as FedAvg, server AdaGrad (FedAda2 SU, ``beta1 = 0``,
  ``tau = 0.1``, ``v_0 = tau^2``) with lr ``1/(t + t0)`` (FedAdaGrad; Lemma 16 bounds its
  steps).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..montecarlo import MCMethod, MCOutput, Sampler, Schedule, simulate
from ...problems.quadratic import NoiseLaw, QuadraticProblem
from . import tails

NOISES = ("student_t", "cauchy")
METHODS = ("fedavg", "client_adagrad", "client_adagrad_iv", "clipped_sgd", "server_adagrad")
BOUNDED = METHODS[1:]


@dataclass(frozen=True)
class HeavyTailSetup:
    noise: str = "student_t"
    n_clients: int = 10
    s: int = 3
    sampler: str = "include_first"
    local_steps: int = 1
    x0: float = 1.0
    t0: float = 2.0            # eta_t = 1/(t + t0)
    eps: float = 0.5           # client AdaGrad epsilon (Prop. 9 (ii) needs eta_t < eps)
    gamma: float = 0.2         # Cauchy scale (Prop. 10: gamma in (0, 1/3))
    tau: float = 0.1           # server AdaGrad smoothing

    def problem(self) -> QuadraticProblem:
        n = self.n_clients
        if self.noise == "student_t":
            laws = [NoiseLaw("student_t", 1.0, df=i + 2) for i in range(n)]
        elif self.noise == "cauchy":
            laws = [NoiseLaw("cauchy", self.gamma)] + [NoiseLaw("gaussian", 1.0)] * (n - 1)
        else:
            raise ValueError(f"unknown heavy-tail noise {self.noise!r}; use one of {NOISES}")
        return QuadraticProblem(1.0, np.zeros((n, 1)), laws, local_steps=self.local_steps,
                                x0=self.x0)

    def methods(self, names=METHODS) -> list[MCMethod]:
        inv = Schedule("inv", 1.0, self.t0)
        table = {
            "fedavg": MCMethod("fedavg", "sgd", inv),
            "client_adagrad": MCMethod("client_adagrad", "adagrad", inv, {"eps": self.eps}),
            "client_adagrad_iv": MCMethod("client_adagrad_iv", "adagrad",
                                          Schedule("inv2", 1.0, 0.0), {"eps": self.eps}),
            "clipped_sgd": MCMethod("clipped_sgd", "clip", inv, {"clip": 1.0}),
            "server_adagrad": MCMethod("server_adagrad", "sgd", inv, {}, "adagrad", inv,
                                       {"eps": self.tau, "v0": self.tau ** 2}),
        }
        unknown = set(names) - set(table)
        if unknown:
            raise ValueError(f"unknown method(s) {sorted(unknown)}; use {list(table)}")
        return [table[n] for n in names]

    def sampler_obj(self) -> Sampler:
        return Sampler(self.sampler, self.s)


def run(setup: HeavyTailSetup, paths: int, rounds: int, seed: int, methods=METHODS,
        progress=None) -> MCOutput:
    return simulate(setup.problem(), setup.methods(methods), rounds, paths, seed,
                    setup.sampler_obj(), progress=progress)


def hill_k(paths: int) -> int:
    """Top order statistics for the Hill estimate: 0.1% of the paths, at least 20."""
    return int(min(paths - 1, max(20, paths // 1000)))


def summarize(out: MCOutput, setup: HeavyTailSetup, points: int = 40) -> list[dict]:
    """Long-format rows ``{method, metric, x, round, value}`` of every tail diagnostic of the
    final iterate's ``|grad f(x_T)| = |x_T|`` (and per-round statistics)."""
    rows = []
    M, T = out.paths, out.rounds
    grid = tails.log_grid(M, points)
    blocks = tails.log_grid(max(M // 5, 1), max(points // 3, 4), start=1)
    for name, x in out.final.items():
        g = np.abs(x[:, 0])
        g2 = g * g
        method = next(m for m in setup.methods() if m.name == name)
        bound = method.step_bound(T, setup.local_steps)
        add = lambda metric, xs, vals: rows.extend(  # noqa: E731
            {"method": name, "metric": metric, "x": float(a), "round": T, "value": float(v)}
            for a, v in zip(xs, vals))
        add("running_m2", grid, tails.running_mean(g2, grid))
        add("running_m1", grid, tails.running_mean(g, grid))
        add("running_max", grid, tails.running_max(g, grid))
        add("largest_share", grid, tails.largest_share(g2, grid))
        add("block_median_m2", blocks, tails.block_median(g2, blocks))
        add("block_median_m1", blocks, tails.block_median(g, blocks))
        top = max(float(g.max()), 1e-12)
        levels = np.geomspace(max(np.quantile(g, 0.5), 1e-6), top, points)
        add("survival", levels, tails.survival(g, levels))
        ks = np.unique(np.round(np.geomspace(10, max(11, M // 20), 12)).astype(int))
        ks = ks[ks < M]
        add("hill_curve", ks, [tails.hill(g, int(k)) for k in ks])
        add("hill", [hill_k(M)], [tails.hill(g, hill_k(M))])
        add("step_bound", [math.nan], [bound + abs(setup.x0) if math.isfinite(bound) else math.inf])
        for stat, vals in out.history[name].items():
            rows.extend({"method": name, "metric": f"round_{stat}", "x": math.nan, "round": t,
                         "value": float(v)} for t, v in enumerate(vals))
    return rows


def growth(values: np.ndarray, small: int, large: int) -> float:
    """Ratio of the block-median mean at block size ``large`` to that at ``small``."""
    med = tails.block_median(values, [small, large])
    return float(med[1] / med[0])
