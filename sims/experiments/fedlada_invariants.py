"""FedLADA's exact invariants read from engine runs (spec ``fedlada.md`` section 4, T1-T3).

:class:`RecordingFedLADA` wraps a :class:`sims.algorithms.fedlada.FedLADA` as the engine runs
it and records, per replica and round, what the paper's identities are stated in;
:func:`measure` runs it and returns, per replica and round, how far each identity is from
holding:

* ``eq4`` (T2, Eq. 4, line 18 of Alg. 3): ``g_a^{t+1} = alpha D_t + (1 - alpha) g_a^t`` with
  ``D_t`` the mean over the round's participants and local steps of ``m / sqrt(vhat)``; a
  decoupled weight decay joins it as ``+ (wd / alpha) Xbar_t``, the mean iterate it acts on
  (coupled decay is inside ``m``). Relative residual ``||lhs - rhs|| / ||rhs||``.
* ``lemma_b8`` (T1, Lemma B.8 with ``eta = K eta_g``): with ``z^t = x^t / alpha - (1 - alpha) /
  alpha x^{t-1}`` (``x^{-1} = x^0``), ``z^{t+1} = z^t - c_t D_t - (1 - alpha) / alpha (c_t -
  c_{t-1}) g_a^t``, ``c_t = eta_g(t) K eta_l(t)`` the round's effective rate. The last term is
  the learning-rate decay's, zero at constant rates, where this is the printed lemma;
  ``lemma_b8_printed`` is the residual of the printed form (without it).
* T3: ``vhat_fell`` (the largest fall of ``vhat`` within a round; the AMSGrad max keeps it
  non-decreasing), ``v_fell`` (the largest coordinate of ``v^t - v^{t+1}``), ``theta_excess``
  (``eps_v max 1/sqrt(v^{t+1}) - 1``: ``vartheta <= 1/eps_v``) and ``m_excess`` (per
  participant, ``||m||_inf`` over the largest ``|g|`` it has taken this round, minus 1; ``g``
  the gradient the moment rule sees, with a coupled decay's ``wd x``). Each is ``<= 0`` when
  the invariant holds (up to rounding).

The readable check of the same identities on hand-driven rounds is
``tests/algorithms/test_invariants.py``; :mod:`reproduce.fedlada_theory` files these as
verdicts.
"""
from __future__ import annotations

import numpy as np
import torch

from ..algorithms.fedlada import FedLADA
from ..core.engine import run

METRICS = ("eq4", "lemma_b8", "lemma_b8_printed", "vhat_fell", "v_fell", "theta_excess",
           "m_excess")


