"""The consistency term (FedLADA Fig. 8(c)) recorded by :class:`TrackConsistency` equals a
direct computation ``(1/S) sum_i ||x_{i,K} - x^{t+1}||^2`` from plain loops that keep every
client's end model (FedLADA Alg. 3 and FedAvg on a float64 quadratic, every round), and
tracking changes nothing else in the run."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from sims.algorithms.registry import make_algorithm
from sims.core.engine import draw_round, run
from sims.core.participation import Participation
from sims.experiments.probes.consistency import METRIC, TrackConsistency
from sims.problems.quadratic import heterogeneous_quadratic

ROUNDS, K, M = 6, 3, 3


@pytest.fixture(scope="module")
def quad():
    return heterogeneous_quadratic(8, 10, local_steps=K, seed=2, sigma=0.4, x0=1.0)


def plain(problem, seed, lr, alpha, eta=1.0, adaptive=True, b1=0.9, b2=0.99, v0=1e-4):
    """FedLADA Alg. 3 (``adaptive``) or FedAvg, one client at a time; returns the
    consistency term of every round from the clients' end models."""
    part = Participation("fixed", m=M)
    x = problem.init_theta(seed).clone()
    v = torch.full_like(x, v0)
    ga = torch.zeros_like(x)
    terms = []
    for t in range(ROUNDS):
        draw = draw_round(problem, part, False, seed, t)
        ends, vhats = [], []
        for j, i in enumerate(draw.clients):
            y, m, vv, vhat = x.clone(), torch.zeros_like(x), v.clone(), v.clone()
            for noise in draw.payloads[j]:
                g = problem.reference_grad(y, int(i), noise)
                if adaptive:
                    m = b1 * m + (1 - b1) * g
                    vv = b2 * vv + (1 - b2) * g * g
                    vhat = torch.maximum(vhat, vv)
                    y = y - lr * (alpha * m / vhat.sqrt() + (1 - alpha) * ga)
                else:
                    y = y - lr * g
            ends.append(y)
            vhats.append(vhat)
        x_new = x - eta * sum(x - y for y in ends) / len(ends)
        terms.append(float(sum(((y - x_new) ** 2).sum() for y in ends) / len(ends)))
        ga = sum((x - y) / (lr * K) for y in ends) / len(ends)
        v = sum(vhats) / len(vhats)
        x = x_new
    return np.array(terms)


@pytest.mark.parametrize("name,hyper", [
    ("fedlada", dict(eta_l=0.02, alpha=0.3, v0=1e-4)),
    ("localadam", dict(eta_l=0.02, v0=1e-4)),
    ("fedavg", dict(eta_l=0.1, eta=0.7)),
])
def test_consistency_equals_direct_computation(quad, name, hyper):
    alg = make_algorithm(name, **hyper)
    out = run(quad, TrackConsistency(alg), Participation("fixed", m=M), ROUNDS, [0, 1],
              eval_every=0)
    assert list(out.rounds[METRIC]) == list(range(1, ROUNDS + 1))
    for r, seed in enumerate((0, 1)):
        want = plain(quad, seed, hyper["eta_l"], hyper.get("alpha", 1.0),
                     eta=hyper.get("eta", 1.0), adaptive=name != "fedavg")
        got = out.metrics[METRIC][r]
        assert np.all(want > 0)
        np.testing.assert_allclose(got, want, rtol=1e-9)


def test_tracking_changes_nothing_else(quad):
    alg = make_algorithm("scaffold", eta_l=0.05, n_clients=quad.n_clients)
    part = Participation("bernoulli", p=0.2)         # rounds with no participant included
    a = run(quad, alg, part, ROUNDS, [0, 4], eval_every=0)
    b = run(quad, TrackConsistency(alg), part, ROUNDS, [0, 4], eval_every=0)
    for key in a.server:
        assert torch.equal(a.server[key], b.server[key])
    empty = np.array([[len(c) == 0 for c in reps] for reps in b.participants])
    assert empty.any() and np.isnan(b.metrics[METRIC][empty]).all()
    assert np.isfinite(b.metrics[METRIC][~empty]).all()
    assert TrackConsistency(alg).describe()["name"] == "scaffold"
