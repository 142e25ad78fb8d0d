"""What each piece of commit a1a3221's acceleration bought, A/B in one run.

Before the rules were taken apart from their fast forms, a local step could take one of
several forms, and the engine could hand it row sources (server rows read where they are,
a shared zero row, client state written in place, the round's delta written by the last
step) and a deferred gradient block (the MLP's first-weight gradient read from the oneDNN
outputs). This script measures, on a checkout of that commit (``--old PATH``, e.g. made by
``git worktree add /tmp/old-a1a3221 a1a3221``), how much of a round each piece saved: for
every algorithm, the engine's seconds a round (the workload of
``benchmarks/algorithms_vs_loop.py``, MLP 784-200-10, 25 of 50 clients of 300 samples, one
local epoch of batch 32) with everything on, and with one piece off, the arms interleaved
within each repeat; ``gain[arm][alg]`` is the median over repeats of off / on (1.10: the
piece saves 9% of the round). Pieces (arms):

* ``native``: the C kernels off (``FEDTOOLKIT_NATIVE=0``: torch's fused kernels and the
  eager fast forms take the steps);
* ``row_sources``: the engine's row sources off (every algorithm's ``takes_row_sources``
  False, Fed-EF's error rows gathered);
* ``deferred``: the deferred gradient block off (the problem writes the whole gradient);
* ``row_sources_deferred``: both off;
* ``torch_fused``: torch's fused optimizer kernels off, the C kernels on;
* ``compiled``: the opt-in compiled steps on (compiling in the untimed first round;
  ``gain`` < 1 means the compiled steps were faster).

Prints one JSON line. ``python benchmarks/pieces_ab.py --old /tmp/old-a1a3221 [--threads
1] [--repeats 3] [--rounds 4] [--algorithms a,b] [--arms native,row_sources,...]``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from pathlib import Path

ARMS = ("native", "row_sources", "deferred", "row_sources_deferred", "torch_fused",
        "compiled")
DEFAULT_ALGORITHMS = ("fed-ef-sgd", "fed-ams", "fed-lamb", "fedlada", "localadam",
                      "mimelite", "mimelite-lamb", "mime", "mime-lamb", "fedada2",
                      "fedada2-adam", "dja", "joint-adaptive", "fedadaadam", "fedadaadagrad",
                      "fedada2-blend")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="a checkout of commit a1a3221")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--algorithms", default=",".join(DEFAULT_ALGORITHMS))
    ap.add_argument("--arms", default=",".join(ARMS))
    args = ap.parse_args(argv)
    old = Path(args.old).resolve()
    if not (old / "sims" / "row_source.py").exists():
        raise SystemExit(f"pieces_ab.py: error: {old} is not a checkout of a1a3221")
    sys.path.insert(0, str(old))
    import torch
    from sims import compiled, torch_fused
    from sims.accel import native
    from sims.algorithms import adaptive, fed_ef, fed_lamb, fedada2
    from sims.problems.neural import NeuralProblem
    sys.path.insert(0, str(old / "benchmarks"))
    import algorithms_vs_loop as bench

    torch.set_num_threads(args.threads)
    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for a in arms:
        if a not in ARMS:
            raise SystemExit(f"pieces_ab.py: error: unknown arm {a!r}; choose from {ARMS}")

    @contextlib.contextmanager
    def patched(obj, attr, value):
        had = attr in vars(obj)
        old_value = vars(obj).get(attr)
        setattr(obj, attr, value)
        try:
            yield
        finally:
            if had:
                setattr(obj, attr, old_value)
            else:
                delattr(obj, attr)

    @contextlib.contextmanager
    def switched(get, set_, value):
        was = get()
        set_(value)
        try:
            yield
        finally:
            set_(was)

    @contextlib.contextmanager
    def no_row_sources():
        false = property(lambda self: False)
        with contextlib.ExitStack() as stack:
            for cls in (adaptive.LocalAdaptiveClients, fed_lamb.MimeLite,
                        fedada2.JointAdaptive):
                stack.enter_context(patched(cls, "takes_row_sources", false))
            stack.enter_context(patched(fedada2.JointAdaptive, "_starts_as_rows",
                                        lambda self, cover, server: False))
            stack.enter_context(patched(fed_ef.FedEF, "error_rows_in_place", False))
            stack.enter_context(patched(NeuralProblem, "grad_reads_server_rows", false))
            yield

    def no_deferred():
        return patched(NeuralProblem, "defers_grad", False)

    def arm_context(arm):
        if arm == "native":
            return switched(native.enabled, native.enable, False)
        if arm == "row_sources":
            return no_row_sources()
        if arm == "deferred":
            return no_deferred()
        if arm == "row_sources_deferred":
            stack = contextlib.ExitStack()
            stack.enter_context(no_row_sources())
            stack.enter_context(no_deferred())
            return stack
        if arm == "torch_fused":
            return switched(torch_fused.enabled, torch_fused.enable, False)
        return switched(compiled.enabled, compiled.enable, True)

    w = bench.WORKLOAD
    problem = bench.make_problem(w)
    load_start = os.getloadavg()
    on = {n: [] for n in names}
    off = {a: {n: [] for n in names} for a in arms}
    for _ in range(args.repeats):
        for name in names:
            on[name].append(bench.engine_seconds(problem, name, w, args.rounds))
            for arm in arms:
                with arm_context(arm):
                    off[arm][name].append(bench.engine_seconds(problem, name, w, args.rounds))
    med = statistics.median
    out = {
        "seconds_per_round": {n: round(med(v), 6) for n, v in on.items()},
        "seconds_per_round_off": {a: {n: round(med(v), 6) for n, v in got.items()}
                                  for a, got in off.items()},
        "gain": {a: {n: round(med(o / x for o, x in zip(got[n], on[n])), 3) for n in names}
                 for a, got in off.items()},
        "threads": torch.get_num_threads(), "repeats": args.repeats, "rounds": args.rounds,
        "load_average_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "native": native.status(),
        "commit": "a1a3221", "workload": "benchmarks/algorithms_vs_loop.py WORKLOAD",
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
