"""Many-class tasks composed from tuples of images of a small-class dataset.

A sample of a composite task is a tuple of ``k`` images ``(x_1, ..., x_k)`` of the base
dataset (Fashion-MNIST here, 10 classes) and its label the mixed-radix number of the images'
(grouped) labels: with ``radices = (r_1, ..., r_k)`` and ``groups[j]`` mapping a base label to
a value in ``0..r_j - 1``,

    ``label = sum_j g_j(y_j) prod_{l > j} r_l``,  so ``C = prod_j r_j`` classes.

``radices = (10, 10)`` with identity groups gives 100 classes (``label = 10 y_1 + y_2``);
``(10, 10, 2)`` with the third image's label grouped in two gives 200. The input of a
linear head is the images' fixed features concatenated (:func:`tuple_features`), so the head
scores class ``(c_1, .., c_k)`` with one weight block per slot: it can represent the
product of the per-slot posteriors (``logit = sum_j log p(c_j | x_j)``) and its ceiling is
about the product of the per-slot accuracies of a linear head on the same features.

:func:`composite_indices` draws the tuples: ``per_class`` tuples of every class, every slot's
images drawn *without replacement* from the images of its class value (each image used at
most once per slot and split), rows shuffled; a pure function of its arguments and ``seed``.
The training tuples come from the base training images, the test tuples from the base test
images only, so no test image is seen in training.
"""
from __future__ import annotations

import itertools

import numpy as np

from .errors import DataError

__all__ = ["composite_labels", "composite_indices", "tuple_features", "num_classes"]


def num_classes(radices) -> int:
    return int(np.prod([int(r) for r in radices]))


def _group_maps(radices, groups, base_classes: int) -> list[np.ndarray]:
    groups = list(groups) if groups is not None else [None] * len(radices)
    if len(groups) != len(radices):
        raise DataError(f"composite: {len(groups)} group maps for {len(radices)} slots")
    out = []
    for r, g in zip(radices, groups):
        m = np.arange(base_classes) if g is None else np.asarray(g, dtype=np.int64)
        if len(m) != base_classes or m.min() < 0 or m.max() >= r or len(np.unique(m)) != r:
            raise DataError(f"composite: a slot of radix {r} needs a map of the "
                            f"{base_classes} base labels onto 0..{r - 1}, got {list(m)}")
        out.append(m)
    return out


def composite_labels(slot_values, radices) -> np.ndarray:
    """``label = sum_j v_j prod_{l>j} r_l`` for slot values ``[N, k]`` (module docstring)."""
    v = np.asarray(slot_values, dtype=np.int64)
    label = np.zeros(len(v), dtype=np.int64)
    for j, r in enumerate(radices):
        label = label * int(r) + v[:, j]
    return label


def composite_indices(base_labels, radices, per_class: int, *, seed: int, groups=None,
                      base_classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """``(idx [N, k], labels [N])``: ``per_class`` tuples of each of the ``prod(radices)``
    classes, slot ``j`` holding indices into ``base_labels`` whose grouped label is the
    class's ``j``-th digit, drawn without replacement (:class:`DataError` when a slot's pool
    is too small), rows in a seeded random order."""
    y = np.asarray(base_labels, dtype=np.int64)
    radices = tuple(int(r) for r in radices)
    if not radices or min(radices) < 1 or per_class < 1:
        raise DataError(f"composite: radices {radices} and per_class {per_class} must be >= 1")
    maps = _group_maps(radices, groups, base_classes)
    rng = np.random.default_rng(seed)
    digits = np.array(list(itertools.product(*[range(r) for r in radices])), dtype=np.int64)
    rows = np.repeat(digits, per_class, axis=0)                 # [C * per_class, k]
    idx = np.empty_like(rows)
    for j, m in enumerate(maps):
        value_of = m[y]
        for v in range(radices[j]):
            need = np.flatnonzero(rows[:, j] == v)
            pool = np.flatnonzero(value_of == v)
            if len(pool) < len(need):
                raise DataError(f"composite: slot {j} value {v} needs {len(need)} images, the "
                                f"base data has {len(pool)}")
            idx[need, j] = rng.permutation(pool)[: len(need)]
    order = rng.permutation(len(rows))
    return idx[order], composite_labels(rows[order], radices)


def tuple_features(features, idx):
    """The features of each tuple: the slots' rows of ``features`` ``[n, D]`` concatenated,
    ``[N, k D]`` (torch or numpy, as given)."""
    k = idx.shape[1]
    parts = [features[idx[:, j]] for j in range(k)]
    try:
        import torch
        if isinstance(features, torch.Tensor):
            return torch.cat(parts, dim=1)
    except ImportError:                                          # pragma: no cover
        pass
    return np.concatenate(parts, axis=1)
