"""A Fed-LAMB learning-rate grid: local Ray against one process, and batched against separate.

Workload (issue 15): Fed-LAMB, the 9 learning rates of its supplement Table 1 grid x 3 seeds
(27 cells), MLP 784-200-10 on random data with MNIST's shapes, 50 clients of 300 samples
each, 25 taking part per round, batch 32, one local epoch (10 local steps), float32. The same
sweep three ways, each from an empty results folder, interleaved over ``--repeats`` (the order
turned each repeat; medians reported), in this one run:

* ``inprocess``: every cell one after the other in this process, one torch thread
  (:func:`sims.experiments.sweep.run_sweep`, ``executor="inprocess"``, ``plan="separate"``);
* ``ray``: the same cells as Ray tasks on a local Ray started here with ``--workers`` CPUs
  (default 2), one torch thread each. Ray is started once and its workers warmed by a first
  sweep (``ray_init_s``, ``ray_first_sweep_s``); the repeats then measure the running sweep,
  as in a long sweep, where start-up is paid once.
  ``speedup_ray_local_vs_inprocess_with_startup`` charges the start-up and the cold first
  sweep to this one short sweep instead;
* ``batched``: the 27 cells as replicas of one batched engine run (per-replica learning rates,
  :mod:`sims.experiments.sweep.per_replica`), one thread.

Before each repeat it also measures ``cpu_parallel_capacity``: how many cores' worth of a
single-threaded matmul workload ``--workers`` processes get at that moment (2.0 on two idle
cores; other jobs on the machine lower it). It is the ceiling of the Ray speedup, and
``ray_efficiency_vs_capacity`` is the speedup over it.

Prints one JSON line: ``speedup_ray_local_vs_inprocess`` (goal >= 1.6 on 2 cores),
``speedup_batched_grid_vs_separate`` (separate in-process time / batched time; on a CPU the
engine is compute-bound per client, so about 1 is expected there; the batching pays on a
GPU), the times, and the machine's load average before and after (other jobs on shared
cores slow every timing, the two-worker one most). ``python benchmarks/sweep_batching.py
[--rounds R] [--repeats K] [--workers N] [--lrs K] [--seeds S]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # this checkout's sims
from sims.experiments.sweep import Axis, Grid, SweepSpec, run_sweep  # noqa: E402
from sims.core import malloc as _malloc  # noqa: E402

_malloc.tune_for_command()     # a benchmark is a command (sims.core.malloc)

LRS = (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)     # Fed-LAMB SUPP Table 1


def build_problem(desc: dict):
    """The benchmark's problem: random MNIST-shaped data, ``per_client`` samples for each of
    ``n_clients`` clients, MLP 784-200-10 (built in every worker from this description)."""
    import numpy as np

    from sims.problems.models import MLP
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


BURN = """
import sys, time, torch
torch.set_num_threads(1)
a0 = torch.randn(256, 256)
a = a0
for _ in range(20):
    a = torch.tanh(a @ a * 1e-2)          # warm-up
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.001)
t0 = time.perf_counter()
a = a0
for _ in range(400):
    a = torch.tanh(a @ a * 1e-2)
print(time.perf_counter() - t0)
"""


def _burns(n: int) -> list[float]:
    """Run ``n`` single-threaded matmul processes at the same moment; their wall times."""
    import subprocess
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", BURN, repr(start)], stdout=subprocess.PIPE,
                              text=True) for _ in range(n)]
    return [float(p.communicate()[0]) for p in procs]


def parallel_capacity(workers: int) -> float:
    """How many cores' worth of single-threaded work ``workers`` processes get right now:
    ``workers`` times one process's time over the slowest of ``workers`` at once (ideal:
    ``workers``; less while other jobs hold cores). The ceiling of the Ray speedup."""
    one = _burns(1)[0]
    return workers * one / max(_burns(workers))


def timed(fn):
    t0 = time.perf_counter()
    res = fn()
    assert not res.missing and not res.failures, res.failures
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lrs", type=int, default=len(LRS), help="first K rates of the grid")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    lrs = LRS[: args.lrs]
    load_before = os.getloadavg()
    import ray

    from sims.experiments.sweep import ray_init
    times = {"inprocess": [], "ray": [], "batched": []}
    with tempfile.TemporaryDirectory() as tmp:
        def sweep(mode, i):
            return spec(f"{tmp}/{mode}{i}", args.rounds, lrs, args.seeds)

        t0 = time.perf_counter()
        ray_init(None, args.workers)
        t_init = time.perf_counter() - t0
        t_first = timed(lambda: run_sweep(sweep("warm", 0), executor="ray", quiet=True))
        capacity = []
        for i in range(args.repeats):          # interleaved, the order turned each repeat
            capacity.append(parallel_capacity(args.workers))
            order = ["inprocess", "ray", "batched"]
            for mode in order[i % 3:] + order[: i % 3]:
                if mode == "ray":
                    times[mode].append(timed(lambda: run_sweep(sweep(mode, i), executor="ray",
                                                               quiet=True)))
                else:
                    plan = "batched" if mode == "batched" else "separate"
                    times[mode].append(timed(lambda: run_sweep(sweep(mode, i), plan=plan,
                                                               quiet=True)))
        ray.shutdown()
    med = {k: statistics.median(v) for k, v in times.items()}
    cells = len(lrs) * args.seeds
    out = {"benchmark": "sweep_batching", "cells": cells, "rounds": args.rounds,
           "repeats": args.repeats, "workers": args.workers, "cpu_count": os.cpu_count(),
           "inprocess_s": round(med["inprocess"], 2), "ray_local_s": round(med["ray"], 2),
           "batched_s": round(med["batched"], 2),
           "ray_init_s": round(t_init, 2), "ray_first_sweep_s": round(t_first, 2),
           "s_per_cell_round_inprocess": round(med["inprocess"] / (cells * args.rounds), 3),
           "speedup_ray_local_vs_inprocess": round(med["inprocess"] / med["ray"], 3),
           "speedup_ray_local_vs_inprocess_range": [
               round(a / b, 3) for a, b in sorted(zip(times["inprocess"], times["ray"]),
                                                  key=lambda ab: ab[0] / ab[1])[:: max(
                                                      1, args.repeats - 1)]],
           "speedup_ray_local_vs_inprocess_with_startup": round(
               med["inprocess"] / (t_init + t_first), 3),
           "cpu_parallel_capacity": round(statistics.median(capacity), 3),
           "cpu_parallel_capacity_range": [round(min(capacity), 3), round(max(capacity), 3)],
           "ray_efficiency_vs_capacity": round(med["inprocess"] / med["ray"]
                                               / statistics.median(capacity), 3),
           "speedup_batched_grid_vs_separate": round(med["inprocess"] / med["batched"], 3),
           "times_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
           "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
