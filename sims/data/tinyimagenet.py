"""TinyImageNet (FedLADA Table 2: 100k train / 10k test, 64x64, 200 classes) from the
standard ``tiny-imagenet-200/`` folder (what ``tiny-imagenet-200.zip`` unpacks to)::

    DIR/tiny-imagenet-200/wnids.txt                       one WordNet id per line (classes)
    DIR/tiny-imagenet-200/train/<wnid>/images/*.JPEG      500 training images per class
    DIR/tiny-imagenet-200/val/images/*.JPEG               10,000 validation images
    DIR/tiny-imagenet-200/val/val_annotations.txt         "file<TAB>wnid<TAB>x0 y0 x1 y1"

The labelled validation split serves as the test set (the ``test/`` folder has no labels), as
in FedLADA and FL-Simulator. Class ``k`` is the ``k``-th line of ``wnids.txt``. Images are
decoded with Pillow and converted to RGB (a few TinyImageNet images are greyscale); every
image must have the size of the first one. Normalisation: :data:`sims.data.base.NORMALIZATION`
(the training-set channel means and standard deviations). Every missing piece is a one-line
:class:`DataError` naming it, raised before any image is decoded.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .base import Dataset, normalize
from .errors import DataError
from .paths import ENV_VAR, resolve_data_dir

__all__ = ["load_tinyimagenet", "tinyimagenet_files", "TINYIMAGENET_DIR"]

TINYIMAGENET_DIR = "tiny-imagenet-200"
NAME = "tinyimagenet"


def _layout(root: Path) -> tuple[list[str], dict[str, list[Path]], list[tuple[Path, str]]]:
    """The class ids, the training files per class and the (file, wnid) validation pairs,
    checked for completeness (no decoding)."""
    wnids_file = root / "wnids.txt"
    if not wnids_file.is_file():
        raise DataError(f"{NAME}: {wnids_file} is missing (the list of class ids)")
    wnids = [w.strip() for w in wnids_file.read_text().splitlines() if w.strip()]
    if not wnids:
        raise DataError(f"{NAME}: {wnids_file} lists no class ids")
    if len(set(wnids)) != len(wnids):
        raise DataError(f"{NAME}: {wnids_file} lists a class id twice")
    train = {}
    for w in wnids:
        folder = root / "train" / w / "images"
        files = sorted(folder.glob("*.JPEG")) if folder.is_dir() else []
        if not files:
            raise DataError(f"{NAME}: no training images {folder}/*.JPEG for class {w}")
        train[w] = files
    ann = root / "val" / "val_annotations.txt"
    if not ann.is_file():
        raise DataError(f"{NAME}: {ann} is missing (the validation labels)")
    known, val = set(wnids), []
    for n, line in enumerate(ann.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise DataError(f"{NAME}: {ann} line {n}: expected 'file<TAB>wnid<TAB>box', got "
                            f"{line[:60]!r}")
        fname, w = fields[0].strip(), fields[1].strip()
        if w not in known:
            raise DataError(f"{NAME}: {ann} line {n}: class {w} is not in wnids.txt")
        path = root / "val" / "images" / fname
        if not path.is_file():
            raise DataError(f"{NAME}: validation image {path} (listed in {ann.name} line {n}) "
                            "is missing")
        val.append((path, w))
    if not val:
        raise DataError(f"{NAME}: {ann} lists no validation images")
    return wnids, train, val


def _decode(paths: list[Path], size: tuple[int, int] | None) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError
    out = None
    for j, p in enumerate(paths):
        try:
            with Image.open(p) as im:
                arr = np.asarray(im.convert("RGB"), dtype=np.uint8)
        except (OSError, UnidentifiedImageError) as exc:
            raise DataError(f"{NAME}: {p}: cannot decode ({type(exc).__name__})") from None
        if size is None:
            size = arr.shape[:2]
        if arr.shape[:2] != tuple(size):
            raise DataError(f"{NAME}: {p} is {arr.shape[1]}x{arr.shape[0]}, the others "
                            f"{size[1]}x{size[0]}")
        if out is None:
            out = np.empty((len(paths), 3, *size), dtype=np.uint8)
        out[j] = arr.transpose(2, 0, 1)
    return out


def tinyimagenet_files(base: Path | None) -> list[Path]:
    """Every file :func:`load_tinyimagenet` reads under the data directory ``base``."""
    if base is None or not (base / TINYIMAGENET_DIR).is_dir():
        raise DataError(f"{NAME}: not found")
    root = base / TINYIMAGENET_DIR
    wnids, train, val = _layout(root)
    return ([root / "wnids.txt", root / "val" / "val_annotations.txt"]
            + [p for w in wnids for p in train[w]] + [p for p, _ in val])


def load_tinyimagenet(data_dir: str | None = None) -> Dataset:
    """TinyImageNet from ``DIR/tiny-imagenet-200`` (module docstring)."""
    base = resolve_data_dir(data_dir)
    if base is None:
        raise DataError(f"{NAME}: no data directory set; unpack tiny-imagenet-200.zip so that "
                        f"DIR/{TINYIMAGENET_DIR}/ holds wnids.txt, train/ and val/, then pass "
                        f"--data-dir DIR or set {ENV_VAR}=DIR")
    root = base / TINYIMAGENET_DIR
    if not root.is_dir():
        raise DataError(f"{NAME}: {root} not found; unpack tiny-imagenet-200.zip into {base}")
    wnids, train, val = _layout(root)
    index = {w: k for k, w in enumerate(wnids)}
    train_paths = [p for w in wnids for p in train[w]]
    y_train = np.concatenate([np.full(len(train[w]), index[w]) for w in wnids])
    x_train = _decode(train_paths, None)
    x_test = _decode([p for p, _ in val], x_train.shape[2:])
    return Dataset(name=NAME, x_train=normalize(x_train, NAME),
                   y_train=torch.from_numpy(y_train.astype(np.int64)),
                   x_test=normalize(x_test, NAME),
                   y_test=torch.as_tensor([index[w] for _, w in val], dtype=torch.int64),
                   num_classes=len(wnids), source=str(root))
