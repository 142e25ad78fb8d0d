"""``init_seed``: one initialisation shared by every seed of a run (Fed-LAMB's experiments),
while the run's seed still drives the client sampling and the minibatches; without it each seed
draws its own initial weights (every other entry's behaviour, unchanged)."""
from __future__ import annotations

import pytest
import torch

from sims.algorithms.registry import make_algorithm
from sims.core.engine import run
from sims.core.participation import Participation
from sims.data import Dataset
from sims.problems.image import build_image_problem


def _data():
    g = torch.Generator().manual_seed(3)
    return Dataset("fixture", torch.randn(40, 1, 28, 28, generator=g),
                   torch.randint(0, 10, (40,), generator=g), torch.randn(8, 1, 28, 28, generator=g),
                   torch.randint(0, 10, (8,), generator=g), 10, "random fixture")


def _problem(**kw):
    return build_image_problem(model="mlp", n_clients=4, scheme="iid", batch_size=5,
                               model_kw={"hidden": 3}, data=_data(), **kw)


def test_seeds_share_theta0_under_init_seed_and_differ_without():
    shared, own = _problem(init_seed=7), _problem()
    assert torch.equal(shared.init_theta(0), shared.init_theta(1))
    assert torch.equal(shared.init_theta(0), own.init_theta(7))       # drawn from seed 7
    assert not torch.equal(own.init_theta(0), own.init_theta(1))
    assert torch.equal(own.init_theta(1), own.init_theta(1))           # still seeded
    assert own.init_seed is None and own.seed_of_init(4) == 4 and shared.seed_of_init(4) == 7


def test_engine_starts_every_seed_at_the_shared_theta0_and_samples_by_seed():
    alg = make_algorithm("fed-sgd", eta_l=0.1)

    def theta(problem, rounds):
        out = run(problem, alg, Participation("full"), rounds, [0, 1], eval_every=0)
        return out.server["theta"]
    start_shared, start_own = theta(_problem(init_seed=7), 0), theta(_problem(), 0)
    assert torch.equal(start_shared[0], start_shared[1])
    assert not torch.equal(start_own[0], start_own[1])
    # the run's seed still drives the minibatches: one round apart from the shared start
    after = theta(_problem(init_seed=7), 1)
    assert not torch.allclose(after[0], after[1])


@pytest.mark.parametrize("bad", ["x"])
def test_init_seed_must_be_an_integer(bad):
    with pytest.raises(ValueError):
        _problem(init_seed=bad)
