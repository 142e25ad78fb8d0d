"""One more lever of the FedLADA stand-in search: symmetric label noise on the training set.

    python3 docs/fedlada_standin_search/label_noise.py --noise 0.3 -- <reproduce.fedlada_fig2 flags>

Runs ``reproduce.fedlada_fig2`` with its flags after ``--`` on a copy of the data set whose
training labels are flipped, for a ``--noise`` fraction of the images (chosen with
``numpy.random.default_rng(--noise-seed)``, the same for every run and method), to a uniformly
drawn *other* class; the test set is untouched. Why: the premise the search looks for
(LocalAdam fits a client's data fastest and then generalises worse than FedAvg) is a gap
between fitting and generalising that an over-parameterised model opens by memorising; with
clean Fashion-MNIST no candidate's model memorises within the horizon (train accuracy levels
off at 84-93 %), while noisy labels can only be fitted by memorising them, and a method that
fits them faster pays for it on the clean test set. A pilot, not an option of the entries:
the training metrics read the noisy labels (what the methods fit), the test metrics the clean
ones.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from reproduce import common, fedlada_fig2  # noqa: E402


def noisy(ds, fraction: float, seed: int):
    """A copy of ``ds`` with ``fraction`` of its training labels moved to another class."""
    y = ds.y_train.clone()
    rng = np.random.default_rng(seed)
    n, k = len(y), int(ds.num_classes)
    flip = rng.choice(n, size=int(round(fraction * n)), replace=False)
    shift = torch.from_numpy(rng.integers(1, k, size=len(flip)))
    y[flip] = (y[flip] + shift) % k
    return dataclasses.replace(ds, y_train=y)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", type=float, required=True)
    ap.add_argument("--noise-seed", type=int, default=0)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    if not 0 < args.noise < 1:
        ap.error("--noise must lie in (0, 1)")
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    load = common.cached_dataset
    common.cached_dataset = lambda name, data_dir: noisy(load(name, data_dir), args.noise,
                                                         args.noise_seed)
    return common.main(fedlada_fig2, rest)


if __name__ == "__main__":
    raise SystemExit(main())
