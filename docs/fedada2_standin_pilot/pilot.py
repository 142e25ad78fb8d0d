"""Pilot for FedAda2's composite image stand-ins (its output: pilot.txt beside this file).

The ceiling of each stand-in (:data:`sims.problems.finetune.CEILING`): the same linear head
fitted centrally to convergence (:func:`sims.problems.finetune.head_ceiling`, float32
L-BFGS, at most 400 iterations) on the stand-in's training features
(:func:`sims.problems.finetune.composite_standin_features`), for each ridge ``l2`` in
:data:`L2_GRID`; the ceiling is the best test accuracy over the grid (an upper bound: the
ridge is chosen on the test split). Beside it, the single-image head at the same per-image
width (the slots' accuracy, whose product the composite ceiling should approach).

    PYTHONPATH=. python3 docs/fedada2_standin_pilot/pilot.py [TASK ...]
"""
import sys
import time

import torch

from sims.data import load_dataset
from sims.problems.backbones.features import random_features_dataset
from sims.problems.finetune import STANDIN_COMPOSITE, composite_standin_features, head_ceiling

L2_GRID = (1e-4, 3e-4, 1e-3, 1e-2, 1e-1)


def main():
    torch.set_num_threads(1)
    ds = load_dataset("fmnist")
    tasks = sys.argv[1:] or ["cifar100", "gld23k"]
    for task in tasks:
        feats = composite_standin_features(task, ds)
        print(f"{task}: {feats.source}; {feats.num_classes} classes, "
              f"{len(feats.x_train)} train / {len(feats.x_test)} test tuples, "
              f"d_in {feats.x_train.shape[1]}", flush=True)
        best = None
        for l2 in L2_GRID:
            t = time.time()
            r = head_ceiling(feats, l2=l2, max_iter=400, dtype=torch.float32)
            print(f"  l2 {l2:g}: test acc {100 * r['test_acc']:.2f} %, train acc "
                  f"{100 * r['train_acc']:.2f} %, test loss {r['test_loss']:.3f}, "
                  f"{r['iterations']} iterations, {time.time() - t:.0f} s", flush=True)
            best = r if best is None or r["test_acc"] > best["test_acc"] else best
        print(f"  CEILING {task}: {best['test_acc']:.4f} (l2 {best['l2']:g})", flush=True)
        single = random_features_dataset(ds, **STANDIN_COMPOSITE[task]["features"])
        r = head_ceiling(single, l2=1e-3, max_iter=400, dtype=torch.float32)
        print(f"  single image, same width: test acc {100 * r['test_acc']:.2f} %", flush=True)


if __name__ == "__main__":
    main()
