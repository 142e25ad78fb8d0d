"""The dropout MLP's hand-batched gradient against ``torch.func``, a round A/B in one run.

Workload: Fed-LAMB main Figs. 1-2 in the ledger's regime (``reproduce.fedlamb_fig12
--dataset fmnist --models mlp-dropout``): the 784-200-10 MLP with dropout 0.5, 50 clients of
1,200 random MNIST-shaped samples, 25 taking part a round, batch 32, ``--epochs`` local
epochs (38 steps each), one replica, float32, one torch thread. For each algorithm, one
engine run per arm (``fast``: :class:`sims.problems.neural.NeuralProblem` with its
hand-batched gradient and the minibatch's dropout masks; ``generic``: ``fast_path=False``,
``vmap(grad)`` with ``torch.nn.Dropout`` multiplying by masks keyed per minibatch row,
:meth:`sims.problems.NeuralProblem.keyed_masks`), the arms alternated ABBA over ``--repeats``; a
run's seconds a round are its fastest round after the first, on the process's CPU clock
(``algorithms_vs_loop.engine_seconds`` with ``--clock cpu``: other jobs on shared cores do
not count, their use of the memory bus does).
``gain[alg]`` is the median over repeats of generic / fast (1.10: the fast form saves 9% of
the round). Prints one JSON line, with the load average before and after.
``python benchmarks/dropout_grad_ab.py [--repeats 2] [--rounds 2] [--epochs 1]
[--algorithms fed-lamb,fed-ams,fed-sgd]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's sims
from benchmarks import algorithms_vs_loop as avl  # noqa: E402
from sims.problems.models import MLPDropout  # noqa: E402
from sims.problems.neural import NeuralProblem  # noqa: E402

N_CLIENTS, PER_CLIENT, M, BATCH = 50, 1200, 25, 32


def round_seconds(dataset, name: str, fast: bool, epochs: int, rounds: int) -> float:
    parts = np.arange(N_CLIENTS * PER_CLIENT).reshape(N_CLIENTS, -1)
    prob = NeuralProblem(dataset, parts, MLPDropout(), batch_size=BATCH, local_epochs=epochs,
                         fast_path=fast)
    assert prob.fast_path == fast
    return avl.engine_seconds(prob, name, {"m": M}, rounds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--algorithms", default="fed-lamb,fed-ams,fed-sgd")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    avl.CLOCK = "cpu"
    load0 = os.getloadavg()[0]
    dataset = avl.random_dataset(N_CLIENTS * PER_CLIENT)
    seconds = {}
    for name in args.algorithms.split(","):
        runs = {True: [], False: []}
        for r in range(args.repeats):
            for fast in ((True, False, False, True) if r % 2 == 0 else (False, True, True, False)):
                runs[fast].append(round_seconds(dataset, name, fast, args.epochs, args.rounds))
        seconds[name] = {"fast": statistics.median(runs[True]),
                         "generic": statistics.median(runs[False])}
    gain = {n: round(s["generic"] / s["fast"], 2) for n, s in seconds.items()}
    print(json.dumps({"workload": f"mlp-dropout, {N_CLIENTS} clients x {PER_CLIENT}, "
                                  f"{M} a round, batch {BATCH}, E={args.epochs}",
                      "seconds_a_round": seconds, "gain": gain,
                      "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}))


if __name__ == "__main__":
    main()
