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
from . import fedlada_tuning as ft
from . import verdicts as vd

PAPER, TARGET = "FedLADA", "Figure 1"
TITLE = "FedAvg vs FedAdam vs LocalAdam: test accuracy and training loss"
DEFAULT_COST = ("2-4 min with --threads 1 (3 methods x 2 seeds x 150 rounds, evaluated every "
                "round on the full test set: about 120 s of CPU, from the committed --paper-lr "
                "--tuned --seeds 3 run's 296 s for 5 runs x 3 seeds)")


@dataclass
class Config(fig2.Config):
    methods: str = "fedavg,fedadam,localadam"
    eval_every: int = 1              # every round on the full test set (issue: rounds are read
    test_samples: int = 0            # from the curves; about +50 % CPU a round: docs)

    def scale(self):
        fig2.Config.scale(self)
        if self.full:                    # the paper's Fig. 1: CIFAR-100, 2 local epochs
            self.dataset, self.local_epochs = "cifar100", 2


def make(cfg):
    """``hyper -> runs`` (:func:`reproduce.fedlada_tuning.protocol_runs`): one engine run per
    method at ``hyper``'s settings."""
    def build_runs(hyper):
        out = []
        for m in fig2.methods(cfg):
            hp = hyper(m)

            def build(m=m, hp=hp):
                return fc.problem(cfg), fc.make_algorithm(m, **hp), fc.participation(cfg)
            out.append(fc.engine_run(m, {"method": m, **hp}, build, cfg.rounds,
                                     cfg.eval_every))
        return out
    return build_runs


def runs(cfg):
    return ft.protocol_runs(cfg, make(cfg), fig2.methods(cfg))


def plot(df, cfg):
    plain, tuned = ft.split_protocols(df, ft.aliases(cfg, make(cfg), fig2.methods(cfg)))
    paths = [fig2._plot(plain, cfg, "fedlada_fig1", "Figure 1",
                        f"{fc.protocol(cfg).kind} protocol")]
    if len(tuned):
        paths.append(fig2._plot(tuned, cfg, "fedlada_fig1_tuned", "Figure 1",
                                "tuned protocol (fedlada_fig2's picks)"))
    return [p for group in paths for p in group]


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_fig1", "fedlada_fig1_tuned")
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
    alias = ft.aliases(cfg, make(cfg), fig2.methods(cfg))
    return lines + ft.check_both(cfg, df, alias,
                                 lambda d, proto, scope: _claims(d, cfg, proto, scope),
                                 fig2.methods(cfg))


def _claims(df, cfg, proto, scope=""):
    """F1a-c on one protocol's runs (``scope``: the tuned protocol's)."""
    lines = []
    loss = fc.final_by_seed(df, "train_loss")
    acc = fc.final_by_seed(df, "test_acc")
    lines.append("final training loss: " + ", ".join(
        f"{fc.label(m)} {fc.pm(loss.loc[m], 1, 4)}" for m in loss.index))
    lines.append("final test accuracy %: " + ", ".join(
        f"{fc.label(m)} {fc.pm(acc.loc[m])}" for m in acc.index))
    # speed of training: the training loss averaged over every evaluated round (the area
    # under the curve / rounds), so early slowness counts, not only where a run ends
    area = {m: fc.seeds_of(df, m, "train_loss", "mean") for m in df["run"].unique()}
    lines.append("training loss averaged over rounds: " + ", ".join(
        f"{fc.label(m)} {v.mean():.4f}" for m, v in area.items()))
    # Fig. 1's claims are the premise itself (fedlada_common.localadam_premise): decided on
    # the run, the premise items shown on their card for information, never a gate
    prem = fc.localadam_premise(df)
    if prem is not None:
        lines.append(prem.text())
    card = fc.card(cfg, df).plus(*proto.card_items())
    C, others = CLAIMS, [m for m in ("fedavg", "fedadam") if m in area]
    kw = dict(card=card, protocol=proto, scope=scope)
    out = [vd.every(C["F1a"], [vd.above(C["F1a"], area["localadam"], area[m],
                                        lower_is_better=True,
                                        what=f"LocalAdam below {fc.label(m)} (training loss "
                                             "averaged over rounds)") for m in others],
                    what="LocalAdam trains fastest", **kw),
           vd.every(C["F1b"], [vd.above(C["F1b"], area["fedadam"], area[m],
                                        what=f"FedAdam above {fc.label(m)} (training loss "
                                             "averaged over rounds)")
                               for m in ("fedavg", "localadam")],
                    what="FedAdam trains slowest", **kw),
           vd.every(C["F1c"], [
               vd.above(C["F1c"], fc.seeds_of(df, "localadam", "train_loss"),
                        fc.seeds_of(df, "fedavg", "train_loss"), lower_is_better=True,
                        what="LocalAdam's final training loss below FedAvg's"),
               vd.above(C["F1c"], fc.seeds_of(df, "fedavg", "test_acc"),
                        fc.seeds_of(df, "localadam", "test_acc"), margin=fc.MARGIN,
                        unit="pp", scale=100,
                        what="FedAvg's final test accuracy above LocalAdam's")],
               what="LocalAdam generalises worse", **kw)]
    return lines + [""] + out


def full_work(cfg):
    return fig2.full_work(cfg)

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
