"""A Fed-LAMB learning-rate grid: local Ray against one process, and batched against separate.

Workload (issue 15): Fed-LAMB, the 9 learning rates of its supplement Table 1 grid x 3 seeds
(27 cells), MLP 784-200-10 on random data with MNIST's shapes, 50 clients of 300 samples
each, 25 taking part per round, batch 32, one local epoch (10 local steps), float32. Three
timings of the same sweep, each from an empty results folder, in this one run:

* ``inprocess``: every cell one after the other in this process, one torch thread
  (:func:`sims.sweep.run_sweep`, ``executor="inprocess"``, ``plan="separate"``);
* ``ray``: the same cells as Ray tasks on a local Ray started here with ``--workers`` CPUs
  (default 2), one torch thread each; the time includes starting Ray and its workers, as a
  user's command does (``ray_startup_s`` says how much of it that was);
* ``batched``: the 27 cells as replicas of one batched engine run (per-replica learning rates,
  :mod:`sims.algorithms.per_replica`), one thread.

Prints one JSON line: ``speedup_ray_local_vs_inprocess`` (goal >= 1.6 on 2 cores),
``speedup_batched_grid_vs_separate`` (separate in-process time / batched time; on a CPU the
engine is compute-bound per client, so about 1 is expected there; the batching pays on a
GPU), the times, and the machine's load average before and after (other jobs on shared
cores slow every timing, the two-worker one most). ``python benchmarks/sweep_batching.py
[--rounds R] [--workers N] [--lrs K] [--seeds S]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's sims
from sims.sweep import Axis, Grid, SweepSpec, run_sweep  # noqa: E402

LRS = (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)     # Fed-LAMB SUPP Table 1


def build_problem(desc: dict):
    """The benchmark's problem: random MNIST-shaped data, ``per_client`` samples for each of
    ``n_clients`` clients, MLP 784-200-10 (built in every worker from this description)."""
    import numpy as np

    from sims.models import MLP
    from sims.problems.neural import NeuralProblem
    gen = torch.Generator().manual_seed(desc["seed"])
    n = desc["n_clients"] * desc["per_client"]
    data = types.SimpleNamespace(
        name="random-mnist-shaped", source="random",
        x_train=torch.randn(n, 1, 28, 28, generator=gen),
        y_train=torch.randint(0, 10, (n,), generator=gen),
        x_test=torch.randn(desc["test"], 1, 28, 28, generator=gen),
        y_test=torch.randint(0, 10, (desc["test"],), generator=gen), num_classes=10)
    parts = np.split(np.arange(n), desc["n_clients"])
    return NeuralProblem(data, parts, MLP(784, hidden=200), batch_size=desc["batch"],
                         local_epochs=1, eval_train_samples=desc["test"])


def spec(out: str, rounds: int, lrs, seeds: int) -> SweepSpec:
    grid = Grid({"fed-lamb": {}}, [Axis("eta_l", tuple(lrs), "fed-lamb")])
    problem = {"n_clients": 50, "per_client": 300, "batch": 32, "test": 1000, "seed": 0}
    return SweepSpec("bench", grid, problem, build_problem, participation="m=25",
                     rounds=rounds, seeds=list(range(seeds)), eval_every=rounds, out=out)


def timed(fn):
    t0 = time.perf_counter()
    res = fn()
    return time.perf_counter() - t0, res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lrs", type=int, default=len(LRS), help="first K rates of the grid")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    lrs = LRS[: args.lrs]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        t_sep, sep = timed(lambda: run_sweep(spec(f"{tmp}/a", args.rounds, lrs, args.seeds),
                                             plan="separate", quiet=True))
        import ray
        from sims.sweep import ray_init
        t_start, _ = timed(lambda: ray_init(None, args.workers))
        t_ray, par = timed(lambda: run_sweep(spec(f"{tmp}/b", args.rounds, lrs, args.seeds),
                                             executor="ray", plan="separate", quiet=True))
        ray.shutdown()
        t_ray += t_start
        t_bat, bat = timed(lambda: run_sweep(spec(f"{tmp}/c", args.rounds, lrs, args.seeds),
                                             plan="batched", quiet=True))
    for res in (sep, par, bat):
        assert not res.missing and not res.failures, res.failures
    cells = len(lrs) * args.seeds
    out = {"benchmark": "sweep_batching", "cells": cells, "rounds": args.rounds,
           "workers": args.workers, "cpu_count": os.cpu_count(),
           "inprocess_s": round(t_sep, 2), "ray_local_s": round(t_ray, 2),
           "ray_startup_s": round(t_start, 2), "batched_s": round(t_bat, 2),
           "s_per_cell_round_inprocess": round(t_sep / (cells * args.rounds), 3),
           "speedup_ray_local_vs_inprocess": round(t_sep / t_ray, 3),
           "speedup_ray_local_vs_inprocess_after_startup": round(t_sep / (t_ray - t_start), 3),
           "speedup_batched_grid_vs_separate": round(t_sep / t_bat, 3),
           "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
