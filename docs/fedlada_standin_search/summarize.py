"""Summarise the FedLADA stand-in search (docs/fedlada_standin_search.md).

    python3 docs/fedlada_standin_search/summarize.py --runs /tmp/fedlada-pilot   # from the runs
    python3 docs/fedlada_standin_search/summarize.py                             # from the ledger
    python3 docs/fedlada_standin_search/summarize.py --horizons X2               # read at each round

Each candidate's runs are the ``fedlada_fig2`` results under ``RUNS/<dir>`` (one or more
directories: seeds run separately). From the runs it writes the ledger ``curves.csv.gz``
(train loss, train accuracy and test accuracy of every evaluated round) and ``cpu.csv`` (CPU
seconds of each command, from ``/usr/bin/time``); from the ledger it prints and writes
``summary.csv``: per candidate and method, over seeds (mean [min-max]),

* the training loss, train accuracy and test accuracy averaged over the last 10 % of the
  rounds (``*_tail``: one evaluation is noisy under 10 % participation),
* the training loss averaged over every evaluated round after 0 (``loss_area``: the speed of
  fitting, early slowness counts),
* the first evaluated round with train accuracy >= 90 / 95 / 98 % (inf: never),

and the premise, by ``reproduce.fedlada_common.localadam_premise`` (the definition the
entries' regime cards use): LocalAdam fits fastest (lowest ``loss_area`` and lowest tail
training loss among the methods run) and generalises worse (tail test accuracy below FedAvg's
by at least the seed spread and at least 0.5 points; above by as much: above; else a tie).
``--horizons ID`` reads the same premise on one candidate's curves cut at each evaluated round
(``by_horizon``): at which round it would first hold and whether it stays.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
from pathlib import Path

import sys

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
from reproduce.fedlada_common import localadam_premise  # noqa: E402
METRICS = ("train_loss", "train_acc", "test_acc")

#: candidate id -> result directories (relative to --runs), joined by "+"; ``DIR:RUN,...``
#: takes only those runs of DIR (a run shared with another candidate: FedAvg does not depend
#: on the weight-decay reading)
CANDIDATES = {
    "A1": "A1-w1024-dec",
    "B1": "B1-sub100-w1024-cpl",
    "C1": "C1-w1024-dec-T100",
    "D1": "D1-sub100-b10-w1024-cpl-T100",
    "E1": "E1-sub100-b10-w256-dec-T300",
    "F1": "F1-sub100-b10-w256d3-dec-T150",
    "H1": "H1-w128d6-dec-T100",
    "H2": "H2-sub100-b10-w128d6-dec-T150",
    "I1": "I1-sub100-b10-ln256d2-cpl-T150",
    "J1": "J1-sub100-b10-w256-dec-T150-dir100",
    "K1": "K1-ln256d2-cpl-T100",
    "M1": "M1-w256-dec-T100+M1s1-w256-dec-T100",
    "P1": "P1-sub300-b30-w256-dec-T150",
    "Q1": "Q1-w256-dec-T300",
    "N1": "N1-mnistsub-b4-w256-dec-T150",
    "S1": "S1-mnistsub-b4-ln256d2-cpl-T150",
    # CNNs: FedLADA Fig. 7's LeNet (coupled; decoupled LocalAdam beside U1's FedAvg), the
    # LeNet with GroupNorm after each convolution (``lenet-gn``) and a ResNet-18-GN of width 16
    # (torchvision stem, the paper's crop), the paper's net narrowed, on the MNIST subset at
    # batch 4 (W1) and on Fashion-MNIST clients of 500 images at the paper's batch 50 (X1)
    "U1": "U1-mnistsub-b4-lenet-cpl-T60",
    "U2": "U1-mnistsub-b4-lenet-cpl-T60:fedavg+U2-mnistsub-b4-lenet-dec-T60",
    "V1": "V1-mnistsub-b4-lenetgn-dec-T60",
    "W1": "W1-mnistsub-b4-r18gn-w16-dec-T60",
    "X1": "X1-sub120-b50-r18gn-w16-dec-T30",
    # X1 at 150 rounds, the decay reaching 0.05 at the horizon (0.9802 a round)
    "X2": "X2-sub120-b50-r18gn-w16-dec-T150",
    # X2 with LocalAdam's local rate at 3e-3 (the paper's 1e-3; ``--lr-of``, a rate outside
    # Sec. 4.1's protocol): LocalAdam run anew, FedAvg X2's saved run (reused, not recomputed)
    "X3": "X3-sub120-b50-r18gn-w16-dec-T150-la3e-3",
    # the bracket's other side: LocalAdam at 3e-4, FedAvg X2's saved run again
    "X4": "X4-sub120-b50-r18gn-w16-dec-T150-la3e-4",
    "T1": "T1-lenet-timing-fmnist",
    "T2": "T2-lenet-timing-mnistsub",
    # label noise (label_noise.py): 30 % of the training labels moved to another class
    "L1": "L1-noise30-w256-dec-T100",
    "L2": "L2-noise30-w1024-dec-T100",
}


def collect(runs: str, candidates=None) -> None:
    """Rebuild the ledger from the run directories under ``runs``; ``candidates`` (ids):
    replace just those candidates' rows and keep every other candidate's (whose run
    directories are gone)."""
    frames, cpu = [], []
    for cand, dirs in CANDIDATES.items():
        if candidates and cand not in candidates:
            continue
        seen = {}
        for spec in dirs.split("+"):
            d, _, only = spec.partition(":")
            for j in sorted(glob.glob(os.path.join(runs, d, "**", "*.json"), recursive=True)):
                rec = json.load(open(j))
                if "table" not in rec or (only and rec["run"] not in only.split(",")):
                    continue
                df = pd.read_csv(os.path.join(os.path.dirname(j), rec["table"]["file"]))
                df = df[df.metric.isin(METRICS)][["run", "seed", "round", "metric", "value"]]
                for key in {(rec["run"], s) for s in df.seed.unique()}:
                    if key in seen:
                        sys.exit(f"summarize: candidate {cand}: run {key[0]} seed {key[1]} "
                                 f"in both {seen[key]} and {j}; keep one")
                    seen[key] = j
                df.insert(0, "candidate", cand)
                df["value"] = df["value"].round(5)
                frames.append(df)
            log = os.path.join(runs, "logs", d + ".log")
            if os.path.exists(log) and not only:
                text = open(log).read()
                m = re.search(r"TIME ([\d.]+) s wall ([\d.]+) user ([\d.]+) sys", text)
                cmd = re.search(r"CMD: (.*)", text)
                if m:
                    flag = lambda name, default: re.search(rf"--{name} (\S+)", cmd[1])[1] \
                        if re.search(rf"--{name} (\S+)", cmd[1]) else default
                    # runs reused from a saved result cost nothing here ("reused N saved run")
                    reused = re.search(r"reused (\d+) saved run", text)
                    n_runs = len(flag("methods", "").split(",")) - (int(reused[1]) if reused else 0)
                    work = n_runs * int(flag("seeds", 2)) * int(flag("rounds", 150))
                    cpu.append({"candidate": cand, "dir": d, "wall_s": float(m[1]),
                                "cpu_s": float(m[2]) + float(m[3]), "replica_rounds": work,
                                "command": cmd[1]})
    curves, cpu = pd.concat(frames), pd.DataFrame(cpu)
    if candidates:
        old_curves, old_cpu = pd.read_csv(HERE / "curves.csv.gz"), pd.read_csv(HERE / "cpu.csv")
        curves = pd.concat([old_curves[~old_curves.candidate.isin(candidates)], curves])
        cpu = pd.concat([old_cpu[~old_cpu.candidate.isin(candidates)], cpu])
    curves.to_csv(HERE / "curves.csv.gz", index=False)
    cpu.to_csv(HERE / "cpu.csv", index=False)


def first_reach(g: pd.DataFrame, target: float) -> float:
    hit = g[g.value >= target]
    return float(hit["round"].min()) if len(hit) else math.inf


def summarise() -> pd.DataFrame:
    curves = pd.read_csv(HERE / "curves.csv.gz")
    cpu = pd.read_csv(HERE / "cpu.csv")
    rows = []
    for (cand, run), g in curves.groupby(["candidate", "run"], sort=False):
        T = int(g["round"].max())
        r = {"candidate": cand, "method": run, "rounds": T, "seeds": g.seed.nunique()}
        for metric in METRICS:
            tail = g[(g.metric == metric) & (g["round"] > 0.9 * T)].groupby("seed").value.mean()
            r[f"{metric}_tail"], r[f"{metric}_tail_min"], r[f"{metric}_tail_max"] = \
                tail.mean(), tail.min(), tail.max()
        area = g[(g.metric == "train_loss") & (g["round"] > 0)].groupby("seed").value.mean()
        r["loss_area"], r["loss_area_min"], r["loss_area_max"] = area.mean(), area.min(), area.max()
        acc = g[g.metric == "train_acc"]
        for t in (90, 95, 98):
            r[f"r{t}"] = ";".join(f"{first_reach(s, t / 100):g}" for _, s in acc.groupby("seed"))
        rows.append(r)
    out = pd.DataFrame(rows)
    per = cpu.groupby("candidate")[["cpu_s", "replica_rounds"]].sum()
    out["cpu_s_per_replica_round"] = out.candidate.map(per.cpu_s / per.replica_rounds)
    verdict = {}
    for cand, g in curves.groupby("candidate", sort=False):
        p = localadam_premise(g)          # the entries' definition (reproduce.fedlada_common)
        if p is not None:
            verdict[cand] = (p.fits, p.test, p.holds)
    out = out[out.candidate.isin(verdict)].copy()
    out["localadam_fits_fastest"] = out.candidate.map(lambda c: verdict[c][0])
    out["localadam_test_vs_fedavg"] = out.candidate.map(lambda c: verdict[c][1])
    out["premise"] = out.candidate.map(lambda c: verdict[c][2])
    return out


def by_horizon(curves: pd.DataFrame) -> pd.DataFrame:
    """The premise read on one candidate's curves cut at each evaluated round ``t`` > 0: the
    loss area over rounds 1..t, the tail over the last 10 % of t (the definition of
    ``localadam_premise``, unchanged). A cut is not a run of horizon ``t``: the rate follows the
    run's own schedule. One row per ``t``: each method's loss area and tail loss, FedAvg's tail
    test accuracy minus LocalAdam's (``gap``, positive: LocalAdam below), the bar, the labels."""
    rows = []
    for t in sorted(r for r in curves["round"].unique() if r > 0):
        p = localadam_premise(curves[curves["round"] <= t])
        if p is None:
            return pd.DataFrame()
        rows.append({"round": int(t),
                     **{f"area_{m}": v for m, v in p.area.items()},
                     **{f"tail_{m}": v for m, v in p.tail_loss.items()},
                     "gap": p.gap, "bar": p.spread, "fits": p.fits, "test": p.test,
                     "holds": p.holds})
    return pd.DataFrame(rows)


