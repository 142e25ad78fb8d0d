"""Frozen-backbone features, computed once and cached; the linear-head federated problem.

FedAda2 fine-tunes only a new linear head on a frozen ImageNet-21K ViT-S (spec 4.1, [CODE]
``fine_tune_mode=1``). Training a linear head on frozen features is exactly a linear model on
the features, so the images go through the backbone once (:func:`backbone_features`), the
features are cached on disk (:func:`cached_features`) and the federated problem is
multinomial logistic regression on them (:func:`linear_head_problem`, the project's
``LogReg`` through :class:`sims.problems.neural.NeuralProblem`, which takes the fused
linear-stack path). Local epochs, batches and the head's ``d = 385 C`` parameters are the
paper's; only the backbone's forward pass is hoisted out of the rounds.

Cache: one safetensors file per (backbone weights' sha256, dataset contents' sha256,
preprocessing), named by the hash of that key, written atomically (temporary file in the same
folder, then ``os.replace``) and read back only when its stored key matches in full.

CPU stand-in (:func:`random_features_dataset`): a fixed random ReLU feature map of the same
width (384) on the images, standardised, in place of the pretrained ViT. It keeps the
pipeline (frozen 384-number features, a linear head with ``385 C`` parameters, the same
partition, local work, rounds and hyperparameter handling); it loses what pretraining gives:
features in which the classes are nearly linearly separable, so accuracy levels, the speed
of convergence and how much adaptivity helps are not the paper's.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from ...data.base import NORMALIZATION, Dataset
from ..models import LogReg
from ..neural import NeuralProblem
from .vit import VIT_NORM, prepare_images


def tensor_sha256(*tensors: torch.Tensor) -> str:
    """Hash of the tensors' contents (dtype, shape and bytes)."""
    h = hashlib.sha256()
    for t in tensors:
        a = t.detach().cpu().contiguous().numpy()
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def cached_features(compute, key: dict, cache_dir) -> dict[str, torch.Tensor]:
    """``compute()`` -> dict of tensors, cached under ``cache_dir`` by ``key`` (a JSON-able
    dict naming everything the result depends on). ``cache_dir=None``: no cache."""
    from safetensors.torch import load_file, save_file
    if cache_dir is None:
        return compute()
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = _key_hash(key)
    path = cache_dir / f"features-{digest[:20]}.safetensors"
    if path.is_file():
        from safetensors import safe_open
        with safe_open(str(path), "pt") as f:
            stored = (f.metadata() or {}).get("key")
        if stored == json.dumps(key, sort_keys=True):
            return load_file(str(path))
    out = compute()
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".features-", suffix=".tmp")
    os.close(fd)
    try:
        save_file({k: v.contiguous() for k, v in out.items()}, tmp,
                  metadata={"key": json.dumps(key, sort_keys=True)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _pixels(x: torch.Tensor, name: str) -> torch.Tensor:
    """A :class:`Dataset`'s normalised images back on the [0, 1] pixel scale."""
    mean, std = NORMALIZATION.get(name, ((0.0,) * x.shape[1], (1.0,) * x.shape[1]))
    m = torch.tensor(mean, dtype=x.dtype).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(1, -1, 1, 1)
    return x * s + m


def backbone_features(backbone, images: torch.Tensor, dataset_name: str, *, device="cpu",
                      batch_size: int = 256, norm=VIT_NORM, dtype=torch.float32,
                      progress=None) -> torch.Tensor:
    """``[N, embed_dim]`` float32 features of a dataset's normalised images: back to pixels,
    then :func:`features_of_batches`."""
    return features_of_batches(
        backbone, len(images), lambda lo, hi: _pixels(images[lo:hi].float(), dataset_name),
        device=device, batch_size=batch_size, norm=norm, dtype=dtype, progress=progress)


def features_of_batches(backbone, n: int, pixels, *, device="cpu", batch_size: int = 256,
                        norm=VIT_NORM, dtype=torch.float32, progress=None) -> torch.Tensor:
    """``[n, embed_dim]`` float32 features; ``pixels(lo, hi)`` gives images ``lo..hi-1`` on the
    [0, 1] scale, ``[hi - lo, C, H, W]``; each batch goes through
    :func:`sims.problems.backbones.vit.prepare_images` (resize to 224, ViT normalisation) and the frozen
    backbone's ``forward_features`` (``dtype``: e.g. bfloat16 on a GPU)."""
    backbone = backbone.to(device=device, dtype=dtype).eval()
    out = []
    with torch.no_grad():
        for lo in range(0, n, batch_size):
            hi = min(lo + batch_size, n)
            x = prepare_images(pixels(lo, hi).to(device), backbone.img_size, norm).to(dtype)
            out.append(backbone.forward_features(x).float().cpu())
            if progress is not None:
                progress(hi, n)
    return torch.cat(out) if out else torch.zeros(0, backbone.embed_dim)


def as_feature_dataset(f_train: torch.Tensor, y_train: torch.Tensor, f_test: torch.Tensor,
                       y_test: torch.Tensor, num_classes: int, name: str, source: str,
                       of: Dataset | None = None) -> Dataset:
    """Features ``[N, D]`` as a :class:`Dataset` of ``[N, D, 1, 1]`` "images" (what
    ``LogReg`` flattens); ``of``: the dataset they were computed from, whose origin and
    files the run's record keeps (:mod:`sims.store.digest`)."""
    return Dataset(name, f_train.float().reshape(len(f_train), -1, 1, 1).contiguous(),
                   torch.as_tensor(y_train, dtype=torch.int64),
                   f_test.float().reshape(len(f_test), -1, 1, 1).contiguous(),
                   torch.as_tensor(y_test, dtype=torch.int64), num_classes, source,
                   origin=None if of is None else of.origin,
                   files=() if of is None else of.files)


def vit_feature_dataset(ds: Dataset, backbone, weights_sha256: str, *, cache_dir=None,
                        device="cpu", batch_size: int = 256, norm=VIT_NORM,
                        dtype=torch.float32, progress=None) -> Dataset:
    """The dataset's frozen ViT-S features (cached by weights' hash + dataset contents)."""
    key = {"kind": "vit_small_patch16_224", "weights_sha256": weights_sha256,
           "dataset": ds.name, "data_sha256": tensor_sha256(ds.x_train, ds.x_test),
           "norm": [list(norm[0]), list(norm[1])], "size": backbone.img_size,
           "dtype": str(dtype).replace("torch.", "")}

    def compute():
        kw = dict(device=device, batch_size=batch_size, norm=norm, dtype=dtype,
                  progress=progress)
        return {"train": backbone_features(backbone, ds.x_train, ds.name, **kw),
                "test": backbone_features(backbone, ds.x_test, ds.name, **kw)}
    f = cached_features(compute, key, cache_dir)
    return as_feature_dataset(f["train"], ds.y_train, f["test"], ds.y_test, ds.num_classes,
                              f"{ds.name}-vit-s16",
                              f"ViT-S/16 features (weights sha256 {weights_sha256[:12]}) of "
                              f"{ds.source}", of=ds)


@functools.lru_cache(maxsize=2)
def random_features_dataset(ds: Dataset, width: int = 384, seed: int = 0) -> Dataset:
    """CPU stand-in for the ViT features (module docstring): ``phi(x) = ReLU(W x + b)`` with
    ``W ~ N(0, 1/p)`` (``p`` input pixels), ``b ~ N(0, 1)`` fixed by ``seed``, then each
    feature standardised with the training set's mean and std. Memoised per dataset object
    (datasets compare by identity), so several runs in one process compute it once."""
    g = torch.Generator().manual_seed(seed)
    p = int(np.prod(ds.x_train.shape[1:]))
    w = torch.randn(p, width, generator=g) / p ** 0.5
    b = torch.randn(width, generator=g)

    def phi(x):
        return torch.relu(x.reshape(len(x), -1).float() @ w + b)
    f_tr, f_te = phi(ds.x_train), phi(ds.x_test)
    mu, sd = f_tr.mean(0), f_tr.std(0).clamp_min(1e-6)
    return as_feature_dataset((f_tr - mu) / sd, ds.y_train, (f_te - mu) / sd, ds.y_test,
                              ds.num_classes, f"{ds.name}-randfeat{width}",
                              f"random ReLU features (width {width}, seed {seed}) of {ds.source}",
                              of=ds)


def linear_head_problem(features: Dataset, parts, **kw) -> NeuralProblem:
    """The federated linear head: ``LogReg(D, C)`` on the features, clients ``parts``;
    ``kw`` go to :class:`NeuralProblem` (batch size, local epochs, device, dtype, ...)."""
    d = int(np.prod(features.x_train.shape[1:]))
    return NeuralProblem(features, [np.asarray(p) for p in parts],
                         LogReg(d, features.num_classes), **kw)
