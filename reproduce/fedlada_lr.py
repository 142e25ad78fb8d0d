"""FedLADA stand-in: the learning-rate pilot behind :data:`reproduce.fedlada_common.CPU_LR`.

The paper tuned ``eta_l`` (and ``eta_g``, ``K``, participation) per method and reports "the
best-performing" (Sec. 4.1); its rates are for ResNet-18 on CIFAR. On the stand-in each of
the seven methods sweeps its local rate over three values around the paper's (x0.3, x1, x3, x10;
FedAdam at the paper's ``eta_g = 0.1``), everything else as in Figure 2, and the sweep API's
``final-acc`` rule (FedLADA Sec. 4: best final test accuracy) picks one per method. The CPU
default is a pilot: 1 seed, 40 rounds; ``--seeds``/``--rounds`` to tune harder.
"""
from __future__ import annotations

import sys

from dataclasses import dataclass

import matplotlib.pyplot as plt

from sims.experiments.sweep import Axis, Grid

from . import common, plotting
from . import fedlada_common as fc
from . import fedlada_cost as fcost
from . import protocols
from .sweeps import sweep_run

PAPER, TARGET = "FedLADA", "learning-rate pilot (stand-in)"
TITLE = "each method's local learning rate x0.3 / x1 / x3 / x10 around the paper's, best final test acc"
DEFAULT_COST = "about 4 min (28 grid points, 1 seed, 40 rounds, 784-50-10 MLP on Fashion-MNIST)"

FACTORS = (0.3, 1.0, 3.0, 10.0)


#: A pilot of the stand-in's rates: it checks no claim of the paper.
CLAIMS: dict = {}
#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_lr",)

@dataclass
class Config(fc.StandIn):
    seeds: int = 1
    rounds: int = 40
    paper_lr: bool = True            # the grid is centred on the paper's rates
    methods: str = ",".join(fc.METHODS)

    def scale(self):
        fc.StandIn.scale(self)


def grid(cfg) -> Grid:
    methods = fc.methods(cfg)
    algs, axes = {}, []
    for m in methods:
        hp = fc.hyper(m, cfg)
        centre = hp.pop("eta_l")
        algs[m] = hp
        axes.append(Axis("eta_l", tuple(float(f"{centre * f:.6g}") for f in FACTORS), m))
    return Grid(algs, axes)


def runs(cfg):
    return [sweep_run("lr-pilot", grid(cfg), fc.problem_desc(cfg), fc.build_problem,
                      fc.participation_text(cfg), eval_every=cfg.eval_every)]


def plot(df, cfg):
    summary = protocols.select(df, "final-acc")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for alg, g in summary.groupby("algorithm", sort=False):
        ax.plot(g["eta_l"], 100 * g["score"], "o-", label=fc.label(alg))
    ax.set_xscale("log")
    ax.set_xlabel("local learning rate eta_l")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title(f"FedLADA stand-in LR pilot: {fc.setting_text(cfg)}", fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    return plotting.save(fig, cfg.figures, "fedlada_lr")


def check(df, cfg):
    summary = protocols.select(df, "final-acc")
    proto = protocols.pilot("x0.3 / x1 / x3 / x10 the paper's local rates, final-acc rule",
                            seeds=cfg.seeds, horizon=cfg.rounds, plotted=cfg.rounds,
                            source="FedLADA Sec. 4.1 ('best-performing')")
    lines = [f"protocol: {proto.describe()} (a pilot; it decides no claim)",
             "pilot (final-acc rule, final test accuracy %, per eta_l):"]
    for alg, g in summary.groupby("algorithm", sort=False):
        vals = ", ".join(f"{r.eta_l:g}: {100 * r.score:.1f}{' *' if r.selected else ''}"
                         for r in g.itertuples())
        lines.append(f"  {fc.label(alg)}: {vals}")
    return lines


def full_work(cfg):
    """One ``(participants, local epochs)`` per grid point (:mod:`reproduce.fedlada_cost`)."""
    return [(fc.participation(cfg).m, fc.epochs(cfg))] * len(grid(cfg).points())

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
