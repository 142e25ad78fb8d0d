"""Build the papers' image problems by name: dataset + partition + model.

:func:`build_image_problem` is the one builder every entry goes through (directly or via
:func:`reproduce.common.cached_problem`). Fully connected models (``logreg``, ``mlp``) give a
:class:`sims.problems.neural.NeuralProblem`; convolutional ones (:data:`CONV_MODELS`: the
Fed-EF ``cnn`` and the CIFAR ``resnet18``) a :class:`sims.problems.conv.ConvProblem` (per-client
loop on the CPU, optional CIFAR augmentation), built for the dataset's image shape
``in_shape = (C, H, W)``.
"""
from __future__ import annotations

import numpy as np
import torch

from ..data import load_dataset, partition, subset_of_clients
from .models import make_model
from .conv import ConvProblem, stratified_test_subset
from .neural import NeuralProblem

#: Models built as :class:`sims.problems.conv.ConvProblem` (see :func:`build_image_problem`);
#: ``mnist-cnn``, ``cifar-cnn``, ``resnet9``: Fed-LAMB's nets (spec 3.2, :mod:`sims.problems.models`).
CONV_MODELS = ("cnn", "resnet18", "mnist-cnn", "cifar-cnn", "resnet9")


def make_net(model: str, in_shape: tuple, num_classes: int, model_kw: dict | None = None):
    """``make_model`` for inputs of shape ``in_shape = (C, H, W)``. A convolutional model gets
    the shape itself: the CNN its channels and side (through ``make_model``), ResNet-18 its
    channel count (``in_channels``) instead of guessing it from the flattened size."""
    kw = dict(model_kw or {})
    in_shape = tuple(int(s) for s in in_shape)
    if model in ("resnet18", "resnet9"):
        kw.setdefault("in_channels", in_shape[0])
    return make_model(model, in_shape, num_classes, **kw)


def build_image_problem(dataset: str = "mnist", model: str = "mlp", n_clients: int = 200, *,
                        scheme: str = "shards", partition_seed: int = 0, data_dir=None,
                        subset_of: int | None = None, batch_size: int = 32,
                        local_epochs: int = 1, local_steps: int | None = None,
                        eval_train_samples: int | None = None, device="cpu",
                        dtype=torch.float32, model_kw: dict | None = None,
                        partition_kw: dict | None = None, data=None,
                        test_samples: int | None = None, conv: bool | None = None,
                        loop: bool | None = None, augment: str | None = None,
                        pad: int = 4, eval_grad: bool = True,
                        init_seed: int | None = None) -> NeuralProblem:
    """An image-classification federated problem.

    ``scheme`` is a :func:`sims.data.partition` scheme (``"shards"``: Fed-EF's two
    single-class shards per client; ``"iid"``; ``"dirichlet"``). The partition is fixed by
    ``partition_seed`` and shared by every seed of a run (seeds vary the initialisation,
    unless ``init_seed``, the client sampling and the minibatches). ``subset_of=N`` partitions the data among ``N``
    clients and keeps ``n_clients`` of them (Fed-EF Fig. 8's "subset_of_200" reading; the
    Fed-EF CNN entries' CPU populations). ``data`` passes an already-loaded
    :class:`sims.data.Dataset`; ``test_samples`` cuts its test set to a fixed stratified
    subset (a CPU economy).

    ``conv`` (default: whether ``model`` is one of :data:`CONV_MODELS`) returns a
    :class:`sims.problems.conv.ConvProblem`, with its options ``loop`` (per-client loop;
    default on the CPU), ``augment`` (``"crop-flip"``: the CIFAR training augmentation;
    ``"crop"``: the random crop alone; ``pad`` pixels of padding) and
    ``eval_grad`` (``False``: evaluation skips the squared full-gradient norm, the costly
    part for a CNN).

    ``init_seed`` (default None: each seed draws its own initial weights) draws the initial
    weights from this one seed for every seed of a run (:meth:`NeuralProblem.seed_of_init`):
    one shared initialisation across seeds and methods, as Fed-LAMB's experiments. A problem
    description that sets it carries it into every sweep cell's fingerprint and provenance.
    """
    from ..core.device import check_device
    check_device(device, "device")     # cuda without a GPU: one line, before any work
    ds = data if data is not None else load_dataset(dataset, data_dir)
    ds = stratified_test_subset(ds, test_samples)
    labels = ds.y_train.numpy()
    total = subset_of or n_clients
    parts = partition(labels, total, scheme, partition_seed, **(partition_kw or {}))
    if subset_of:
        parts = subset_of_clients(parts, n_clients, partition_seed)
    in_shape = tuple(ds.x_train.shape[1:])
    net = make_net(model, in_shape, ds.num_classes, model_kw)
    parts = [np.asarray(p) for p in parts]
    kw = {"batch_size": batch_size, "local_epochs": local_epochs, "local_steps": local_steps,
          "eval_train_samples": eval_train_samples, "device": device, "dtype": dtype,
          "init_seed": init_seed}
    if conv is None:
        conv = model in CONV_MODELS
    if conv:
        return ConvProblem(ds, parts, net, loop=loop, augment=augment, pad=pad,
                           eval_grad=eval_grad, **kw)
    if augment or loop or not eval_grad:
        raise ValueError("augment, loop and eval_grad=False need a convolutional problem "
                         f"(conv=True or a model in {CONV_MODELS}), not {model!r}")
    return NeuralProblem(ds, parts, net, **kw)


def build_conv_problem(dataset: str = "fmnist", model: str = "cnn", n_clients: int = 200,
                       **kw) -> ConvProblem:
    """:func:`sims.problems.image.build_image_problem` with ``conv=True`` (the one builder;
    kept under this name for callers of the convolutional options).

    ``subset_of=N`` partitions the training data among ``N`` clients (two single-class shards
    each) and keeps ``n_clients`` of them, so a small CPU population has the paper's client
    structure (Fed-EF, ``N = 200``: 300 samples and 10 local steps per client).
    """
    return build_image_problem(dataset, model, n_clients, conv=True, **kw)
