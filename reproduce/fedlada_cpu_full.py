"""``python -m reproduce.fedlada_cpu_full``: the committed FedLADA set on this CPU, one entry
after another (the stated ``--cpu-full`` profile of the FedLADA results doc).

Each step is the command its ledger rows were filed from (:data:`STEPS`), so rerunning this
profile reproduces ``docs/ledger/`` for FedLADA; every step is resumable (engine runs
checkpoint, sweep and tuning cells persist under ``--out``), so an interrupted profile is
continued by running it again. ``--dry-run`` prints the commands and their measured costs;
``--ledger`` files each entry after its run (``python -m reproduce ledger ENTRY``); ``--only``
runs a comma-separated subset. The measured costs (one core, ``--threads 1``, CPU seconds of
the committed runs on the 2-core machine, under load) are in :data:`STEPS` and the results
doc; the whole set is about 1.8 CPU-hours (108 CPU-minutes measured, one core; about 2
hours of wall on one loaded slot), Figure 2's tuned comparison the largest part.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

#: ``(entry, flags, measured cost)``: the committed set, in the order it is run.
STEPS = (
    ("fedlada_fig2", "--paper-lr --tuned --seeds 5",
     "about 48 min of CPU (80 min wall on a loaded slot: tuning stages 1-2, 117 cells; "
     "14 runs x 5 seeds x 150 rounds)"),
    ("fedlada_fig1", "--paper-lr --tuned --seeds 3",
     "5 min (296 s of CPU measured: 5 runs x 3 seeds x 150 rounds, every round evaluated)"),
    ("fedlada_fig8", "--paper-lr --tuned --seeds 5",
     "9 min (524 s measured: 15 runs x 5 seeds x 80 rounds)"),
    ("fedlada_alpha", "--paper-lr --tuned --seeds 2",
     "8 min (461 s measured: 6 sweeps, 2 seeds, 70 rounds)"),
    ("fedlada_participation", "--paper-lr --tuned --seeds 2",
     "5.5 min (325 s measured: 8 runs x 2 seeds x 100 rounds)"),
    ("fedlada_k", "--paper-lr --tuned --seeds 2",
     "6.5 min (377 s measured: 8 runs x 2 seeds x 60 rounds)"),
    ("fedlada_fig7", "--paper-lr --tuned --seeds 3",
     "22 min (1305 s measured: 8 runs x 3 seeds, 72 tuning cells, 100 rounds)"),
    ("fedlada_fedadam", "", "2 min (136 s of runs)"),
    ("fedlada_synthetic", "", "2-3 min (135 s of runs)"),
    ("fedlada_theory", "", "under 1 min (10 s measured: 5 settings x 5 seeds x 20 rounds, the sympy audit)"),
)


def commands(only=None, extra=()) -> list[tuple[str, list[str], str]]:
    out = []
    for entry, flags, cost in STEPS:
        if only and entry not in only:
            continue
        out.append((entry, [sys.executable, "-m", f"reproduce.{entry}", *flags.split(),
                            "--threads", "1", "--quiet", *extra], cost))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce.fedlada_cpu_full",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the commands and costs")
    ap.add_argument("--ledger", action="store_true", help="file each entry after its run")
    ap.add_argument("--only", default="", help="comma-separated entries of the profile")
    ap.add_argument("--out", default=None, help="results folder (default the entries')")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    known = {e for e, _, _ in STEPS}
    if only - known:
        print(f"error: --only: not in the profile: {', '.join(sorted(only - known))}; one of "
              f"{', '.join(e for e, _, _ in STEPS)}", file=sys.stderr)
        return 2
    extra = ["--out", args.out] if args.out else []
    for entry, cmd, cost in commands(only, extra):
        print(f"python3 {' '.join(cmd[1:])}   # {cost}", flush=True)
        if args.dry_run:
            continue
        rc = subprocess.call(cmd)
        if rc != 0:
            print(f"error: {entry} exited {rc}; rerun this profile to continue", file=sys.stderr)
            return rc
        if args.ledger:
            rc = subprocess.call([sys.executable, "-m", "reproduce", "ledger", entry])
            if rc != 0:
                return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
