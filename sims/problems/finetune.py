"""FedAda2's image tasks as linear heads on frozen ViT-S/16 features, or their CPU stand-ins.

:func:`finetune_problem` (``"cifar100"`` or ``"gld23k"``) returns the federated problem and a
record of what it is:

* **CIFAR-100** (Table 1): 50,000 training images in 1,000 clients by LDA with
  ``alpha = 0.001`` (:data:`CIFAR100_LDA`): :func:`sims.data.partition.dirichlet`'s
  ``per_client`` variant, each client drawing its class mix ``q_i ~ Dir(alpha 1_100)`` and
  filling 50 slots from it, which is what the authors' Flower ``create_lda_partitions``
  (concentration 0.001, equal sizes, a client's draw renormalised over the classes left)
  does. At ``alpha = 0.001`` each client's mix is one class, but about 10 clients choose each
  class and a class chosen by more than 10 runs out, so clients spill over: measured at
  ``seed = 0``, classes per client 1: 7%, 2: 25%, 3: 32%, 4: 20%, 5-8: 16%; the main class
  holds a median 86% of a client's 50 images. Features of the frozen ViT-S/16 from
  ``DIR/cifar-100-python``.
* **GLD-23K** (Table 1): the 233 natural clients of the split files
  (:func:`sims.data.gld.load_gld23k`), images read and embedded in batches.

Features come from :func:`sims.problems.backbones.load_vit_backbone` (a local safetensors file) and are
cached (``cache_dir``). When the weights or the data are absent (or ``standin=True``) the
task runs on its stand-in: the same linear-head pipeline on
:func:`sims.problems.backbones.random_features_dataset` of Fashion-MNIST, with the task's client
structure: CIFAR-100's 1,000 LDA(0.001) clients (60 images each), GLD-23K's 233 clients with
:func:`sims.data.natural.natural_like` sizes and label mixes on 23,080 of the images
(:data:`STANDIN`). The record's ``standin`` and ``reason`` say which ran and why.
"""
from __future__ import annotations

import numpy as np
import torch

from .backbones.features import (as_feature_dataset, cached_features, features_of_batches,
                                  linear_head_problem, random_features_dataset,
                                  vit_feature_dataset)
from .backbones.vit import VIT_NORM
from ..data import DataError, load_dataset
from ..data.natural import natural_like
from ..data.partition import dirichlet
from .neural import NeuralProblem

CIFAR100_LDA = {"n_clients": 1000, "alpha": 0.001, "variant": "per_client"}
GLD23K_CLIENTS = 233
#: the stand-ins' client structures (module docstring)
STANDIN = {"cifar100": {"partition": "dirichlet", **CIFAR100_LDA},
           "gld23k": {"partition": "natural_like", "n_clients": GLD23K_CLIENTS,
                      "fraction": 23_080 / 60_000, "size_sigma": 1.0, "alpha": 0.5,
                      "min_size": 10},
           "features": {"width": 384, "seed": 0}}
TASKS = ("cifar100", "gld23k")


def cifar100_parts(labels, seed: int = 0, n_clients: int = 1000, alpha: float = 0.001):
    """CIFAR-100's LDA split (module docstring)."""
    return dirichlet(np.asarray(labels), n_clients, alpha, seed, variant="per_client")


def gld23k_feature_dataset(data, backbone, weights_sha256: str, *, cache_dir=None,
                           device="cpu", batch_size: int = 128, dtype=torch.float32,
                           norm=VIT_NORM, progress=None):
    """GLD-23K's frozen ViT-S features (images decoded in batches), cached by the weights'
    hash and the split's identity (:meth:`sims.data.gld.GLD23K.identity`)."""
    key = {"kind": "vit_small_patch16_224", "weights_sha256": weights_sha256,
           "dataset": "gld23k", "data": data.identity(), "size": backbone.img_size,
           "norm": [list(norm[0]), list(norm[1])], "dtype": str(dtype).replace("torch.", "")}
    size = backbone.img_size

    def compute():
        kw = dict(device=device, batch_size=batch_size, norm=norm, dtype=dtype,
                  progress=progress)
        return {split: features_of_batches(backbone, len(paths),
                                           lambda lo, hi, p=paths: data.read(p[lo:hi], size), **kw)
                for split, paths in (("train", data.train_paths), ("test", data.test_paths))}
    f = cached_features(compute, key, cache_dir)
    return as_feature_dataset(f["train"], torch.from_numpy(data.y_train), f["test"],
                              torch.from_numpy(data.y_test), data.num_classes, "gld23k-vit-s16",
                              f"ViT-S/16 features (weights sha256 {weights_sha256[:12]}) of "
                              f"{data.source}")


