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
from . import verdicts as vd

PAPER, TARGET = "FedLADA", "Figure 1"
TITLE = "FedAvg vs FedAdam vs LocalAdam: test accuracy and training loss"
DEFAULT_COST = ("1-3 min with --threads 1 (3 methods x 2 seeds x 150 rounds; 1.3 min measured, "
                "78 s of CPU)")


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


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_fig1",)
CLAIMS = vd.claims(
    vd.Claim("F1a", "FedLADA", "LocalAdam drives the training loss down fastest of FedAvg, "
             "FedAdam and LocalAdam", "above", "Fig. 1, Sec. 1"),
    vd.Claim("F1b", "FedLADA", "FedAdam is very slow (the highest training loss)", "above",
             "Fig. 1, Sec. 1"),
    vd.Claim("F1c", "FedLADA", "LocalAdam generalises worse than its training loss suggests: "
             "lower training loss than FedAvg, lower test accuracy", "every", "Fig. 1, Sec. 1"),
)


def check(df, cfg):
    missing = common.missing_runs(sys.modules[__name__], cfg, df)
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    lines = [f"setting: {fc.setting_text(cfg)}"] + notes
    if missing:
        return lines + [vd.missing(c, c.statement) for c in CLAIMS.values()]
    loss = fc.final_by_seed(df, "train_loss")
    acc = fc.final_by_seed(df, "test_acc")
    lines.append("final training loss: " + ", ".join(
        f"{fc.label(m)} {fc.pm(loss.loc[m], 1, 4)}" for m in loss.index))
    lines.append("final test accuracy %: " + ", ".join(
        f"{fc.label(m)} {fc.pm(acc.loc[m])}" for m in acc.index))
    # speed of training: the training loss averaged over every evaluated round (the area
    # under the curve / rounds), so early slowness counts, not only where a run ends
    area = {m: fc.seeds_of(df, m, "train_loss", "mean") for m in df["run"].unique()}
    proto = fc.protocol(cfg)
    # Fig. 1's claims are the premise itself (fedlada_common.localadam_premise): decided on
    # the run, the premise items shown on their card for information, never a gate
    prem = fc.localadam_premise(df)
    if prem is not None:
        lines.append(prem.text())
    card = fc.card(cfg, df).plus(*proto.card_items())
    C, others = CLAIMS, [m for m in ("fedavg", "fedadam") if m in area]
    out = [vd.every(C["F1a"], [vd.above(C["F1a"], area["localadam"], area[m],
                                        lower_is_better=True,
                                        what=f"LocalAdam below {fc.label(m)} (training loss "
                                             "averaged over rounds)") for m in others],
                    what="LocalAdam trains fastest", card=card, protocol=proto),
           vd.every(C["F1b"], [vd.above(C["F1b"], area["fedadam"], area[m],
                                        what=f"FedAdam above {fc.label(m)} (training loss "
                                             "averaged over rounds)")
                               for m in ("fedavg", "localadam")],
                    what="FedAdam trains slowest", card=card, protocol=proto),
           vd.every(C["F1c"], [
               vd.above(C["F1c"], fc.seeds_of(df, "localadam", "train_loss"),
                        fc.seeds_of(df, "fedavg", "train_loss"), lower_is_better=True,
                        what="LocalAdam's final training loss below FedAvg's"),
               vd.above(C["F1c"], fc.seeds_of(df, "fedavg", "test_acc"),
                        fc.seeds_of(df, "localadam", "test_acc"), margin=fc.MARGIN,
                        unit="pp", scale=100,
                        what="FedAvg's final test accuracy above LocalAdam's")],
               what="LocalAdam generalises worse", card=card, protocol=proto)]
    return lines + out


def full_work(cfg):
    return fig2.full_work(cfg)

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
