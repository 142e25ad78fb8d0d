"""Local SGD with linear extras through the fused path equals the step-by-step path (issue 16).

FedAvg with weight decay (coupled / decoupled) and learning-rate decay, FedProx, FedCM,
FedAdam(*), Adp-Fed and SCAFFOLD describe their local work as one
:class:`sims.rules.optim.AffineSGD` (``affine_local_sgd``); the engine then runs it through the
problem's fused kernels. Held here in float64 to ``fused=False`` (``stoch_grad`` and the
readable ``local_step``), with clients of unequal sizes (padded steps), several replicas,
per-replica hyperparameters, and over several rounds (SCAFFOLD's controls, FedCM's ``g_a``).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.experiments.sweep.per_replica import batched_algorithm
from sims.algorithms.registry import make_for_problem
from sims.core.engine import run
from sims.problems.models import MLP
from sims.rules.optim import AffineSGD
from sims.core.participation import Participation
from sims.problems.linear_stack import linear_stack_grad, linear_stack_sgd_
from sims.problems.neural import NeuralProblem

from conftest import plan_payload


def _problem(image_data, batch_size=4, sizes=(5, 9, 14, 20, 14)):
    bounds = np.cumsum((0, *sizes))
    parts = [np.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    return NeuralProblem(image_data, parts, MLP(784, hidden=4), batch_size=batch_size,
                         dtype=torch.float64)


CASES = [
    ("fedavg", {}),
    ("fedavg", {"weight_decay": 0.05, "lr_decay": 0.9}),
    ("fedavg", {"weight_decay": 0.05, "wd_mode": "decoupled"}),
    ("fedprox", {"mu": 0.3}),
    ("fedprox", {"mu": 0.3, "weight_decay": 0.02}),
    ("fedcm", {"alpha": 0.4, "weight_decay": 0.02}),
    ("fedcm", {"alpha": 0.4, "weight_decay": 0.02, "wd_mode": "decoupled"}),
    ("fedadam-cm", {"alpha": 0.5}),
    ("adp-fed", {"eta_l": 0.1}),
    ("scaffold", {}),
    ("scaffold", {"alpha": 0.5, "weight_decay": 0.03, "lr_decay": 0.95}),
    ("scaffold", {"weight_decay": 0.03, "wd_mode": "decoupled", "n_clients": 5}),
]


def _runs(prob, make, rounds=3, seeds=(0, 1)):
    part = Participation("fixed", m=3)
    return [run(prob, make(), part, rounds, list(seeds), eval_every=0, fused=f)
            for f in (True, False)]


@pytest.mark.parametrize("name,hyper", CASES)
def test_fused_affine_local_sgd_equals_step_by_step(image_data, name, hyper):
    prob = _problem(image_data)
    fused, plain = _runs(prob, lambda: make_for_problem(name, prob, **hyper))
    for key, val in plain.server.items():
        got = fused.server[key]
        if isinstance(val, dict):
            for k in val:
                torch.testing.assert_close(got[k], val[k], rtol=1e-10, atol=1e-12)
        else:
            torch.testing.assert_close(got, val, rtol=1e-10, atol=1e-12)
    for key, val in plain.client_state.items():
        torch.testing.assert_close(fused.client_state[key], val, rtol=1e-10, atol=1e-12)
    theta0 = torch.stack([prob.init_theta(s) for s in (0, 1)])
    assert not torch.allclose(plain.server["theta"], theta0)      # something was trained


def test_fused_affine_per_replica_hyperparameters(image_data):
    prob = _problem(image_data)
    settings = [{"eta_l": 0.05, "mu": 0.1, "weight_decay": 0.01},
                {"eta_l": 0.2, "mu": 0.4, "weight_decay": 0.03}]
    fused, plain = _runs(prob, lambda: batched_algorithm("fedprox", settings))
    torch.testing.assert_close(fused.server["theta"], plain.server["theta"], rtol=1e-10,
                               atol=1e-12)


def test_the_engine_takes_the_fused_path(image_data, monkeypatch):
    """The equality above would also hold if the fused path were never taken."""
    prob = _problem(image_data)
    calls = []
    orig = NeuralProblem.local_sgd_affine
    monkeypatch.setattr(NeuralProblem, "local_sgd_affine",
                        lambda self, *a: calls.append(1) or orig(self, *a))
    run(prob, make_for_problem("scaffold", prob, weight_decay=0.1), Participation("fixed", m=3), 1,
        [0], eval_every=0)
    assert calls
    calls.clear()
    run(prob, make_for_problem("scaffold", prob, control="I"), Participation("fixed", m=3), 1, [0],
        eval_every=0)
    assert not calls                            # option I needs the first gradient: declined


def test_linear_stack_affine_sgd_equals_the_readable_rule(image_data):
    """Per step ``theta <- (1 - decay) theta - lr g(theta) + shift`` (AffineSGD.step), with
    padded steps left alone, per-row rates and decays."""
    prob = _problem(image_data)
    B = 5
    payload = plan_payload(prob, range(B))
    steps = (payload >= 0).any(-1)                               # [B, K] valid steps
    assert not bool(steps.all())
    gen = torch.Generator().manual_seed(0)
    theta0 = torch.randn(B, prob.d, generator=gen, dtype=torch.float64) * 0.1
    shift = torch.randn(B, prob.d, generator=gen, dtype=torch.float64) * 1e-3
    lr = torch.tensor([[0.1], [0.2], [0.05], [0.3], [0.1]], dtype=torch.float64)
    for rule in (AffineSGD(0.1, 0.01, shift), AffineSGD(lr, lr * 0.2, None),
                 AffineSGD(lr, 0.0, shift)):
        want = theta0.clone()
        for k in range(payload.shape[1]):
            x, y, w = prob.minibatch(payload[:, k])
            g = linear_stack_grad(want, prob.layout, x, y, w)[0]
            want = rule.step(want, g, steps[:, k])
        got = linear_stack_sgd_(theta0.clone(), prob.layout,
                                lambda k: prob.minibatch(payload[:, k]), payload.shape[1],
                                rule.lr, rule.decay, rule.shift, steps)
        torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-13)