def _real(task, data_dir, weights, cache_dir, device, feature_dtype, partition_seed):
    from .backbones.weights import load_vit_backbone
    if task == "gld23k":
        from ..data.gld import load_gld23k
        data = load_gld23k(data_dir)                 # data first: its error is the likelier
        backbone, sha = load_vit_backbone(weights, data_dir)
        feats = gld23k_feature_dataset(data, backbone, sha, cache_dir=cache_dir,
                                       device=device, dtype=feature_dtype)
        return feats, data.parts, {"partition": "natural (user_id)", "n_clients": data.n_clients}
    ds = load_dataset("cifar100", data_dir)
    backbone, sha = load_vit_backbone(weights, data_dir)
    feats = vit_feature_dataset(ds, backbone, sha, cache_dir=cache_dir, device=device,
                                dtype=feature_dtype)
    return feats, cifar100_parts(ds.y_train.numpy(), partition_seed), \
        {"partition": "dirichlet per_client", **CIFAR100_LDA}


def _standin(task, data_dir, partition_seed, data=None):
    ds = data if data is not None else load_dataset("fmnist", data_dir)
    feats = random_features_dataset(ds, **STANDIN["features"])
    spec = {k: v for k, v in STANDIN[task].items() if k != "partition"}
    labels = ds.y_train.numpy()
    if task == "cifar100":
        parts = cifar100_parts(labels, partition_seed, spec["n_clients"], spec["alpha"])
    else:
        parts = natural_like(labels, seed=partition_seed, **spec)
    return feats, parts, {**STANDIN[task], "features": dict(STANDIN["features"])}


def finetune_problem(task: str, *, data_dir=None, weights=None, cache_dir=None, device="cpu",
                     feature_dtype=torch.float32, standin: bool | None = None,
                     partition_seed: int = 0, batch_size: int = 32, local_epochs: int = 5,
                     standin_data=None, **problem_kw):
    """``(problem, record)`` for ``task`` (module docstring). ``standin=None`` uses the real
    task when its data and weights load and the stand-in otherwise (``record["reason"]``
    holds the one-line error); ``False`` insists on the real task (its error propagates).
    ``problem_kw`` go to :class:`sims.problems.neural.NeuralProblem` (``local_steps``,
    ``eval_train_samples``, ``dtype``, ...); 5 local epochs of batch 32 by default (App. H.2).
    ``standin_data``: an already loaded Fashion-MNIST :class:`sims.data.Dataset` for the
    stand-in (loaded from ``data_dir`` / the Debian package otherwise)."""
    if task not in TASKS:
        raise ValueError(f"unknown fine-tuning task {task!r}; choose one of {', '.join(TASKS)}")
    reason = None
    if standin is not True:
        try:
            feats, parts, part = _real(task, data_dir, weights, cache_dir, device,
                                       feature_dtype, partition_seed)
        except DataError as exc:
            if standin is False:
                raise
            reason = str(exc)
    if standin is True or reason is not None:
        feats, parts, part = _standin(task, data_dir, partition_seed, standin_data)
    prob = linear_head_problem(feats, parts, batch_size=batch_size, local_epochs=local_epochs,
                               **problem_kw)
    record = {"task": task, "standin": reason is not None or standin is True,
              "reason": reason or ("stand-in requested" if standin is True else None),
              "features": feats.source, "num_classes": feats.num_classes,
              "n_clients": prob.n_clients, "d": prob.d, "partition": part}
    return prob, record


class PretrainedNeuralProblem(NeuralProblem):
    """A :class:`NeuralProblem` whose model starts from pretrained weights: ``init_theta(seed)``
    keeps every pretrained parameter and draws only the new head (``model.head``) from the
    seed (``NeuralProblem`` would re-initialise the whole net)."""

    def __init__(self, dataset, parts, model, **kw):
        super().__init__(dataset, parts, model, **kw)
        self._pretrained = self.layout.flatten_module(self.model).to(self.device, self.dtype)

    def init_theta(self, seed: int) -> torch.Tensor:
        torch.manual_seed(self.seed_of_init(seed))
        self.layout.load_into(self.model, self._pretrained)
        self.model.head.reset_parameters()
        return self.layout.flatten_module(self.model).to(self.device, self.dtype)


def full_finetune_problem(ds, parts, backbone, **kw) -> PretrainedNeuralProblem:
    """FedAda2's full fine-tuning (Fig. 4 bottom; Tables 4-5 "GLD-23K (Full)"): the whole
    ViT-S (pretrained ``backbone``) and a new linear head trained together on images ``ds``
    (resized to 224 inside the model, :class:`sims.problems.backbones.vit.ViTClassifier`). Every client
    step differentiates the 21.7M-parameter network per participant: a GPU workload (keep the
    engine's ``max_batch`` small). ``kw`` go to :class:`NeuralProblem`."""
    from .backbones.vit import ViTClassifier
    from ..data.base import NORMALIZATION
    denorm = NORMALIZATION.get(ds.name, ((0.0,) * ds.x_train.shape[1], (1.0,) * ds.x_train.shape[1]))
    model = ViTClassifier(backbone, ds.num_classes, denorm)
    return PretrainedNeuralProblem(ds, [np.asarray(p) for p in parts], model, **kw)
