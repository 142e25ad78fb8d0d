"""Vectorised Monte-Carlo runner: many independent paths of small federated problems.

The round engine (:mod:`sims.core.engine`) draws each replica's randomness with its own numpy
generator, which is right for tens of replicas and far too slow for the 10^5-10^7 paths
needed to see infinite moments in finite samples (FedAda2 spec section 2.8). This runner
advances *all* paths of a :class:`~sims.problems.quadratic.QuadraticProblem` at once, as
one float64 tensor ``[paths, d]`` per method, with the update rules of :mod:`sims.rules`
(SGD, AdaGrad, ClippedSGD on the clients; SGD with lr 1 = FedAvg averaging, or AdaGrad
on the server).

Randomness and reproducibility: round ``t`` (1-based) of chunk ``c`` (paths
``[c * CHUNK, (c + 1) * CHUNK)``) draws everything from ``numpy.random.default_rng([seed,
t, c])`` in a fixed order: the participants of every path, then the noise of every
participating slot client by client (client 0 first). A run is therefore a deterministic
function of ``(seed, paths, problem, sampler, rounds)`` (``rounds`` only truncates it), and
the methods of one call see the *same* noise (common random numbers, so they differ only by
their update rules).

One round of method ``A`` for path ``p`` with participants ``S`` (``|S| = s``)::

    for i in S:  theta_i = x_p;  K local steps theta_i <- rule_t.step(theta_i, g_i)
                 g_i = a_i * (theta_i - b_i) + xi_i       (one fresh noise draw per step)
    delta = mean_i (x_p - theta_i)                        (pseudo-gradient, sims convention)
    x_p  <- server_rule_t.step(x_p, delta)                (SGD lr 1 = FedAvg averaging)

Client rules restart their state every round (FedAda2's zero local preconditioner); the
server rule keeps its state across rounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..rules.base import Optimizer, check_beta, check_positive, chain
from ..rules.moments import Adaptive
from ..rules.terms import ClipByNorm

CHUNK = 1 << 20           # paths per generator stream (fixed: part of the definition)

SAMPLERS = ("full", "uniform", "include_first", "exclude_first")


@dataclass(frozen=True)
class Sampler:
    """Which clients take part in a round, per path.

    * ``full``: all ``N`` clients;
    * ``uniform``: ``s`` of ``N`` uniformly without replacement (FedAda2 spec 2.8 (a));
    * ``include_first``: client 0 (the heavy-tailed one) always, plus ``s - 1`` of the
      others uniformly without replacement (spec 2.8 (b), "the sharpest signal");
    * ``exclude_first``: ``s`` of clients ``1..N-1`` (spec 2.8 (c), the ``p_1 = 0`` control).
    """
    kind: str = "include_first"
    s: int = 3

    def __post_init__(self):
        if self.kind not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.kind!r}; use one of {SAMPLERS}")
        if self.kind != "full" and self.s < 1:
            raise ValueError(f"sampler needs s >= 1, got {self.s}")

    def size(self, n: int) -> int:
        return n if self.kind == "full" else self.s

    def check(self, n: int) -> None:
        pool = {"full": n, "uniform": n, "include_first": n, "exclude_first": n - 1}[self.kind]
        if self.size(n) > pool:
            raise ValueError(f"sampler {self.kind} cannot pick s={self.s} of n={n} clients")

    def sample(self, rng: np.random.Generator, paths: int, n: int) -> np.ndarray:
        """``[paths, s]`` client ids (sorted within a row)."""
        if self.kind == "full":
            return np.broadcast_to(np.arange(n), (paths, n))
        if self.kind == "uniform":
            return _without_replacement(rng, paths, n, self.s)
        if self.kind == "exclude_first":
            return 1 + _without_replacement(rng, paths, n - 1, self.s)
        rest = 1 + _without_replacement(rng, paths, n - 1, self.s - 1)
        return np.concatenate([np.zeros((paths, 1), dtype=rest.dtype), rest], axis=1)


def _without_replacement(rng, paths: int, n: int, s: int) -> np.ndarray:
    """``s`` distinct ids in ``[0, n)`` per row, uniformly: draw the ``k``-th as a rank among
    the ``n - k`` unused ids and shift it past the (sorted) ids already taken."""
    chosen = np.empty((paths, 0), dtype=np.int64)
    for k in range(s):
        r = rng.integers(0, n - k, paths)
        for j in range(k):
            r = r + (r >= chosen[:, j])
        chosen = np.sort(np.concatenate([chosen, r[:, None]], axis=1), axis=1)
    return chosen


@dataclass(frozen=True)
class Schedule:
    """A learning rate by (1-based) round ``t``: ``const`` ``c``; ``inv`` ``c / (t + t0)``;
    ``inv2`` ``c / (t + t0)^2`` (FedAda2 Prop. 9 (ii): ``1/((t + t0)(1 - eps_hat))``;
    (iv): ``1/t^2``)."""
    kind: str = "const"
    c: float = 1.0
    t0: float = 0.0

    def __call__(self, t: int) -> float:
        if self.kind == "const":
            return self.c
        if self.kind == "inv":
            return self.c / (t + self.t0)
        if self.kind == "inv2":
            return self.c / (t + self.t0) ** 2
        raise ValueError(f"unknown schedule {self.kind!r}")

    def total(self, rounds: int) -> float:
        return sum(self(t) for t in range(1, rounds + 1))

    def text(self) -> str:
        if self.kind == "const":
            return f"{self.c:g}"
        t = "t" if not self.t0 else f"(t+{self.t0:g})"
        return f"{self.c:g}/{t}" + ("^2" if self.kind == "inv2" else "")


def sgd(lr: float) -> Optimizer:
    """``theta - lr g``."""
    check_positive(lr=lr)
    return Optimizer(chain(), lr)


def adagrad(lr: float, eps: float = 1e-8, beta1: float = 0.0, v0: float = 0.0) -> Optimizer:
    """AdaGrad with optional momentum, ``v = v + g^2``, ``theta - lr m / (sqrt(v) + eps)``
    (epsilon outside the root, no bias correction, ``v`` from ``v0``): FedAda2's server SU
    (spec 1.1) and its client AGDU with ``z = 1`` (Alg. 9); restarted from ``v0 = 0`` every
    round on a client, a step moves a coordinate by at most ``lr``."""
    check_positive(lr=lr, eps=eps)
    check_beta(beta1=beta1)
    return Optimizer(chain(Adaptive("adagrad", beta1, 0.99, eps, eps_inside=False, v0=v0)), lr)


def clipped_sgd(lr: float, clip: float = 1.0) -> Optimizer:
    """SGD on the gradient clipped to norm at most ``clip`` per path (FedAda2 spec 2.8)."""
    check_positive(lr=lr)
    return Optimizer(chain(ClipByNorm(clip)), lr)


RULES = {"sgd": sgd, "adagrad": adagrad, "clip": clipped_sgd}


@dataclass(frozen=True)
class MCMethod:
    """A client rule and a server rule, each a rule by name (:data:`RULES`: ``sgd``,
    ``adagrad``, ``clip``) with a learning-rate :class:`Schedule` and keyword
    arguments. FedAvg = client ``sgd`` + server ``sgd`` with lr 1."""
    name: str
    client: str = "sgd"
    client_lr: Schedule = Schedule()
    client_kw: dict = field(default_factory=dict)
    server: str = "sgd"
    server_lr: Schedule = Schedule()
    server_kw: dict = field(default_factory=dict)

    def client_rule(self, t: int):
        return RULES[self.client](self.client_lr(t), **self.client_kw)

    def server_rule(self, t: int):
        return RULES[self.server](self.server_lr(t), **self.server_kw)

    def step_bound(self, rounds: int, local_steps: int) -> float:
        """A deterministic bound on ``max_p |x_T - x_0|`` per coordinate, or ``inf``: every
        AdaGrad (v0 = 0, one accumulator per round) or clipped step moves a coordinate by at
        most its lr (clip <= 1 assumed for ``clip``), a server AdaGrad step by at most its lr."""
        if self.server == "adagrad":
            return self.server_lr.total(rounds)
        if self.client in ("adagrad", "clip") and self.server == "sgd":
            # a zero-started AdaGrad step moves a coordinate by lr |g_k| / (sqrt(sum_{l<=k}
            # g_l^2) + eps) <= lr, a clipped step by at most lr * clip: K steps per round
            clip = self.client_kw.get("clip", 1.0) if self.client == "clip" else 1.0
            return float(sum(self.client_lr(t) * local_steps * clip * self.server_lr(t)
                             for t in range(1, rounds + 1)))
        return math.inf

    def describe(self) -> dict:
        return {"name": self.name, "client": self.client, "client_lr": self.client_lr.text(),
                "client_kw": dict(self.client_kw), "server": self.server,
                "server_lr": self.server_lr.text(), "server_kw": dict(self.server_kw)}


@dataclass
class MCOutput:
    """Final iterates and per-round statistics of every method.

    ``final[name]``: ``[paths, d]`` float64; ``history[name][stat]``: ``[rounds + 1]`` (index
    0 = the start); ``trace[name]``: ``[rounds + 1, keep]`` the first ``keep`` paths' norm of
    ``grad f`` (for pictures of individual paths).
    """
    final: dict[str, np.ndarray]
    history: dict[str, dict[str, np.ndarray]]
    trace: dict[str, np.ndarray]
    seed: int
    paths: int
    rounds: int


def grad_norm(problem, x: np.ndarray) -> np.ndarray:
    """``||grad f(x)||`` per path for the uniform-mean quadratic ``f``."""
    a_bar = problem.a_np.mean(0)
    ab_bar = (problem.a_np * problem.b_np).mean(0)
    g = x * a_bar - ab_bar
    return np.sqrt((g * g).sum(-1)) if x.shape[1] > 1 else np.abs(g[:, 0])


def _stats(gn: np.ndarray) -> dict[str, float]:
    return {"mean_sq": float(np.mean(gn * gn)), "mean_abs": float(np.mean(gn)),
            "median_abs": float(np.median(gn)), "max_abs": float(np.max(gn))}


def simulate(problem, methods: list[MCMethod], rounds: int, paths: int, seed: int,
             sampler: Sampler, *, keep: int = 0, progress=None) -> MCOutput:
    """Run every method for ``rounds`` rounds on ``paths`` independent paths (see the module
    docstring). ``progress(1)`` is called after each round."""
    if rounds < 1 or paths < 1:
        raise ValueError(f"rounds and paths must be >= 1, got {rounds}, {paths}")
    n, d, K = problem.n_clients, problem.d, problem.local_steps
    sampler.check(n)
    s = sampler.size(n)
    a = torch.as_tensor(problem.a_np, dtype=torch.float64)
    b = torch.as_tensor(problem.b_np, dtype=torch.float64)
    x0 = torch.as_tensor(problem.x0, dtype=torch.float64)
    bounds = [(lo, min(lo + CHUNK, paths)) for lo in range(0, paths, CHUNK)]
    x = {m.name: [x0.expand(hi - lo, d).clone() for lo, hi in bounds] for m in methods}
    sstate = {m.name: [m.server_rule(1).init(xc) for xc in x[m.name]] for m in methods}
    history = {m.name: {} for m in methods}
    trace = {m.name: [] for m in methods}

    def record():
        for m in methods:
            full = torch.cat(x[m.name]).numpy()
            gn = grad_norm(problem, full)
            for k, v in _stats(gn).items():
                history[m.name].setdefault(k, []).append(v)
            if keep:
                trace[m.name].append(gn[:keep].copy())

    record()
    for t in range(1, rounds + 1):
        for c, (lo, hi) in enumerate(bounds):
            rng = np.random.default_rng([seed, t, c])
            P = hi - lo
            clients = sampler.sample(rng, P, n)                   # [P, s]
            flat = np.ascontiguousarray(clients.T).reshape(-1)    # slot-major: [s * P]
            # every slot of client 0 first, then client 1, ... (slot order within a client)
            order = np.argsort(flat.astype(np.int16 if n < 2 ** 15 else np.int64),
                               kind="stable")
            counts = np.bincount(flat, minlength=n)
            drawn = np.concatenate([problem.noise[i].sample(rng, (int(counts[i]), K, d))
                                    for i in range(n)])
            noise = np.empty_like(drawn)
            noise[order] = drawn
            noise_t = torch.from_numpy(noise)
            cl = torch.from_numpy(flat.astype(np.int64))
            a_s, b_s = a[cl], b[cl]
            for m in methods:
                xc = x[m.name][c]
                start = xc.repeat(s, 1)                           # [s*P, d] slot-major
                rule = m.client_rule(t)
                theta, lstate = start.clone(), rule.init(start)
                for k in range(K):
                    g = a_s * (theta - b_s) + noise_t[:, k]
                    theta, lstate = rule.step(theta, g, lstate)
                delta = (start - theta).view(s, P, d).sum(0) / s
                x[m.name][c], sstate[m.name][c] = m.server_rule(t).step(
                    xc, delta, sstate[m.name][c])
        record()
        if progress is not None:
            progress(1)
    final = {m.name: torch.cat(x[m.name]).numpy() for m in methods}
    hist = {name: {k: np.asarray(v) for k, v in h.items()} for name, h in history.items()}
    tr = {name: (np.stack(v) if v else np.zeros((rounds + 1, 0))) for name, v in trace.items()}
    return MCOutput(final, hist, tr, seed, paths, rounds)
