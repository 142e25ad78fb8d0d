"""FedAda2 Figures 3-7 (issue 21, second part): epoch-wise preconditioner freezing (Fig. 7),
and the entries fedada2_epochs, fedada2_fig5, fedada2_sweeps, fedada2_fig6, fedada2_fig7,
fedada2_full at --tiny scale."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.algorithms.fedada2 import FedAda2, FedAda2Adam, JointNoPrecond
from sims.engine import run
from sims.models import MLP
from sims.participation import Participation
from sims.problems.neural import NeuralProblem
from conftest import random_dataset
from test_algorithms_equivalence import check

SIZES = (5, 9, 14, 20, 14)                   # batch 4 -> 2, 3, 4, 5, 4 steps per epoch


@pytest.fixture(scope="module")
def mlp_epochs():
    perm = np.random.default_rng(7).permutation(sum(SIZES))
    parts = [np.sort(p) for p in np.split(perm, np.cumsum(SIZES)[:-1])]
    return NeuralProblem(random_dataset(sum(SIZES), 28, 0), parts, MLP(784, hidden=4),
                         batch_size=4, local_epochs=5, dtype=torch.float64)


FREEZE = {
    "sm3-adam-freeze1": lambda: FedAda2Adam(eta=0.01, freeze_epochs=1),
    "sm3-adam-freeze3": lambda: FedAda2Adam(eta=0.01, freeze_epochs=3, precond="sm3-i"),
    # eps 0.1: with eps 1e-3 a stale AdaGrad denominator (delay and freezing) amplifies the
    # two paths' rounding differences to ~2e-10 (measured; 2e-12 with delay alone)
    "adagrad-freeze1-delay2": lambda: JointNoPrecond(eta=0.05, freeze_epochs=1, delay=2,
                                                     eps=0.1),
    "sm3-adagrad-freeze3": lambda: FedAda2(eta=0.05, freeze_epochs=3),
    "dja-adam-freeze1": lambda: FedAda2Adam(eta=0.01, freeze_epochs=1, init="server"),
}


@pytest.mark.parametrize("name", sorted(FREEZE))
def test_epoch_freezing_engine_equals_reference(mlp_epochs, name):
    """Clients of unequal epoch lengths (2-5 steps), 5 epochs: the batched path equals the
    sequential reference (float64, 1e-10)."""
    check(mlp_epochs, FREEZE[name](), Participation("fixed", m=3))


def test_epoch_freezing_changes_the_run_and_zero_freeze_is_the_plain_rule(mlp_epochs):
    part = Participation("fixed", m=3)
    plain = run(mlp_epochs, FedAda2Adam(eta=0.01), part, 2, [0], eval_test=False)
    zero = run(mlp_epochs, FedAda2Adam(eta=0.01, freeze_epochs=0), part, 2, [0],
               eval_test=False)
    frozen = run(mlp_epochs, FedAda2Adam(eta=0.01, freeze_epochs=1), part, 2, [0],
                 eval_test=False)
    assert torch.equal(plain.server["theta"], zero.server["theta"])
    assert (frozen.server["theta"] - plain.server["theta"]).abs().max() > 1e-6


def test_epoch_freezing_update_schedule():
    """Steps 1..k of a client with 3 steps per epoch, 1 frozen epoch: updates in epochs 0, 2,
    4 only; the count is the number of updates so far (ADMU's debiasing exponent)."""
    from sims.algorithms.base import RoundContext
    alg = FedAda2Adam(freeze_epochs=1)
    k = torch.arange(1, 16, dtype=torch.float64)
    ctx = RoundContext(0, None, torch.zeros(15, dtype=torch.long), torch.zeros(15, dtype=torch.long),
                       None, extra={"epoch_steps": torch.full((15,), 3)})
    upd, count = alg._updates(k, ctx)
    assert upd.tolist() == [True] * 3 + [False] * 3 + [True] * 3 + [False] * 3 + [True] * 3
    assert count.tolist() == [1, 2, 3, 3, 3, 3, 4, 5, 6, 6, 6, 6, 7, 8, 9]


def test_epoch_freezing_needs_epochs():
    from sims.problems.quadratic import heterogeneous_quadratic
    quad = heterogeneous_quadratic(4, 6, local_steps=3, seed=1)
    with pytest.raises(ValueError, match="no local epochs"):
        run(quad, FedAda2Adam(freeze_epochs=1), Participation("fixed", m=2), 1, [0])
    with pytest.raises(ValueError, match="freeze_epochs"):
        FedAda2Adam(freeze_epochs=-1)
