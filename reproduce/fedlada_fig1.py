"""FedLADA Figure 1: FedAvg, FedAdam and LocalAdam -- test accuracy and training loss.

The paper's motivating figure (CIFAR-100, default setup): LocalAdam drives the training loss
down fastest, FedAdam is very slow, and LocalAdam generalises worse than its training loss
suggests. It is :mod:`reproduce.fedlada_fig2` restricted to those three methods (same flags,
stand-in and ``--full`` paper scale; ``--dataset cifar100 --local-epochs 2`` for the paper's
dataset), with the figure's own claims checked.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import common
from . import fedlada_common as fc
from . import fedlada_cost as fcost
from . import fedlada_fig2 as fig2

PAPER, TARGET = "FedLADA", "Figure 1"
TITLE = "FedAvg vs FedAdam vs LocalAdam: test accuracy and training loss"
DEFAULT_COST = ("1-3 min with --threads 1 (3 methods x 2 seeds x 150 rounds; 1.0 min measured, "
                "58 s of CPU)")


@dataclass
class Config(fig2.Config):
    methods: str = "fedavg,fedadam,localadam"

    def scale(self):
        fig2.Config.scale(self)
        if self.full:                    # the paper's Fig. 1: CIFAR-100, 2 local epochs
            self.dataset, self.local_epochs = "cifar100", 2


runs = fig2.runs


def plot(df, cfg):
    return fig2.plot(df, cfg, stem="fedlada_fig1", figure="Figure 1")


def check(df, cfg):
    missing = common.missing_runs(sys.modules[__name__], cfg, df)
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    lines = [f"setting: {fc.setting_text(cfg)}"] + notes
    if missing:
        return lines
    loss = fc.final_by_seed(df, "train_loss")
    acc = fc.final_by_seed(df, "test_acc")
    lines.append("final training loss: " + ", ".join(
        f"{fc.label(m)} {fc.pm(loss.loc[m], 1, 4)}" for m in loss.index))
    lines.append("final test accuracy %: " + ", ".join(
        f"{fc.label(m)} {fc.pm(acc.loc[m])}" for m in acc.index))
    # speed of training: the training loss averaged over every evaluated round (the area
    # under the curve / rounds), so early slowness counts, not only where a run ends
    sub = df[df.metric == "train_loss"]
    area = sub.groupby(["run", "seed"])["value"].mean().groupby("run").agg(["mean", "min", "max"])
    lines.append("training loss averaged over the rounds: " + ", ".join(
        f"{fc.label(m)} {fc.pm(area.loc[m], 1, 4)}" for m in area.index))
    fastest = area["mean"].idxmin()
    lines.append(f"LocalAdam trains fastest (lowest average training loss): lowest is "
                 f"{fc.label(fastest)} -> {'shows' if fastest == 'localadam' else 'does not show'}")
    slowest = area["mean"].idxmax()
    lines.append(f"FedAdam slowest (highest average training loss): highest is "
                 f"{fc.label(slowest)} -> {'shows' if slowest == 'fedadam' else 'does not show'}")
    gap = acc.loc["localadam", "mean"] < acc.loc["fedavg", "mean"] \
        and loss.loc["localadam", "mean"] < loss.loc["fedavg", "mean"]
    lines.append(f"LocalAdam generalises worse (lower loss than FedAvg yet lower test "
                 f"accuracy) -> {'shows' if gap else 'does not show'}")
    return lines


def full_work(cfg):
    return fig2.full_work(cfg)

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
