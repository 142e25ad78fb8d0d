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
* ``owned_start``: a round's first local step never writes its state in place (every
  algorithm's ``owned_start_keys`` empty: the step writes new tensors, as now);
* ``compiled``: the opt-in compiled steps on (compiling in the untimed first round;
  ``gain`` < 1 means the compiled steps were faster).

``--alternate N``: instead, one engine run of ``2 N + 1`` rounds per algorithm and arm
with the piece switched off and on from round to round (the first round, which builds
caches, not counted); ``gain`` is the median over the ``N`` adjacent (off, on) pairs of
their seconds' ratio: the pairs are a fraction of a second apart, so the load of other jobs
on a shared machine cancels.

Prints one JSON line. ``python benchmarks/pieces_ab.py --old /tmp/old-a1a3221 [--threads
1] [--repeats 3] [--rounds 4] [--alternate N] [--algorithms a,b] [--arms
native,row_sources,...]``.
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
        "owned_start", "compiled")
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
    ap.add_argument("--alternate", type=int, default=0,
                    help="pairs of rounds switched off / on within one run (0: whole runs)")
    args = ap.parse_args(argv)
    old = Path(args.old).resolve()
    if not (old / "sims" / "row_source.py").exists():
        raise SystemExit(f"pieces_ab.py: error: {old} is not a checkout of a1a3221")
    sys.path.insert(0, str(old))
    import torch
    from sims import compiled, native, torch_fused      # (the a1a3221 layout)
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
        if arm == "owned_start":
            from sims.algorithms import base
            stack = contextlib.ExitStack()
            for cls in (base.Algorithm, fed_lamb.FedLAMB, fedada2.JointAdaptive,
                        fedada2.FedAda2Blend, __import__("sims.algorithms.fedlada",
                                                         fromlist=["x"]).FedLADA):
                stack.enter_context(patched(cls, "owned_start_keys",
                                            lambda self: frozenset()))
            return stack
        return switched(compiled.enabled, compiled.enable, True)

    w = bench.WORKLOAD
    problem = bench.make_problem(w)
    load_start = os.getloadavg()
    if args.alternate:
        return alternate(args, names, arms, arm_context, bench, problem, w, load_start, torch,
                         native)
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


def alternate(args, names, arms, arm_context, bench, problem, w, load_start, torch, native):
    """The ``--alternate`` measurement (module docstring)."""
    import numpy as np
    from sims import engine                            # (the a1a3221 layout)
    from sims.participation import Participation
    from sims.algorithms.registry import make_for_problem

    def paired(name, arm):
        ctx = {"cm": None}

        def progress(t):                    # after round t: switch for round t + 1
            if ctx["cm"] is not None:
                ctx["cm"].__exit__(None, None, None)
                ctx["cm"] = None
            if t % 2 == 1:                  # rounds 2, 4, ... (1-based) run with it off
                ctx["cm"] = arm_context(arm)
                ctx["cm"].__enter__()
        alg = make_for_problem(name, problem)
        try:
            out = engine.run(problem, alg, Participation("fixed", m=w["m"]),
                             2 * args.alternate + 1, [0], eval_every=0, progress=progress)
        finally:
            if ctx["cm"] is not None:
                ctx["cm"].__exit__(None, None, None)
        sec = np.diff(np.concatenate([[0.0], out.metrics["wall_time"][0]]))[1:]
        on, off = sec[1::2], sec[0::2]      # round 2, 4, ... off; 3, 5, ... on
        n = min(len(on), len(off))
        return np.median(off[:n] / on[:n]), float(np.median(on)), float(np.median(off))

    gain, sec_on, sec_off = {}, {}, {}
    for arm in arms:
        gain[arm], sec_off[arm] = {}, {}
        for name in names:
            g, on, off = paired(name, arm)
            gain[arm][name], sec_off[arm][name] = round(float(g), 3), round(off, 6)
            sec_on.setdefault(name, round(on, 6))
    out = {"gain": gain, "seconds_per_round": sec_on, "seconds_per_round_off": sec_off,
           "pairs": args.alternate, "threads": torch.get_num_threads(),
           "load_average_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
           "native": native.status(), "commit": "a1a3221", "mode": "alternate"}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
