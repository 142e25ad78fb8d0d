"""FedLADA's defaults that must match the paper (issue 20), float64.

* SCAFFOLD under partial participation equals its printed update (Karimireddy et al. option
  II, ``c <- c + (1/N) sum_{i in S} (c_i^+ - c_i)`` with N the population): the server model
  after 30 rounds against a plain loop written here from the printed equations; the registry
  default without ``n_clients`` refuses to run (one line) instead of averaging over ``|S|``.
* ``fedadam``'s default ``tau`` is the paper's 0.1 (``v0 = tau^2 = 1e-2``, Sec. 4.1).
* Weight decay and the 0.998-style local learning-rate decay are options of all seven methods
  and agree with the plain sequential reference (:mod:`sims.reference`).
"""
from __future__ import annotations

import pytest
import torch

from sims.algorithms.registry import make_algorithm
from sims.core.engine import draw_round, run
from sims.rules.base import OptimizerError
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from sims.reference import run_reference

N_CLIENTS, M, ROUNDS, ETA_L, K = 20, 2, 30, 0.05, 4


@pytest.fixture(scope="module")
def quad():
    return heterogeneous_quadratic(N_CLIENTS, 16, local_steps=K, seed=3, sigma=0.3, x0=1.0,
                                   heterogeneity=2.0)


def plain_scaffold(problem, seed, rounds, n_norm=None):
    """SCAFFOLD option II as printed, one client at a time; ``n_norm=None`` divides the
    control update by the population N, ``n_norm="S"`` by the participants (the old bug)."""
    part = Participation("fixed", m=M)
    x = problem.init_theta(seed).clone()
    c = torch.zeros_like(x)
    ci = {}
    for t in range(rounds):
        draw = draw_round(problem, part, False, seed, t)
        ys, dcs = [], []
        for j, i in enumerate(draw.clients):
            i = int(i)
            c_i = ci.get(i, torch.zeros_like(x))
            y = x.clone()
            for noise in draw.payloads[j]:
                y = y - ETA_L * (problem.reference_grad(y, i, noise) - c_i + c)
            c_plus = c_i - c + (x - y) / (K * ETA_L)
            dcs.append(c_plus - c_i)
            ci[i] = c_plus
            ys.append(y)
        x = x + sum(y - x for y in ys) / len(ys)
        c = c + sum(dcs) / (len(dcs) if n_norm == "S" else problem.n_clients)
    return x


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def test_scaffold_partial_participation_equals_printed_update(quad):
    alg = make_algorithm("scaffold", eta_l=ETA_L, n_clients=N_CLIENTS)
    out = run(quad, alg, Participation("fixed", m=M), ROUNDS, [0, 1], eval_every=0)
    for r, seed in enumerate((0, 1)):
        printed = plain_scaffold(quad, seed, ROUNDS)
        assert _rel(out.server["theta"][r], printed) <= 1e-10
        # the old default (divide by |S|) is far from it: the test can tell them apart
        assert _rel(plain_scaffold(quad, seed, ROUNDS, n_norm="S"), printed) > 1e-2


def test_scaffold_without_population_refuses_before_work(quad):
    alg = make_algorithm("scaffold")
    with pytest.raises(OptimizerError, match="n_clients") as info:
        run(quad, alg, Participation("fixed", m=M), 1, [0], eval_every=0)
    assert "\n" not in str(info.value)


def test_make_for_problem_gives_scaffold_the_population_and_leaves_others_alone(quad):
    from sims.algorithms.registry import make_for_problem, with_population
    assert make_for_problem("scaffold", quad).n_clients == quad.n_clients
    assert make_for_problem("scaffold", quad, n_clients=7).n_clients == 7   # given wins
    assert with_population("fedavg", {"eta_l": 0.1}, quad.n_clients) == {"eta_l": 0.1}
    run(quad, make_for_problem("scaffold", quad), Participation("fixed", m=M), 1, [0],
        eval_every=0)


def test_fedadam_default_is_the_papers():
    alg = make_algorithm("fedadam")
    assert (alg.eta, alg.eta_l, alg.beta1, alg.beta2, alg.tau) == (0.1, 0.1, 0.9, 0.99, 0.1)
    server = alg.init_server(torch.zeros(1, 3, dtype=torch.float64))
    v = [val for key, val in _flat(server) if key == "v"]
    assert v and torch.allclose(v[0], torch.full_like(v[0], 1e-2))


def _flat(d):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v)
        else:
            yield k, v


SEVEN = {"fedavg": {}, "fedprox": {}, "scaffold": {"n_clients": N_CLIENTS}, "fedcm": {},
         "fedadam": {"eta": 0.05}, "localadam": {"eta_l": 0.01}, "fedlada": {"eta_l": 0.01}}


@pytest.mark.parametrize("wd_mode", ["coupled", "decoupled"])
@pytest.mark.parametrize("name", sorted(SEVEN))
def test_weight_and_lr_decay_match_reference(quad, name, wd_mode):
    hyper = {"eta_l": ETA_L, **SEVEN[name], "weight_decay": 0.05, "wd_mode": wd_mode,
             "lr_decay": 0.9}
    alg = make_algorithm(name, **hyper)
    part = Participation("fixed", m=3)
    out = run(quad, alg, part, 5, [0, 2], eval_every=0)
    plain = make_algorithm(name, **{**hyper, "weight_decay": 0.0, "lr_decay": 1.0})
    undecayed = run(quad, plain, part, 5, [0], eval_every=0)
    assert _rel(out.server["theta"][0], undecayed.server["theta"][0]) > 1e-3   # options act
    for r, seed in enumerate((0, 2)):
        ref = run_reference(quad, alg, part, 5, seed)
        assert _rel(out.server["theta"][r], ref.theta) <= 1e-10
