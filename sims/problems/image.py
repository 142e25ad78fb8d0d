"""Build the papers' image problems by name: dataset + partition + model."""
from __future__ import annotations

import numpy as np
import torch

from ..data import load_dataset, partition, subset_of_clients
from ..models import make_model
from .neural import NeuralProblem


def build_image_problem(dataset: str = "mnist", model: str = "mlp", n_clients: int = 200, *,
                        scheme: str = "shards", partition_seed: int = 0, data_dir=None,
                        subset_of: int | None = None, batch_size: int = 32,
                        local_epochs: int = 1, local_steps: int | None = None,
                        eval_train_samples: int | None = None, device="cpu",
                        dtype=torch.float32, model_kw: dict | None = None,
                        partition_kw: dict | None = None, data=None) -> NeuralProblem:
    """An image-classification federated problem.

    ``scheme`` is a :func:`sims.data.partition` scheme (``"shards"``: Fed-EF's two
    single-class shards per client; ``"iid"``; ``"dirichlet"``). The partition is fixed by
    ``partition_seed`` and shared by every seed of a run (seeds vary the initialisation, the
    client sampling and the minibatches). ``subset_of=N`` partitions the data among ``N``
    clients and keeps ``n_clients`` of them (Fed-EF Fig. 8's "subset_of_200" reading).
    ``data`` passes an already-loaded :class:`sims.data.Dataset`.
    """
    ds = data if data is not None else load_dataset(dataset, data_dir)
    labels = ds.y_train.numpy()
    total = subset_of or n_clients
    parts = partition(labels, total, scheme, partition_seed, **(partition_kw or {}))
    if subset_of:
        parts = subset_of_clients(parts, n_clients, partition_seed)
    net = make_model(model, tuple(ds.x_train.shape[1:]), ds.num_classes, **(model_kw or {}))
    return NeuralProblem(ds, [np.asarray(p) for p in parts], net, batch_size=batch_size,
                         local_epochs=local_epochs, local_steps=local_steps,
                         eval_train_samples=eval_train_samples, device=device, dtype=dtype)
