"""CIFAR-10 / CIFAR-100 loaders for the standard "python version" pickles.

Expected layout (``DIR`` = ``--data-dir`` or ``$FEDTOOLKIT_DATA``; the same
folders torchvision uses, and what ``cifar-10-python.tar.gz`` /
``cifar-100-python.tar.gz`` unpack to):

* ``DIR/cifar-10-batches-py/``: ``data_batch_1`` .. ``data_batch_5``,
  ``test_batch``, ``batches.meta``.
* ``DIR/cifar-100-python/``: ``train``, ``test``, ``meta``.

Each batch is a pickled dict with ``data`` (uint8 ``[N, 3072]``: 1024 red,
1024 green, 1024 blue values, row-major 32x32) and ``labels`` (CIFAR-10) or
``fine_labels`` (CIFAR-100; the 100 fine classes are used).  The original
files are Python 2 pickles, so keys may be bytes or str.

The pickles are read with a restricted unpickler that only resolves the few
numpy / codecs callables a CIFAR batch needs, so a tampered file cannot run
code.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
import torch

from .base import Dataset, normalize
from .errors import DataError
from .paths import ENV_VAR, find_file_set, resolve_data_dir

__all__ = ["load_cifar10", "load_cifar100", "CIFAR10_FILES", "CIFAR100_FILES", "read_cifar_pickle"]

CIFAR10_DIR = "cifar-10-batches-py"
CIFAR100_DIR = "cifar-100-python"
CIFAR10_FILES = {**{f"train{i}": f"data_batch_{i}" for i in range(1, 6)}, "test": "test_batch", "meta": "batches.meta"}
CIFAR100_FILES = {"train": "train", "test": "test", "meta": "meta"}


def _allowed_globals() -> dict[tuple[str, str], object]:
    import codecs

    reconstruct = np.ndarray.__reduce__(np.zeros(0))[0]  # numpy's own _reconstruct, whatever module it lives in
    allowed: dict[tuple[str, str], object] = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    allowed[("_codecs", "encode")] = codecs.encode
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(mod, "_reconstruct")] = reconstruct
    return allowed


class _CifarUnpickler(pickle.Unpickler):
    _allowed = _allowed_globals()

    def find_class(self, module: str, name: str):  # noqa: D401
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}") from None


def read_cifar_pickle(path: Path) -> dict[str, object]:
    """Load one CIFAR pickle; keys are returned as ``str``."""
    try:
        raw = path.read_bytes()
        obj = _CifarUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except Exception as exc:  # any unpickling failure is a corrupt file
        raise DataError(f"{path}: not a valid CIFAR python pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: not a valid CIFAR python pickle (top level is {type(obj).__name__}, not dict)")
    return {k.decode("latin1") if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def _batch(path: Path, label_key: str, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    d = read_cifar_pickle(path)
    if "data" not in d or label_key not in d:
        raise DataError(f"{path}: CIFAR batch lacks the '{'data' if 'data' not in d else label_key}' entry")
    try:
        x = np.asarray(d["data"], dtype=np.uint8)
        y = np.asarray(d[label_key], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: malformed CIFAR batch ({exc})") from None
    if x.ndim != 2 or x.shape[1] != 3072:
        raise DataError(f"{path}: 'data' must be uint8 [N, 3072], got shape {x.shape}")
    if y.shape != (len(x),):
        raise DataError(f"{path}: {len(x)} images but '{label_key}' has shape {y.shape}")
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise DataError(f"{path}: label outside 0..{num_classes - 1}")
    return x.reshape(-1, 3, 32, 32), y


def _check_meta(path: Path, key: str, num_classes: int) -> None:
    names = read_cifar_pickle(path).get(key)
    if names is None or len(names) != num_classes:
        got = "missing" if names is None else f"{len(names)} entries"
        raise DataError(f"{path}: '{key}' should list {num_classes} class names ({got})")


def _load(name: str, data_dir: str | None, folder: str, files: dict[str, str], label_key: str,
          meta_key: str, num_classes: int, archive: str) -> Dataset:
    root = resolve_data_dir(data_dir)
    found = find_file_set([root / folder] if root else [], files, name)
    if found is None:
        where = f"{root / folder} not found" if root else "no data directory set"
        raise DataError(
            f"{name}: {where}; unpack {archive} so that DIR/{folder}/ holds {', '.join(files.values())}, "
            f"then pass --data-dir DIR or set {ENV_VAR}=DIR"
        )
    f = found.files
    _check_meta(f["meta"], meta_key, num_classes)
    train = [_batch(f[k], label_key, num_classes) for k in files if k.startswith("train")]
    x_te, y_te = _batch(f["test"], label_key, num_classes)
    return Dataset(
        name=name,
        x_train=normalize(np.concatenate([b[0] for b in train]), name),
        y_train=torch.from_numpy(np.concatenate([b[1] for b in train])),
        x_test=normalize(x_te, name),
        y_test=torch.from_numpy(y_te),
        num_classes=num_classes,
        source=str(found.directory),
    )


def load_cifar10(data_dir: str | None = None) -> Dataset:
    """CIFAR-10 from ``DIR/cifar-10-batches-py``."""
    return _load("cifar10", data_dir, CIFAR10_DIR, CIFAR10_FILES, "labels", "label_names", 10,
                 "cifar-10-python.tar.gz")


def load_cifar100(data_dir: str | None = None) -> Dataset:
    """CIFAR-100 (fine labels) from ``DIR/cifar-100-python``."""
    return _load("cifar100", data_dir, CIFAR100_DIR, CIFAR100_FILES, "fine_labels", "fine_label_names", 100,
                 "cifar-100-python.tar.gz")
