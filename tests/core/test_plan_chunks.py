"""The engine's chunks of a round's participants (``sims.core.batching.plan_chunks``): equal
client sizes keep the chunks the engine always made; unequal ones are grouped by local step
count so a large client does not make a whole chunk run its steps; and a run with unequal
clients equals the per-client reference whatever the chunking."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.core.batching import CHUNK_FILL, plan_chunks


def _flat(chunks):
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)


@pytest.mark.parametrize("n,max_batch", [(7, 3), (6, 6), (5, 1), (1, 4)])
def test_equal_steps_keep_the_round_order_cut_every_max_batch(n, max_batch):
    rep = np.repeat([0, 1], [n // 2, n - n // 2])
    chunks = plan_chunks(np.full(n, 4), rep, max_batch)
    want = [np.arange(lo, min(lo + max_batch, n)) for lo in range(0, n, max_batch)]
    assert [c.tolist() for c in chunks] == [w.tolist() for w in want]


def test_every_participant_once_fill_and_replica_runs():
    gen = np.random.default_rng(3)
    for _ in range(50):
        n = int(gen.integers(1, 40))
        steps = gen.integers(1, 60, n)
        rep = np.sort(gen.integers(0, 3, n))
        max_batch = int(gen.integers(1, 12))
        chunks = plan_chunks(steps, rep, max_batch)
        assert sorted(_flat(chunks).tolist()) == list(range(n))
        for c in chunks:
            assert 1 <= len(c) <= max_batch
            assert steps[c].sum() >= CHUNK_FILL * steps[c].max() * len(c) - 1e-9
            key = [(rep[i], i) for i in c]
            assert key == sorted(key)                    # replicas in consecutive runs


def test_a_large_client_gets_its_own_chunk():
    steps = np.array([2, 2, 40, 2, 3, 2])
    chunks = plan_chunks(steps, np.zeros(6, dtype=int), max_batch=8)
    assert [c.tolist() for c in chunks] == [[2], [4], [0, 1, 3, 5]]
    lax = plan_chunks(steps, np.zeros(6, dtype=int), max_batch=4, min_fill=0.0)
    assert [c.tolist() for c in lax] == [[0, 1, 2, 3], [4, 5]]    # the round's order


def _uneven_problem():
    """A float64 MLP problem on random 4x4 images: 6 clients of 3 to 40 samples (1 to 10
    local steps of batch 4)."""
    from sims.problems.models import MLP
    from sims.problems.neural import NeuralProblem
    gen = torch.Generator().manual_seed(0)
    sizes = [40, 3, 21, 7, 36, 12]
    total = sum(sizes)
    ds = type("DS", (), dict(name="tiny", source="random",
                             x_train=torch.randn(total, 1, 4, 4, generator=gen),
                             y_train=torch.randint(0, 3, (total,), generator=gen),
                             x_test=torch.randn(5, 1, 4, 4, generator=gen),
                             y_test=torch.randint(0, 3, (5,), generator=gen)))
    parts = np.split(np.arange(total), np.cumsum(sizes)[:-1])
    return NeuralProblem(ds, parts, MLP(16, 8, 3), batch_size=4, dtype=torch.float64)


@pytest.mark.parametrize("name", ["fed-ams", "fed-lamb", "fedada2", "mimelite", "mime",
                                  "scaffold", "fedavg"])
def test_unequal_clients_match_the_reference(name, monkeypatch):
    """Clients of 1 to 10 local steps, run in several chunks by step count (two replicas),
    equal the per-client reference loop in float64 (final models, every round's loss)."""
    from sims.core import engine
    from sims.algorithms.registry import make_for_problem
    from sims.core.engine import run
    made = []
    monkeypatch.setattr(engine, "plan_chunks",
                        lambda *a, **k: made.append(plan_chunks(*a, **k)) or made[-1])
    from sims.core.participation import Participation
    from sims.reference import run_reference
    prob = _uneven_problem()
    steps = [prob.steps_for(c) for c in range(prob.n_clients)]
    assert len(set(steps)) > 3
    assert len(plan_chunks(steps * 2, [0] * 6 + [1] * 6, 2048)) > 2        # split
    alg = make_for_problem(name, prob)
    part = Participation("full")
    out = run(prob, alg, part, 2, [0, 1], eval_test=False)
    assert len(made) == 2 and all(len(chunks) > 2 for chunks in made)   # the engine's chunks
    for r, seed in enumerate((0, 1)):
        ref = run_reference(prob, alg, part, 2, seed)
        err = float((out.server["theta"][r] - ref.theta).norm() / ref.theta.norm())
        assert err <= 1e-10, (seed, err)
        np.testing.assert_allclose(out.metrics["train_loss"][r], ref.history["train_loss"],
                                   rtol=1e-10)
