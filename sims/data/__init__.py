"""Data layer: dataset loading (no downloads, no disk cache) and client partitioners.

>>> from sims.data import load_dataset, partition
>>> ds = load_dataset("fmnist")                                  # doctest: +SKIP
>>> parts = partition(ds.y_train, 200, "shards", seed=0)          # doctest: +SKIP

See :func:`describe_sources` for where each dataset is looked up.
"""

from .base import NORMALIZATION, Dataset
from .datasets import DATASETS, describe_sources, load_dataset
from .errors import DataError, PartitionError
from .idx import read_idx
from .partition import (
    class_counts,
    dirichlet,
    iid,
    label_shards,
    make_shards,
    partition,
    subset_of_clients,
    validate_partition,
)
from .paths import ENV_VAR, resolve_data_dir
from .standin import PAPER_MNIST, dataset_label, has_full_mnist, paper_dataset

__all__ = [
    "Dataset",
    "DataError",
    "PartitionError",
    "NORMALIZATION",
    "DATASETS",
    "ENV_VAR",
    "load_dataset",
    "resolve_data_dir",
    "describe_sources",
    "read_idx",
    "iid",
    "label_shards",
    "make_shards",
    "dirichlet",
    "partition",
    "subset_of_clients",
    "validate_partition",
    "class_counts",
    "PAPER_MNIST",
    "has_full_mnist",
    "paper_dataset",
    "dataset_label",
]
