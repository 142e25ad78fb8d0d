"""Old code against this checkout, in one run: each algorithm's engine round on both.

``python benchmarks/old_vs_new.py --old PATH [--algorithms a,b] [--repeats K] [--rounds R]
[--threads N]``: ``PATH`` is a checkout of the older commit (e.g. ``git worktree add
/tmp/old-a1a3221 a1a3221``). Two code trees cannot share one Python process (both are the
package ``sims``), so each tree gets one worker process that imports it, builds the workload
of ``benchmarks/algorithms_vs_loop.py`` once and then times what it is asked
(``engine_seconds``: the fastest of ``--rounds`` rounds after a warm-up round). The workers
stay up and take turns algorithm by algorithm, in the order old, new, new, old (ABBA) for
each of ``--repeats``, so the two measurements of a pair are seconds apart and the load of
other jobs on a shared machine falls on both alike; ``ratio[alg]`` is the median over the
pairs of new / old (below 1: the new code is faster). The load average at start and end is
recorded. The environment passes to both workers (``FEDTOOLKIT_NATIVE=0``: both without
their C kernels).

``--loop``: for each algorithm with a plain ``torch.optim`` loop
(``algorithms_vs_loop.LOOP_OPTIMIZER``), each repeat is old, new, loop, new, old (the loop,
the same code for both trees, timed by this checkout's worker between the pairs), and
``speedup_vs_loop[which][alg]`` is the median over repeats of the loop's seconds over the mean
of that repeat's two measurements of the tree: the 1.6x goal of both trees, measured
side by side. ``--clock cpu``: every time read as the worker's CPU time
(``time.process_time``, patched into the engine's ``wall_time`` metric and the loop's timer
of both trees alike), so the time other jobs hold the cores is left out.

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
WORKER = r"""
import json, sys, torch
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/benchmarks")
torch.set_num_threads({threads})
import algorithms_vs_loop as bench
if {clock!r} == "cpu":   # both trees alike: the engine's wall_time metric and the loop's timer
    import time, types
    import sims.core.engine as engine
    engine.time = bench.time = types.SimpleNamespace(perf_counter=time.process_time)
w = bench.WORKLOAD
problem = bench.make_problem(w)
print("ready", flush=True)
for line in sys.stdin:
    name, rounds = line.split()
    if name.startswith("loop:"):
        got = bench.loop_seconds(problem, name[5:], w, int(rounds))
    else:
        got = bench.engine_seconds(problem, name, w, int(rounds))
    print(json.dumps(got), flush=True)
"""


class Worker:
    """One tree's worker process (module docstring)."""

    def __init__(self, root: Path, threads: int, clock: str = "wall"):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER.format(root=str(root), threads=threads,
                                                 clock=clock)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(root))
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"old_vs_new.py: error: the worker for {root} did not start")

    def seconds(self, name: str, rounds: int) -> float:
        self.proc.stdin.write(f"{name} {rounds}\n")
        self.proc.stdin.flush()
        return float(json.loads(self.proc.stdout.readline()))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="a checkout of the older commit")
    ap.add_argument("--algorithms", default="fed-sgd,fed-ef-sgd,fedavg,scaffold,fedadam,"
                                            "fedprox,fedcm,fedadam-cm,adp-fed,fedadagrad")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall clock (default) or each worker's CPU time (the engine's "
                         "wall_time metric and the loop's timer read time.process_time in "
                         "both trees alike)")
    ap.add_argument("--loop", action="store_true",
                    help="also each algorithm's plain loop between the pairs (speedup_vs_loop)")
    args = ap.parse_args(argv)
    old = Path(args.old).resolve()
    if not (old / "benchmarks" / "algorithms_vs_loop.py").exists():
        raise SystemExit(f"old_vs_new.py: error: {old} has no benchmarks/algorithms_vs_loop.py")
    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    load = os.getloadavg()
    workers = {"old": Worker(old, args.threads, args.clock),
               "new": Worker(NEW, args.threads, args.clock)}
    got = {n: {"old": [], "new": [], "loop": []} for n in names}
    loops = {}
    if args.loop:
        sys.path.insert(0, str(NEW / "benchmarks"))
        from algorithms_vs_loop import LOOP_OPTIMIZER
        loops = {n: LOOP_OPTIMIZER[n] for n in names if n in LOOP_OPTIMIZER}
    try:
        for n in names:
            for _ in range(args.repeats):
                order = (("old", "new", "loop", "new", "old") if n in loops
                         else ("old", "new", "new", "old"))
                for which in order:
                    if which == "loop":
                        got[n]["loop"].append(workers["new"].seconds(f"loop:{loops[n]}",
                                                                     args.rounds))
                    else:
                        got[n][which].append(workers[which].seconds(n, args.rounds))
    finally:
        for w in workers.values():
            w.close()
    med = statistics.median

    def pairs(n):                           # (old, new) of each ABBA half, adjacent in time
        o, w = got[n]["old"], got[n]["new"]
        return list(zip(o, w))
    out = {"seconds_per_round": {w: {n: round(med(got[n][w]), 6) for n in names}
                                 for w in ("old", "new")},
           "ratio_new_over_old": {n: round(med(b / a for a, b in pairs(n)), 3) for n in names},
           "ratio_range": {n: [round(min(b / a for a, b in pairs(n)), 3),
                               round(max(b / a for a, b in pairs(n)), 3)] for n in names},
           "repeats": args.repeats, "rounds": args.rounds, "threads": args.threads,
           "clock": args.clock,
           "order": ("ABBA per algorithm and repeat, persistent workers"
                     + (", the loop between the pairs" if loops else "")),
           "native": os.environ.get("FEDTOOLKIT_NATIVE", "1") != "0",
           "old": str(old), "load_average_start_end": [round(load[0], 2),
                                                       round(os.getloadavg()[0], 2)]}
    if loops:
        def speedup(n, which):          # per repeat: the loop over the tree's two times
            t = got[n][which]
            return round(med(got[n]["loop"][r] / ((t[2 * r] + t[2 * r + 1]) / 2)
                             for r in range(args.repeats)), 2)
        out["loop_seconds"] = {n: round(med(got[n]["loop"]), 6) for n in loops}
        out["loop_optimizer"] = loops
        out["speedup_vs_loop"] = {w: {n: speedup(n, w) for n in loops} for w in ("old", "new")}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
