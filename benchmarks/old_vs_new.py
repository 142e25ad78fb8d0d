"""Old code against this checkout, in one run: each algorithm's engine round on both.

``python benchmarks/old_vs_new.py --old PATH [--algorithms a,b] [--repeats K] [--rounds R]
[--threads N]``: ``PATH`` is a checkout of the older commit (e.g. ``git worktree add
/tmp/old-a1a3221 a1a3221``). Two code trees cannot share one Python process (both are the
package ``sims``), so each measurement is a child process that imports one tree and times
every algorithm's round there, on the workload of ``benchmarks/algorithms_vs_loop.py``
(``engine_seconds``: the fastest of ``--rounds`` rounds after a warm-up round); the trees
alternate (old, new, new, old, ...) over ``--repeats``, and ``ratio[alg]`` is the median over
repeats of new / old within a repeat (below 1: the new code is faster). The load average
at start and end is recorded (the machine may be shared).

Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

NEW = Path(__file__).resolve().parents[1]
CHILD = r"""
import json, sys, torch
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/benchmarks")
torch.set_num_threads({threads})
import algorithms_vs_loop as bench
w = bench.WORKLOAD
problem = bench.make_problem(w)
print(json.dumps({{name: bench.engine_seconds(problem, name, w, {rounds})
                   for name in {names!r}}}))
"""


def measure(root: Path, names, rounds: int, threads: int) -> dict:
    code = CHILD.format(root=str(root), threads=threads, rounds=rounds, names=list(names))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(root), check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="a checkout of the older commit")
    ap.add_argument("--algorithms", default="fed-sgd,fed-ef-sgd,fedavg,scaffold,fedadam,"
                                            "fedprox,fedcm,fedadam-cm,adp-fed,fedadagrad")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    old = Path(args.old).resolve()
    if not (old / "benchmarks" / "algorithms_vs_loop.py").exists():
        raise SystemExit(f"old_vs_new.py: error: {old} has no benchmarks/algorithms_vs_loop.py")
    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    load = os.getloadavg()
    got = {"old": [], "new": []}
    for r in range(args.repeats):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for which in order:
            got[which].append(measure(old if which == "old" else NEW, names, args.rounds,
                                      args.threads))
    med = statistics.median
    out = {"seconds_per_round": {w: {n: round(med(rep[n] for rep in got[w]), 6)
                                     for n in names} for w in got},
           "ratio_new_over_old": {n: round(med(b[n] / a[n] for a, b in zip(got["old"],
                                                                           got["new"])), 3)
                                  for n in names},
           "repeats": args.repeats, "rounds": args.rounds, "threads": args.threads,
           "old": str(old), "load_average_start_end": [round(load[0], 2),
                                                       round(os.getloadavg()[0], 2)]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
