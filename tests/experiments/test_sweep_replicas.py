"""Per-replica hyperparameters (sims.experiments.sweep.per_replica): grid points that differ in
numeric hyperparameters run as replicas of one batched engine run and equal separate runs in
float64 (relative 1e-10), for every registry algorithm, fused local-SGD paths included."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.experiments.sweep.per_replica import (MixedReplicaValues, PerReplica, ReplicaAlgorithm,
                                         batched_algorithm, numeric_hyperparameters)
from sims.algorithms.registry import (ALGORITHMS, AlgorithmError, hyperparameters,
                                      make_algorithm)
from sims.core.engine import run
from sims.problems.models import MLP
from sims.core.participation import Participation
from sims.problems.neural import NeuralProblem

from conftest import unequal_parts

REL = 1e-10
SEEDS = (3, 4, 3)            # replicas 0 and 2 share a seed (same data), not hyperparameters


def _try(name, settings) -> bool:
    try:
        for s in settings:
            make_algorithm(name, **s)
        return True
    except AlgorithmError:
        return False


def varied_settings(name: str, n: int = 3) -> list[dict]:
    """``n`` settings in which every numeric hyperparameter of ``name`` takes ``n`` distinct
    values, none equal to its default (so every replica keeps the same branch structure:
    0 becomes small positive values, 1 moves below 1)."""
    settings = [{} for _ in range(n)]
    defaults = hyperparameters(name)
    for key in sorted(numeric_hyperparameters(name)):
        v = defaults[key]
        v = 1e-4 if v is None else v
        options = ([[1e-3 * (r + 1) for r in range(n)]] if v == 0 else
                   [[v * (1 - 0.1 * (r + 1)) for r in range(n)],
                    [v * (1 + 0.1 * (r + 1)) for r in range(n)]])
        for vals in options:
            trial = [{**s, key: x} for s, x in zip(settings, vals)]
            if _try(name, trial):
                settings = trial
                break
        else:
            raise AssertionError(f"{name}: no valid distinct values for {key}")
    return settings


@pytest.fixture(scope="module")
def gram_problem(image_data):
    """The tiny MLP with the Gram fused path (several local steps per client)."""
    prob = NeuralProblem(image_data, unequal_parts(), MLP(784, hidden=4), batch_size=4,
                         dtype=torch.float64, gram_path=True)
    assert prob.gram_path
    return prob


def _assert_same(batched, separate, r, name):
    for metric, values in separate.metrics.items():
        if metric == "wall_time":
            continue
        got, ref = batched.metrics[metric][r], values[0]
        assert list(batched.rounds[metric]) == list(separate.rounds[metric])
        assert np.array_equal(np.isnan(got), np.isnan(ref)), (name, metric)
        ok = ~np.isnan(ref)
        scale = max(float(np.abs(ref[ok]).max(initial=0.0)), 1e-300)
        err = float(np.abs(got[ok] - ref[ok]).max(initial=0.0)) / scale
        assert err <= REL, f"{name} replica {r}: {metric} relative error {err:.3g}"
    a, b = batched.server["theta"][r], separate.server["theta"][0]
    assert torch.isfinite(b).all(), f"{name}: the separate run diverged; pick other values"
    err = float((a - b).norm() / b.norm())
    assert err <= REL, f"{name} replica {r}: final model relative error {err:.3g}"


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_per_replica_equals_separate_runs(name, mlp_problem):
    settings = varied_settings(name)
    assert numeric_hyperparameters(name), name
    if "n_clients" in hyperparameters(name):     # SCAFFOLD refuses to run without it
        settings = [{**s, "n_clients": mlp_problem.n_clients} for s in settings]
    alg = batched_algorithm(name, settings)
    assert isinstance(alg, ReplicaAlgorithm)
    part = Participation.parse("m=2")
    batched = run(mlp_problem, alg, part, 3, list(SEEDS), max_batch=2)
    for r, (s, seed) in enumerate(zip(settings, SEEDS)):
        separate = run(mlp_problem, make_algorithm(name, **s), part, 3, [seed], max_batch=2)
        _assert_same(batched, separate, r, name)
        assert fused(batched) == fused(separate), name       # the fused round kept


def fused(out) -> bool:
    """Whether a run took the fused local-SGD rounds (:mod:`sims.accel.sgd`)."""
    return any(k.endswith("sgd-round") for k in out.forms)


@pytest.mark.accel
@pytest.mark.parametrize("name", ["fed-sgd", "fed-ef-sgd"])
def test_per_replica_fused_gram_path(name, gram_problem):
    """The Gram fused kernel (several local steps of every client) with a rate per replica."""
    settings = [{"eta_l": v, "eta": e} for v, e in ((0.05, 1.0), (0.1, 0.5), (0.2, 2.0))]
    alg = batched_algorithm(name, settings)
    assert isinstance(alg.inner.eta_l, PerReplica)
    part = Participation.parse("m=3")
    batched = run(gram_problem, alg, part, 3, list(SEEDS))
    assert fused(batched)
    for r, (s, seed) in enumerate(zip(settings, SEEDS)):
        _assert_same(batched, run(gram_problem, make_algorithm(name, **s), part, 3, [seed]),
                     r, name)


def test_mixed_structure_reports_the_split(mlp_problem):
    """FedLADA's alpha = 1 keeps no g_a, alpha < 1 does: one batch cannot hold both, and the
    error says which replicas go together."""
    with pytest.raises(MixedReplicaValues) as exc:
        alg = batched_algorithm("fedlada", [{"alpha": 1.0}, {"alpha": 0.5}, {"alpha": 1.0}])
        run(mlp_problem, alg, Participation.parse("m=2"), 1, [0, 1, 2])
    assert exc.value.pattern.tolist() in ([True, False, True], [False, True, False])


def test_per_replica_value_semantics():
    p = PerReplica([0.1, 0.2])
    assert (1 - p).values == (0.9, 0.8) and (p * p).values == (0.1 * 0.1, 0.2 * 0.2)
    assert p > 0 and not p > 1 and bool(p)
    with pytest.raises(MixedReplicaValues):
        bool(p > 0.15)
    with pytest.raises(MixedReplicaValues):
        float(p)
    rows = p.rows(torch.tensor([1, 1, 0]), torch.zeros(1, dtype=torch.float64))
    assert rows.shape == (3, 1) and rows.reshape(-1).tolist() == [0.2, 0.2, 0.1]
    assert type(rows * torch.ones(3, 2)) is torch.Tensor       # results are plain tensors


def test_batched_algorithm_errors():
    with pytest.raises(AlgorithmError, match="compressor differs"):
        batched_algorithm("fed-ef-sgd", [{"compressor": "sign"}, {"compressor": "topk-0.1"}])
    with pytest.raises(AlgorithmError, match="eta must be positive"):
        batched_algorithm("fedadam", [{"eta": 0.1}, {"eta": 0.0}])
    with pytest.raises(AlgorithmError, match="delay differs"):
        batched_algorithm("fedada2", [{"delay": 1}, {"delay": 2}])
    same = batched_algorithm("fedavg", [{"eta_l": 0.1}, {"eta_l": 0.1}])
    assert not isinstance(same, ReplicaAlgorithm)


def test_per_replica_fused_conv_loop():
    """The convolutional per-client loop's fused local SGD with a rate per replica."""
    from sims.problems.models import make_model
    from sims.problems.conv import ConvProblem
    from test_fedef_images import _fixture, _parts
    prob = ConvProblem(_fixture(), _parts(), make_model("cnn", (1, 6, 6), 10, dropout=0.0),
                       loop=True, batch_size=4, dtype=torch.float64)
    settings = [{"eta_l": 0.05}, {"eta_l": 0.1}, {"eta_l": 0.02}]
    alg = batched_algorithm("fed-ef-sgd", settings)
    part = Participation.parse("m=2")
    batched = run(prob, alg, part, 2, list(SEEDS))
    for r, (s, seed) in enumerate(zip(settings, SEEDS)):
        _assert_same(batched, run(prob, make_algorithm("fed-ef-sgd", **s), part, 2, [seed]),
                     r, "conv loop")
