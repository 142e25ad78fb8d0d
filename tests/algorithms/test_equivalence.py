"""The batched engine path of every Fed-LAMB / FedLADA / FedAda2 algorithm equals its plain
sequential reference (:mod:`sims.reference.algorithms`) in float64, relative error <= 1e-10:
final model, every round's train loss and gradient norm, and the server and client state the
reference exposes. Problems: a small heterogeneous quadratic (equal local steps) and the
784-4-10 MLP on 5 clients of unequal sizes (clients take 2-5 local steps, so the engine's
step masks matter), under fixed-m and Bernoulli participation (rounds where a replica has no
participant included); Mime and Mime-LAMB (the engine's round-gradient pre-pass and anchor
gradients) also under full participation and split over engine chunks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.baselines import (AdpFed, FedAdaGrad, FedAdam, FedAdamCM, FedAvg,
                                       FedAvgM, FedCM, FedProx, FedYogi, LocalYogi, Mime,
                                       MimeLite, Scaffold)
from sims.algorithms.fed_lamb import FedAMS, FedLAMB, MimeLAMB, MimeLiteLAMB
from sims.algorithms.fedada2 import (DirectJoint, FedAda2, FedAda2Adam, FedAda2Blend,
                                     FedAdaAdagrad, FedAdaAdam, JointNoPrecond)
from sims.algorithms.fedlada import FedLADA, LocalAdam
from sims.core.engine import run
from sims.problems.models import MLP
from sims.core.participation import Participation
from sims.problems.neural import NeuralProblem
from sims.problems.quadratic import heterogeneous_quadratic
from sims.reference import run_reference
from conftest import random_dataset


TOL = 1e-10
SEEDS = (0, 3)
ROUNDS = 3


SIZES = (5, 9, 14, 20, 14)                   # batch 4 -> 2, 3, 4, 5, 4 local steps


@pytest.fixture(scope="module")
def quad_small():
    return heterogeneous_quadratic(6, 12, local_steps=3, seed=1, sigma=0.5, x0=1.0)


@pytest.fixture(scope="module")
def mlp_small():
    perm = np.random.default_rng(7).permutation(sum(SIZES))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(SIZES)[:-1])]
    prob = NeuralProblem(random_dataset(sum(SIZES), 28, 0), parts, MLP(784, hidden=4),
                         batch_size=4, dtype=torch.float64)
    assert prob.fast_path
    return prob


ALGORITHMS = {
    # FedLADA family
    "fedavg": lambda n: FedAvg(eta=0.9, eta_l=0.05),
    "fedavgm": lambda n: FedAvgM(eta=0.9, eta_l=0.05, beta=0.8),
    "local-yogi": lambda n: LocalYogi(eta_l=0.05),
    "fedprox": lambda n: FedProx(eta_l=0.05, mu=0.3),
    "fedcm-wd-decay": lambda n: FedCM(eta_l=0.05, weight_decay=0.01, lr_decay=0.9),
    "fedcm-decoupled": lambda n: FedCM(eta_l=0.05, weight_decay=0.01, wd_mode="decoupled"),
    "fedadam": lambda n: FedAdam(eta=0.05, eta_l=0.05),
    "fedadam-bc-inside": lambda n: FedAdam(eta=0.05, eta_l=0.05, bias_correction=True,
                                           eps_inside_sqrt=True),
    "fedadam-cm": lambda n: FedAdamCM(eta=0.05, eta_l=0.05, alpha=0.3),
    "fedadam-cm-global": lambda n: FedAdamCM(eta=0.05, eta_l=0.05, ga_source="global"),
    "scaffold": lambda n: Scaffold(eta_l=0.05, n_clients=n),
    "scaffold-alpha-I": lambda n: Scaffold(eta_l=0.05, alpha=1.5, control="I", n_clients=n,
                                           weight_decay=0.01),
    "scaffold-global-decay": lambda n: Scaffold(eta=0.8, eta_l=0.05, lr_decay=0.9,
                                                decay_global=True, n_clients=n),
    "fedlada": lambda n: FedLADA(eta_l=0.01, alpha=0.2, weight_decay=0.01, lr_decay=0.95),
    "fedlada-zero-v": lambda n: FedLADA(eta=0.8, eta_l=0.01, v_init="zero", v0=1e-6,
                                        weight_decay=0.01, wd_mode="decoupled"),
    "localadam": lambda n: LocalAdam(eta_l=0.01),
    # Fed-LAMB family
    "fed-ams": lambda n: FedAMS(eta_l=0.01),
    "fed-ams-local": lambda n: FedAMS(eta_l=0.01, vhat="local", bias_correction="none"),
    "fed-lamb": lambda n: FedLAMB(eta_l=0.01, lam=0.01),
    "fed-lamb-restart-m": lambda n: FedLAMB(eta_l=0.01, persist_m=False, phi="identity"),
    "fed-lamb-fixed-round": lambda n: FedLAMB(eta_l=0.01, vhat="fixed", eps_again=True,
                                              bias_correction="round", lr_decay=0.9),
    "adp-fed": lambda n: AdpFed(eta=0.01, eta_l=0.05),
    "mimelite": lambda n: MimeLite(eta_l=0.01),
    "mimelite-adam": lambda n: MimeLite(eta_l=0.01, base="adam"),
    "mimelite-sgdm": lambda n: MimeLite(eta_l=0.05, base="sgdm"),
    "mimelite-lamb": lambda n: MimeLiteLAMB(eta_l=0.01, lam=0.1),
    "mime": lambda n: Mime(eta_l=0.01),
    "mime-sgdm-eta": lambda n: Mime(eta=0.8, eta_l=0.05, base="sgdm", lr_decay=0.9),
    "mime-lamb": lambda n: MimeLAMB(eta_l=0.01, lam=0.1),
    # FedAda2 family
    "fedadagrad": lambda n: FedAdaGrad(eta=0.05, eta_l=0.05, beta1=0.5),
    "fedyogi": lambda n: FedYogi(eta=0.05, eta_l=0.05),
    "fedada2": lambda n: FedAda2(eta=0.05),
    "fedada2-sm3i-delay": lambda n: FedAda2(eta=0.05, precond="sm3-i", delay=2),
    "fedada2-sm3ii-delay": lambda n: FedAda2(eta=0.05, delay=3),
    "fedada2-adam": lambda n: FedAda2Adam(eta=0.01),
    "fedada2-adam-sm3i": lambda n: FedAda2Adam(eta=0.01, precond="sm3-i", delay=2,
                                               bias_correction=False),
    "dja": lambda n: DirectJoint(eta=0.05),
    "dja-adam-sm3": lambda n: DirectJoint(eta=0.01, server="adam", server_beta1=0.9,
                                          client="adam", precond="sm3-ii"),
    "joint-adaptive": lambda n: JointNoPrecond(eta=0.05),
    "fedadaadam": lambda n: FedAdaAdam(eta=0.05, delay=2),
    "fedadaadagrad": lambda n: FedAdaAdagrad(eta=0.05, delay=3),
    "fedada2-clip": lambda n: FedAda2(eta=0.05, clip=0.3),
    "fedada2-blend": lambda n: FedAda2Blend(eta=0.05, weights="1,0.5,2", steps="2,1,3"),
    "fedada2-blend-delay": lambda n: FedAda2Blend(eta=0.05, strategies="sm3i-adam,adagrad",
                                                  delay=2),
}


def _rel(a, b):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    den = float(b.norm())
    return float((a - b).norm()) / (den if den > 0 else 1.0)


def _find(server: dict, key: str):
    """``server[key]``, or the entry of that name in a nested optimizer-state dict."""
    if key in server:
        return server[key]
    for val in server.values():
        if isinstance(val, dict) and key in val:
            return val[key]
    raise KeyError(key)


def check(problem, alg, participation):
    out = run(problem, alg, participation, ROUNDS, SEEDS, eval_test=False)
    for r, seed in enumerate(SEEDS):
        ref = run_reference(problem, alg, participation, ROUNDS, seed)
        assert torch.isfinite(ref.theta).all()
        err = _rel(out.server["theta"][r], ref.theta)
        assert err <= TOL, f"seed {seed}: final model relative error {err:.3g}"
        for name in ("train_loss", "grad_norm2"):
            fast, slow = out.metrics[name][r], ref.history[name]
            assert fast.shape == slow.shape
            assert np.all(np.abs(fast - slow) <= TOL * np.abs(slow)), (name, fast, slow)
        for key, val in ref.server.items():         # server state the reference exposes
            assert _rel(_find(out.server, key)[r], val) <= TOL, (key, seed)
        for client, state in ref.clients.items():   # persistent client state
            for key, val in state.items():
                if key in out.client_state:
                    assert _rel(out.client_state[key][r, client], val) <= TOL, (key, client)
    return out


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_engine_equals_reference_quadratic(quad_small, name):
    alg = ALGORITHMS[name](quad_small.n_clients)
    check(quad_small, alg, Participation("fixed", m=3))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_engine_equals_reference_mlp(mlp_small, name):
    alg = ALGORITHMS[name](mlp_small.n_clients)
    check(mlp_small, alg, Participation("fixed", m=3))


@pytest.mark.parametrize("name", ["fedlada", "scaffold", "fed-lamb", "fedada2", "mimelite",
                                  "fedadam-cm", "mime", "mime-lamb"])
def test_engine_equals_reference_bernoulli(quad_small, name):
    """Bernoulli participation: varying numbers of participants, some rounds with none."""
    part = Participation("bernoulli", p=0.25)
    alg = ALGORITHMS[name](quad_small.n_clients)
    check(quad_small, alg, part)


def test_engine_equals_reference_in_chunks(mlp_small):
    """Participants split over several engine chunks (max_batch) give the same SCAFFOLD run:
    the participant tally behind ``c <- c + |S|/N mean dc`` sums over chunks."""
    alg = Scaffold(eta_l=0.05, n_clients=mlp_small.n_clients)
    part = Participation("fixed", m=4)
    whole = run(mlp_small, alg, part, ROUNDS, SEEDS, eval_test=False)
    chunked = run(mlp_small, alg, part, ROUNDS, SEEDS, eval_test=False, max_batch=3)
    assert _rel(chunked.server["c"], whole.server["c"]) <= TOL
    assert _rel(chunked.server["theta"], whole.server["theta"]) <= TOL
    ref = run_reference(mlp_small, alg, part, ROUNDS, SEEDS[1])
    assert _rel(chunked.server["c"][1], ref.server["c"]) <= TOL


@pytest.mark.parametrize("name", ["mime", "mime-lamb", "mime-sgdm-eta"])
@pytest.mark.parametrize("problem", ["quad_small", "mlp_small"])
def test_mime_engine_equals_reference_full_participation(request, problem, name):
    """Mime's pre-pass (the participants' full gradients at x, averaged into c) and its
    SVRG-corrected local steps, full participation; the reference exposes c and s."""
    prob = request.getfixturevalue(problem)
    out = check(prob, ALGORITHMS[name](prob.n_clients), Participation("full"))
    assert set(out.server) >= {"theta", "s", "c"}


def test_mime_engine_equals_reference_in_chunks(mlp_small):
    """The round-gradient pre-pass and the local training split over engine chunks."""
    alg = MimeLAMB(eta_l=0.01, lam=0.1)
    part = Participation("fixed", m=4)
    whole = run(mlp_small, alg, part, ROUNDS, SEEDS, eval_test=False)
    chunked = run(mlp_small, alg, part, ROUNDS, SEEDS, eval_test=False, max_batch=3)
    for key in ("theta", "c"):
        assert _rel(chunked.server[key], whole.server[key]) <= TOL
    ref = run_reference(mlp_small, alg, part, ROUNDS, SEEDS[1])
    assert _rel(chunked.server["c"][1], ref.server["c"]) <= TOL
    assert _rel(chunked.server["theta"][1], ref.theta) <= TOL
