"""FedAda2's StackOverflow problem and its CPU stand-in.

* :func:`stackoverflow_standin` -- the stand-in used when the TFF files are absent:
  multinomial logistic regression (``LogReg``, 784 -> 10) on full Fashion-MNIST split among
  400 clients by :func:`sims.data.natural.natural_like` (log-normal sizes, ``size_sigma = 1``;
  ``Dir(0.5)`` label mixes; at ``seed = 0``: sizes 15 .. 1139, median 90; on average 7.8 of
  the 10 classes per client, the largest holding 38% of a client's samples).
  What it keeps of the paper's task: a linear model trained by convex minimisation, 400
  clients of very unequal size and label mix, 10% participation, the same DP mechanism and
  round budget. What it loses: 10,000 sparse bag-of-words features and 500 co-occurring
  tags (multi-label sigmoid loss, d = 5,000,500); here 784 dense pixels, 10 exclusive
  classes (softmax), d = 7,850, so absolute accuracies and the DP noise-to-signal ratio
  (noise grows with sqrt(d)) are not the paper's.
* The real task's data: :func:`sims.data.stackoverflow.load_stackoverflow`; its model:
  :class:`sims.problems.multilabel.MultiLabelLinearProblem`.
* :func:`stackoverflow_problem` -- the real task when the files are there, else the stand-in,
  with a record of which ran and why (what the entries call).
"""
from __future__ import annotations

import numpy as np
import torch

from ..data import load_dataset
from ..data.natural import natural_like
from .models import LogReg
from .neural import NeuralProblem

#: The stand-in's partition parameters (documented in the module docstring).
STANDIN_PARTITION = {"size_sigma": 1.0, "alpha": 0.5, "min_size": 10}


def stackoverflow_standin(n_clients: int = 400, *, partition_seed: int = 0, data_dir=None,
                          batch_size: int = 32, local_epochs: int = 1,
                          local_steps: int | None = None, eval_train_samples: int | None = 10_000,
                          device="cpu", dtype=torch.float32, data=None,
                          partition_kw: dict | None = None) -> NeuralProblem:
    """Logistic regression on Fashion-MNIST over ``n_clients`` natural-like clients."""
    ds = data if data is not None else load_dataset("fmnist", data_dir)
    kw = {**STANDIN_PARTITION, **(partition_kw or {})}
    parts = natural_like(ds.y_train.numpy(), n_clients, seed=partition_seed, **kw)
    return NeuralProblem(ds, [np.asarray(p) for p in parts],
                         LogReg(int(np.prod(ds.x_train.shape[1:])), ds.num_classes),
                         batch_size=batch_size, local_epochs=local_epochs,
                         local_steps=local_steps, eval_train_samples=eval_train_samples,
                         device=device, dtype=dtype)


def stackoverflow_problem(*, data_dir=None, standin: bool | None = None, n_clients: int = 400,
                          client_seed: int = 0, loss: str = "sigmoid", batch_size: int = 32,
                          local_epochs: int = 1, local_steps: int | None = None,
                          eval_train_samples: int | None = 10_000, device="cpu",
                          dtype=torch.float32, standin_data=None, **load_kw):
    """``(problem, record)``: the real task from TFF's files in ``data_dir``
    (:class:`sims.problems.multilabel.MultiLabelLinearProblem` on
    :func:`sims.data.stackoverflow.load_stackoverflow`) or, when they are absent
    (``standin=None``) or on request (``standin=True``), :func:`stackoverflow_standin`.
    ``record["reason"]`` holds the one-line error that sent the run to the stand-in.
    The local epochs are not stated by the paper (spec 6.9): one by default."""
    from ..data import DataError
    from ..data.stackoverflow import load_stackoverflow
    from .multilabel import MultiLabelLinearProblem
    reason = None
    if standin is not True:
        try:
            data = load_stackoverflow(data_dir, n_clients=n_clients, seed=client_seed, **load_kw)
            prob = MultiLabelLinearProblem(data, loss=loss, batch_size=batch_size,
                                           local_epochs=local_epochs, local_steps=local_steps,
                                           eval_train_samples=eval_train_samples,
                                           device=device, dtype=dtype)
            return prob, {"task": "stackoverflow", "standin": False, "reason": None,
                          "source": data.source, "n_clients": prob.n_clients, "d": prob.d,
                          "loss": loss, "clients": f"{n_clients} users, seed {client_seed}"}
        except DataError as exc:
            if standin is False:
                raise
            reason = str(exc)
    prob = stackoverflow_standin(n_clients, partition_seed=client_seed, data_dir=data_dir,
                                 batch_size=batch_size, local_epochs=local_epochs,
                                 local_steps=local_steps, eval_train_samples=eval_train_samples,
                                 device=device, dtype=dtype, data=standin_data)
    return prob, {"task": "stackoverflow", "standin": True,
                  "reason": reason or "stand-in requested",
                  "source": "Fashion-MNIST logistic regression, natural-like partition "
                            f"{STANDIN_PARTITION}", "n_clients": prob.n_clients, "d": prob.d}
