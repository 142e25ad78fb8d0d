"""Random-pixel files in CIFAR-10's python-pickle layout, for timing the CIFAR entries where the
real CIFAR-10 is absent (it is on neither this machine nor the GPU machine, and nothing may be
downloaded). Timing only: random labels make every accuracy meaningless.

``python3 benchmarks/random_cifar10.py DIR [--per-batch 10000]`` writes
``DIR/cifar-10-batches-py/`` with five training batches and a test batch of ``--per-batch``
images each (10,000: CIFAR-10's sizes, 50,000 training images) and ``batches.meta``, which
:func:`sims.data.cifar.load_cifar10` reads like the real files.
"""
from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np


def write(root: Path, per_batch: int = 10_000, seed: int = 0) -> Path:
    """Write the files under ``root/cifar-10-batches-py`` and return that folder."""
    folder = Path(root) / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def dump(name: str, obj: dict) -> None:       # as the originals: bytes keys, protocol 2
        (folder / name).write_bytes(pickle.dumps({k.encode(): v for k, v in obj.items()},
                                                 protocol=2))

    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        dump(name, {"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                    "labels": [int(v) for v in rng.integers(0, 10, per_batch)]})
    dump("batches.meta", {"label_names": [f"class{i}".encode() for i in range(10)]})
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--per-batch", type=int, default=10_000)
    args = ap.parse_args(argv)
    if args.per_batch < 1:
        ap.error(f"--per-batch must be >= 1, got {args.per_batch}")
    print(write(args.dir, args.per_batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