def _rel(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Per replica (rows): ``||a - b|| / ||b||``."""
    num = (a - b).double().norm(dim=-1)
    return (num / b.double().norm(dim=-1).clamp_min(1e-300)).numpy()


class RecordingFedLADA:
    """``FedLADA`` as the engine runs it, recording per replica and round the sums over the
    round's participants and steps of ``m/sqrt(vhat)`` and of the iterate a decoupled decay
    acts on, the number of those terms, the largest fall of ``vhat`` within the round, the
    largest ``||m||_inf / max|g|`` of a participant, and the server state before and after."""

    def __init__(self, alg: FedLADA, replicas: int, d: int, local_steps: int):
        if not isinstance(alg, FedLADA) or not alg.amended:
            raise ValueError("the invariants are FedLADA's with alpha < 1 (g_a exists)")
        self.inner, self.R, self.d, self.K = alg, replicas, d, local_steps
        self.dirs, self.iters, self.terms, self.steps = {}, {}, {}, {}
        self.vhat_fell, self.m_ratio, self.rounds = {}, {}, []
        self._gmax: torch.Tensor | None = None
        self._round = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _acc(self, store, t, values, replica):
        store.setdefault(t, torch.zeros(self.R, dtype=torch.float64) if values.dim() == 1
                         else torch.zeros(self.R, self.d, dtype=torch.float64))
        store[t].index_add_(0, replica, values.double())

    def _max(self, store, t, values, replica):
        cur = store.setdefault(t, torch.full((self.R,), -np.inf, dtype=torch.float64))
        cur.scatter_reduce_(0, replica, values.double(), reduce="amax")

    def local_step(self, theta, grad, lstate, bcast, cstate, mask, ctx):
        if mask is not None:
            raise ValueError("the invariants are recorded for lockstep rounds (every "
                             "participant takes K steps)")
        alg, t = self.inner, ctx.t
        seen = grad + alg.weight_decay * theta if alg.wd_mode == "coupled" else grad
        if self._round != t or self._gmax is None or len(self._gmax) != len(theta):
            self._round, self._gmax = t, torch.zeros(len(theta), dtype=torch.float64)
            self.steps[t] = 0
        self._gmax = torch.maximum(self._gmax, seen.abs().amax(-1).double())
        before, vhat_before = theta.clone(), lstate["vhat"].clone()
        theta, lstate = alg.local_step(theta, grad, lstate, bcast, cstate, mask, ctx)
        self.steps[t] += 1
        self._max(self.vhat_fell, t, (vhat_before - lstate["vhat"]).amax(-1), ctx.replica)
        ratio = lstate["m"].abs().amax(-1).double() / self._gmax.clamp_min(1e-300)
        self._max(self.m_ratio, t, ratio - 1, ctx.replica)
        self._acc(self.dirs, t, lstate["m"] / lstate["vhat"].sqrt(), ctx.replica)
        self._acc(self.iters, t, before, ctx.replica)
        self._acc(self.terms, t, torch.ones(len(theta), dtype=torch.float64), ctx.replica)
        return theta, lstate

    def server_step(self, server, mean_message, sums, active, ctx):
        new, metrics = self.inner.server_step(server, mean_message, sums, active, ctx)
        self.rounds.append((ctx.t, {k: v.clone() for k, v in server.items()},
                            {k: v.clone() for k, v in new.items()}))
        return new, metrics

    def rate(self, t: int) -> float:
        """``c_t = eta_g(t) K eta_l(t)``, the round's effective rate (Lemma B.8's ``eta eta_l``)."""
        alg = self.inner
        eta_g = alg.eta * alg.lr_decay ** t if alg.decay_global else alg.eta
        return eta_g * self.K * alg.local_lr(t)

    def residuals(self) -> dict[str, np.ndarray]:
        """``{metric: [R, rounds]}`` (:data:`METRICS`) from what was recorded. A round the
        engine ran in several chunks of clients (more local-step calls than ``K``) is refused:
        the per-participant running maximum of ``|g|`` assumes one chunk."""
        alg, a = self.inner, self.inner.alpha
        chunked = sorted(t for t, n in self.steps.items() if n != self.K)
        if chunked:
            raise RuntimeError(f"rounds {chunked[:3]} took {self.steps[chunked[0]]} local-step "
                               f"calls, not K = {self.K}: the engine chunked the clients; "
                               "record the invariants on a problem small enough for one chunk")
        out = {k: [] for k in METRICS}
        x_prev = self.rounds[0][1]["theta"]
        for t, old, new in self.rounds:
            D = self.dirs[t] / self.terms[t].unsqueeze(-1)
            if alg.wd_mode == "decoupled" and alg.weight_decay:
                D = D + alg.weight_decay / a * self.iters[t] / self.terms[t].unsqueeze(-1)
            ga_old, th_old = old["ga"].double(), old["theta"].double()
            out["eq4"].append(_rel(new["ga"].double(), a * D + (1 - a) * ga_old))
            z_old = th_old / a - (1 - a) / a * x_prev.double()
            z_new = new["theta"].double() / a - (1 - a) / a * th_old
            printed = z_old - self.rate(t) * D
            drift = (self.rate(t) - self.rate(t - 1)) * ga_old if t else 0 * ga_old
            out["lemma_b8"].append(_rel(z_new, printed - (1 - a) / a * drift))
            out["lemma_b8_printed"].append(_rel(z_new, printed))
            out["vhat_fell"].append(self.vhat_fell[t].numpy())
            out["v_fell"].append((old["v"] - new["v"]).double().amax(-1).numpy())
            out["theta_excess"].append(
                (alg.eps_v / new["v"].double().sqrt().amin(-1) - 1).numpy())
            out["m_excess"].append(self.m_ratio[t].numpy())
            x_prev = old["theta"]
        return {k: np.stack(v, axis=1) for k, v in out.items()}


def measure(problem, alg: FedLADA, participation, rounds: int, seeds) -> dict[str, np.ndarray]:
    """Run ``alg`` on ``problem`` (every seed as a replica) and return :data:`METRICS` per
    replica and round (``[len(seeds), rounds]``)."""
    seeds = list(seeds)
    rec = RecordingFedLADA(alg, len(seeds), problem.d, problem.local_steps)
    out = run(problem, rec, participation, rounds, seeds, eval_every=0)
    if [t for t, _, _ in rec.rounds] != list(range(rounds)):
        raise RuntimeError("the engine skipped a server step; the recording is incomplete")
    if not torch.equal(rec.rounds[-1][2]["theta"], out.server["theta"]):
        raise RuntimeError("the recorded last server state is not the run's")
    return rec.residuals()
