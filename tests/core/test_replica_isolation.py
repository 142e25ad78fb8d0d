"""Replicas never mix: a replica whose model holds NaN or inf (a diverged grid point, a
poisoned seed) leaves every other replica of the same batched run bit for bit as it is when
that replica is healthy, for every registry algorithm, with replicas that are seeds and with
replicas that are grid points (per-replica hyperparameters)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sims.experiments.sweep.per_replica import batched_algorithm
from sims.algorithms.registry import ALGORITHMS, hyperparameters, make_algorithm
from sims.core.engine import run
from sims.core.participation import Participation

from test_sweep_replicas import varied_settings

SEEDS = [3, 4, 5]
BAD = 1                    # the replica that is poisoned


class _Poisoned:
    """``problem`` whose initial model for ``seed`` is filled with ``value``."""

    def __init__(self, problem, seed: int, value: float):
        self._problem, self._seed, self._value = problem, seed, value

    def init_theta(self, seed):
        theta = self._problem.init_theta(seed)
        return torch.full_like(theta, self._value) if seed == self._seed else theta

    def __getattr__(self, name):
        return getattr(self._problem, name)


class _PoisonedRow:
    """``problem`` whose initial model of the replica at position ``row`` among the seeds
    (``init_theta`` is called once per replica, in order) is filled with ``value``."""

    def __init__(self, problem, row: int, value: float):
        self._problem, self._row, self._value, self._calls = problem, row, value, 0

    def init_theta(self, seed):
        theta = self._problem.init_theta(seed)
        hit, self._calls = self._calls == self._row, self._calls + 1
        return torch.full_like(theta, self._value) if hit else theta

    def __getattr__(self, name):
        return getattr(self._problem, name)


def _assert_replica_equal(got, ref, r: int, name: str) -> None:
    for metric, values in ref.metrics.items():
        if metric == "wall_time":
            continue
        assert np.array_equal(got.metrics[metric][r], values[r], equal_nan=True), \
            f"{name}: replica {r}'s {metric} changed when replica {BAD} was poisoned"
    assert torch.equal(got.server["theta"][r], ref.server["theta"][r]), name
    for key, state in ref.client_state.items():
        assert torch.equal(got.client_state[key][r], state[r]), (name, key)
    assert got.diverged_at[r] == ref.diverged_at[r]


def _with_population(name, settings, problem):
    if "n_clients" in hyperparameters(name):
        return [{**s, "n_clients": problem.n_clients} for s in settings]
    return settings


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_poisoned_seed_leaves_other_seeds_unchanged(name, value, mlp_problem):
    part = Participation.parse("m=2")
    alg = make_algorithm(name, **_with_population(name, [{}], mlp_problem)[0])
    healthy = run(mlp_problem, alg, part, 3, SEEDS, max_batch=4)
    alg = make_algorithm(name, **_with_population(name, [{}], mlp_problem)[0])
    poisoned = run(_Poisoned(mlp_problem, SEEDS[BAD], value), alg, part, 3, SEEDS,
                   max_batch=4)
    assert poisoned.diverged_at[BAD] is not None, f"{name}: the poisoned seed did not diverge"
    for r in range(len(SEEDS)):
        if r != BAD:
            _assert_replica_equal(poisoned, healthy, r, name)


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_poisoned_grid_point_leaves_other_points_unchanged(name, value, mlp_problem):
    settings = _with_population(name, varied_settings(name), mlp_problem)
    part = Participation.parse("m=2")
    seeds = [7, 7, 7]                       # grid points share the seed, as in a sweep
    healthy = run(mlp_problem, batched_algorithm(name, settings), part, 3, seeds)
    poisoned = run(_PoisonedRow(mlp_problem, BAD, value), batched_algorithm(name, settings),
                   part, 3, seeds)
    assert poisoned.diverged_at[BAD] is not None
    for r in range(len(seeds)):
        if r != BAD:
            _assert_replica_equal(poisoned, healthy, r, name)