def fmt(r, key, pct=False):
    m, lo, hi = r[key], r[key + "_min"], r[key + "_max"]
    s = 100 if pct else 1
    d = 1 if pct else 3
    return f"{s * m:.{d}f}" + (f" [{s * lo:.{d}f}-{s * hi:.{d}f}]" if hi > lo else "")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", help="directory of the search's result directories and logs/")
    ap.add_argument("--only", help="with --runs: these candidates only (comma-separated), "
                                   "the others kept from the ledger")
    ap.add_argument("--horizons", metavar="ID",
                    help="print the premise of candidate ID read at each evaluated round")
    args = ap.parse_args()
    if args.horizons:
        curves = pd.read_csv(HERE / "curves.csv.gz")
        if args.horizons not in set(curves.candidate):
            ap.error(f"--horizons: no candidate {args.horizons!r} in the ledger")
        h = by_horizon(curves[curves.candidate == args.horizons])
        if h.empty:
            ap.error(f"--horizons: candidate {args.horizons!r} lacks FedAvg or LocalAdam")
        print(h.round(4).to_string(index=False))
        sys.exit(0)
    if args.runs:
        collect(args.runs, set(args.only.split(",")) if args.only else None)
    out = summarise()
    out.round(5).to_csv(HERE / "summary.csv", index=False)
    for cand, d in out.groupby("candidate", sort=False):
        first = d.iloc[0]
        print(f"{cand}: T={first.rounds}, seeds={first.seeds}, "
              f"{first.cpu_s_per_replica_round:.2f} CPU s per replica-round; LocalAdam fits "
              f"fastest: {first.localadam_fits_fastest}; test vs FedAvg: "
              f"{first.localadam_test_vs_fedavg}; premise: {first.premise}")
        for _, r in d.iterrows():
            print(f"   {r.method:10s} loss {fmt(r, 'train_loss_tail')}  area {fmt(r, 'loss_area')}"
                  f"  train {fmt(r, 'train_acc_tail', True)}  test {fmt(r, 'test_acc_tail', True)}"
                  f"  r90 {r.r90}  r95 {r.r95}  r98 {r.r98}")
