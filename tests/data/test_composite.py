"""Composite many-class tasks (:mod:`sims.data.composite`): labels, seeded draws without
replacement, class counts, and the FedAda2 image stand-ins built on them
(:func:`sims.problems.finetune.composite_standin_features`)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sims.data import DataError
from sims.data.composite import (composite_indices, composite_labels, num_classes,
                                 tuple_features)

from conftest import random_dataset


def test_labels_are_mixed_radix():
    v = np.array([[3, 7], [0, 0], [9, 9]])
    assert composite_labels(v, (10, 10)).tolist() == [37, 0, 99]
    assert composite_labels(np.array([[1, 2, 1]]), (10, 10, 2)).tolist() == [1 * 20 + 2 * 2 + 1]
    assert num_classes((10, 10, 2)) == 200


def test_draw_is_seeded_balanced_and_without_replacement():
    y = np.repeat(np.arange(10), 30)                       # 30 images a base class
    idx, lab = composite_indices(y, (10, 10), 3, seed=5)
    again, lab2 = composite_indices(y, (10, 10), 3, seed=5)
    other, _ = composite_indices(y, (10, 10), 3, seed=6)
    assert np.array_equal(idx, again) and np.array_equal(lab, lab2)
    assert not np.array_equal(idx, other)
    assert idx.shape == (300, 2) and np.bincount(lab, minlength=100).tolist() == [3] * 100
    # each tuple's slots hold images of the label's digits; no image twice in a slot
    assert np.array_equal(10 * y[idx[:, 0]] + y[idx[:, 1]], lab)
    for j in range(2):
        assert len(np.unique(idx[:, j])) == len(idx)


def test_grouped_slot_and_too_small_pool():
    y = np.repeat(np.arange(10), 40)
    tops = [0, 1, 0, 0, 0, 1, 0, 1, 1, 1]
    idx, lab = composite_indices(y, (10, 10, 2), 1, seed=0, groups=[None, None, tops])
    assert lab.max() == 199 and np.bincount(lab).tolist() == [1] * 200
    assert np.array_equal(np.asarray(tops)[y[idx[:, 2]]], lab % 2)
    with pytest.raises(DataError, match="needs 40 images"):
        composite_indices(np.repeat(np.arange(10), 30), (10, 10), 4, seed=0)
    with pytest.raises(DataError, match="radix 2"):
        composite_indices(y, (10, 2), 1, seed=0, groups=[None, [0] * 10])


def test_tuple_features_concatenate_slots():
    f = torch.arange(12.0).reshape(4, 3)
    out = tuple_features(f, torch.tensor([[0, 3], [2, 1]]))
    assert out.tolist() == [[0, 1, 2, 9, 10, 11], [6, 7, 8, 3, 4, 5]]


def test_composite_standins_keep_the_tasks_client_structure(monkeypatch):
    """The stand-ins' construction on a small fixture (the real one: tests/data/test_gld.py)."""
    from sims.problems import finetune as ft
    small = {"cifar100": dict(ft.STANDIN_COMPOSITE["cifar100"], train_per_class=2,
                              test_per_class=1, n_clients=40),
             "gld23k": dict(ft.STANDIN_COMPOSITE["gld23k"], train_per_class=1,
                            test_per_class=1, n_clients=20, min_size=2)}
    monkeypatch.setattr(ft, "STANDIN_COMPOSITE", small)
    ds = random_dataset(900, 28, seed=3, n_test=900)
    prob, rec = ft.finetune_problem("cifar100", standin=True, standin_data=ds, local_steps=1)
    assert rec["kind"] == "composite" and rec["num_classes"] == 100
    assert prob.d == 385 * 100 and prob.n_clients == 40            # 192 + 192 features
    assert {len(p) for p in prob.parts} == {5}                     # 200 tuples / 40
    again, _ = ft.finetune_problem("cifar100", standin=True, standin_data=ds, local_steps=1)
    assert all(np.array_equal(a, b) for a, b in zip(prob.parts, again.parts))
    prob, rec = ft.finetune_problem("gld23k", standin=True, standin_data=ds, local_steps=1)
    assert rec["num_classes"] == 200 and prob.d == 385 * 200        # 3 x 128 features
    assert prob.n_clients == 20 and sum(len(p) for p in prob.parts) == 200
    old, rec = ft.finetune_problem("gld23k", standin=True, local_steps=1,
                                   standin_data=random_dataset(6100, 28, seed=3),
                                   standin_kind="fmnist")
    assert rec["kind"] == "fmnist" and old.d == 385 * 10
    with pytest.raises(ValueError, match="unknown image stand-in"):
        ft.finetune_problem("gld23k", standin=True, standin_data=ds, standin_kind="x")


def test_head_ceiling_fits_a_separable_head():
    from sims.problems.backbones.features import as_feature_dataset
    from sims.problems.finetune import head_ceiling
    g = torch.Generator().manual_seed(0)
    centers = 4 * torch.randn(5, 8, generator=g)
    y = torch.arange(200) % 5
    x = centers[y] + torch.randn(200, 8, generator=g)
    yt = torch.arange(100) % 5
    xt = centers[yt] + torch.randn(100, 8, generator=g)
    r = head_ceiling(as_feature_dataset(x, y, xt, yt, 5, "toy", "toy"), max_iter=50)
    assert r["train_acc"] > 0.97 and r["test_acc"] > 0.9
    shuffled = head_ceiling(as_feature_dataset(x, y, xt, yt[torch.randperm(100, generator=g)],
                                               5, "toy", "toy"), max_iter=50)
    assert shuffled["test_acc"] < 0.5
