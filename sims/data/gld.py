"""GLD-23K: the federated Google Landmarks v2 subset of TFF (``gldv2.load_data(gld23k=True)``;
FedAda2 Table 1: 233 natural clients, 203 classes, 23,080 training images).

Expected in ``DIR/gld23k/`` (``DIR`` = ``--data-dir`` / ``$FEDTOOLKIT_DATA``):

* ``mini_gld_train_split.csv``: columns ``user_id,image_id,class`` (one row per training
  image; a user is a client: the natural split);
* ``mini_gld_test.csv``: columns ``image_id,class`` (``user_id`` may be present, unused:
  the test images are pooled);
* ``images/``: the GLDv2 JPEGs, either as GLDv2's train archive unpacks them,
  ``images/<a>/<b>/<c>/<image_id>.jpg`` with ``a, b, c`` the id's first three characters,
  or flat, ``images/<image_id>.jpg``.

Labels: the ``class`` values of the training CSV, sorted, numbered 0..C-1 (C = 203 for
GLD-23K); a test class absent from training is an error. Clients: one per ``user_id`` in
sorted order, its images in CSV order. Images are read on demand (23,080 images at 224 x 224
do not belong in memory): :meth:`GLD23K.read` decodes, converts to RGB and resizes one batch
(bilinear, straight to ``size x size`` as the authors' ``image.resize((224, 224))``), giving
pixels on the [0, 1] scale for :func:`sims.problems.backbones.vit.prepare_images`.
"""
from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataError
from .paths import ENV_VAR, resolve_data_dir

__all__ = ["GLD_DIR", "GLD_FILES", "GLD23K", "load_gld23k"]

GLD_DIR = "gld23k"
GLD_FILES = {"train": "mini_gld_train_split.csv", "test": "mini_gld_test.csv"}
_HINT = (f"put TFF's GLD-23K split files ({', '.join(GLD_FILES.values())}) and the GLDv2 "
         f"images (images/<a>/<b>/<c>/<image_id>.jpg or images/<image_id>.jpg) in DIR/{GLD_DIR}/, "
         f"then pass --data-dir DIR or set {ENV_VAR}=DIR")


@dataclass(frozen=True, eq=False)
class GLD23K:
    """GLD-23K's split: image paths, labels, the natural clients."""
    train_paths: list
    y_train: np.ndarray            # int64 [N]
    parts: list                    # one int64 index array per client (user)
    users: list
    test_paths: list
    y_test: np.ndarray
    classes: list                  # original class ids, position = label
    source: str
    name: str = "gld23k"

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def n_clients(self) -> int:
        return len(self.parts)

    def identity(self) -> str:
        """Hash of the split files and of each image's name, size and modification time
        (the features cache key; hashing every JPEG's bytes would re-read gigabytes)."""
        h = hashlib.sha256()
        for p in [*self.train_paths, *self.test_paths]:
            st = Path(p).stat()
            h.update(f"{Path(p).name}:{st.st_size}:{st.st_mtime_ns};".encode())
        h.update(np.ascontiguousarray(self.y_train).tobytes())
        h.update(np.ascontiguousarray(self.y_test).tobytes())
        return h.hexdigest()

    @staticmethod
    def read(paths, size: int = 224):
        """float32 tensor ``[len(paths), 3, size, size]`` of pixels in [0, 1]."""
        import torch
        from PIL import Image, UnidentifiedImageError
        out = np.empty((len(paths), size, size, 3), dtype=np.uint8)
        for i, p in enumerate(paths):
            try:
                with Image.open(p) as im:
                    out[i] = np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR))
            except (UnidentifiedImageError, OSError) as exc:
                raise DataError(f"gld23k: cannot decode image {p} ({type(exc).__name__})") from None
        return torch.from_numpy(out).permute(0, 3, 1, 2).float().div_(255.0)


def _rows(path: Path, need: tuple) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            cols = reader.fieldnames or []
            missing = [c for c in need if c not in cols]
            if missing:
                raise DataError(f"gld23k: {path} lacks column(s) {', '.join(missing)} "
                                f"(has {', '.join(cols) or 'none'})")
            rows = list(reader)
    except UnicodeDecodeError:
        raise DataError(f"gld23k: {path} is not a UTF-8 CSV file") from None
    if not rows:
        raise DataError(f"gld23k: {path} has no rows")
    return rows


def _image(images: Path, image_id: str) -> Path | None:
    for p in (images / image_id[:1] / image_id[1:2] / image_id[2:3] / f"{image_id}.jpg",
              images / f"{image_id}.jpg"):
        if p.is_file():
            return p
    return None


def load_gld23k(data_dir=None) -> GLD23K:
    """The GLD-23K split from ``DIR/gld23k`` (module docstring); checks every image exists."""
    root = resolve_data_dir(data_dir)
    folder = root / GLD_DIR if root else None
    if folder is None or not folder.is_dir():
        where = f"{folder} not found" if folder else "no data directory set"
        raise DataError(f"gld23k: {where}; {_HINT}")
    missing = [f for f in GLD_FILES.values() if not (folder / f).is_file()]
    if not (folder / "images").is_dir():
        missing.append("images/")
    if missing:
        raise DataError(f"gld23k: {folder} lacks {', '.join(missing)}; {_HINT}")
    train = _rows(folder / GLD_FILES["train"], ("user_id", "image_id", "class"))
    test = _rows(folder / GLD_FILES["test"], ("image_id", "class"))

    def ints(rows, path):
        try:
            return np.array([int(r["class"]) for r in rows], dtype=np.int64)
        except ValueError:
            raise DataError(f"gld23k: {path} has a non-integer class") from None
    cls_tr = ints(train, GLD_FILES["train"])
    cls_te = ints(test, GLD_FILES["test"])
    classes = np.unique(cls_tr)
    unknown = np.setdiff1d(cls_te, classes)
    if len(unknown):
        raise DataError(f"gld23k: {GLD_FILES['test']} has {len(unknown)} class(es) absent from "
                        f"training (e.g. {unknown[0]})")
    images = folder / "images"

    def paths(rows):
        out, absent = [], []
        for r in rows:
            p = _image(images, r["image_id"])
            (out if p else absent).append(p or r["image_id"])
        if absent:
            raise DataError(f"gld23k: {len(absent)} image(s) missing under {images}, e.g. "
                            f"{absent[0]}.jpg (as <a>/<b>/<c>/<id>.jpg or <id>.jpg)")
        return out
    tr_paths, te_paths = paths(train), paths(test)
    users = sorted({r["user_id"] for r in train})
    uid = {u: i for i, u in enumerate(users)}
    owner = np.array([uid[r["user_id"]] for r in train])
    parts = [np.flatnonzero(owner == i).astype(np.int64) for i in range(len(users))]
    return GLD23K(tr_paths, np.searchsorted(classes, cls_tr), parts, users, te_paths,
                  np.searchsorted(classes, cls_te), classes.tolist(), str(folder))
