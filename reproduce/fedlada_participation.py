"""FedLADA Figure 4: FedLADA's test accuracy and training loss at participation 5 %, 10 %,
20 % and 50 % (S = 5, 10, 20, 50 of 100 clients; the paper: CIFAR-10, other settings
default).

Setup as Figure 2 (:mod:`reproduce.fedlada_common`). Claim (spec 4, E8): higher participation
improves FedLADA, with diminishing gains near 50 %: the final test accuracy increases with
the rate, and the gain from 20 % to 50 % is below the gain from 5 % to 10 %. Accuracy is
read as the test accuracy averaged over the second half of the run's evaluations (single
evaluations swing by 1-3 points at 5 %); the final values are printed too.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass


from . import common
from . import fedlada_common as fc
from . import verdicts as vd
from . import fedlada_cost as fcost
from . import fedlada_tuning as ft

PAPER, TARGET = "FedLADA", "Figure 4"
TITLE = "FedLADA at participation 5 / 10 / 20 / 50 %: test accuracy and training loss"
DEFAULT_COST = ("3-5 min with --threads 1 (4 rates x 2 seeds x 100 rounds, evaluated every "
                "round on the full test set: about 165 s of CPU, half the committed --paper-lr "
                "--tuned run's 325 s)")


@dataclass
class Config(fc.StandIn):
    rounds: int = 100
    rates: str = "0.05,0.1,0.2,0.5"
    eval_every: int = 1              # every round on the full test set (issue: rounds are read
    test_samples: int = 0            # from the curves; about +50 % CPU a round: docs)

    def scale(self):
        fc.StandIn.scale(self)
        if self.tiny:
            self.rates = "0.1,0.3"


METHODS = ("fedlada",)


def make(cfg):
    """``hyper -> runs`` (:func:`reproduce.fedlada_tuning.protocol_runs`): FedLADA at each
    participation rate, at ``hyper``'s settings."""
    def build_runs(hyper):
        out = []
        hp = hyper("fedlada")
        for p in common.flag_values(cfg, "rates", float):
            def build(p=p):
                return (fc.problem(cfg), fc.make_algorithm("fedlada", **hp),
                        fc.participation(cfg, p))
            out.append(fc.engine_run(f"p{p:g}", {"rate": p, **hp}, build, cfg.rounds,
                                     cfg.eval_every))
        return out
    return build_runs


def runs(cfg):
    return ft.protocol_runs(cfg, make(cfg), METHODS)


def plot(df, cfg):
    return ft.plot_both(df, cfg, ft.aliases(cfg, make(cfg), METHODS), lambda d, stem, proto:
                        fc.plot_varied(d, cfg, "rate", lambda p: f"{p:.0%}",
                                       lambda text: text.replace(
                                           f"{cfg.participation:.0%} a round",
                                           "participation varied"),
                                       f"FedLADA Fig. 4 stand-in, {proto}", stem),
                        "fedlada_participation")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_participation", "fedlada_participation_tuned")
CLAIMS = vd.claims(
    vd.Claim("E8", "FedLADA", "higher participation (5 -> 10 -> 20 -> 50 %) improves FedLADA, "
             "with diminishing gains near 50 %", "every", "Fig. 4; spec 4 E8"),
)


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    text = fc.setting_text(cfg).replace(f"{cfg.participation:.0%} a round", "participation varied")
    lines = [f"setting: {text}, {cfg.rounds} rounds"] + notes
    return lines + ft.check_both(cfg, df, ft.aliases(cfg, make(cfg), METHODS),
                                 lambda d, proto, scope: _claims(d, cfg, proto, scope), METHODS)


def _claims(df, cfg, proto, scope=""):
    """E8 on one protocol's runs (``scope``: the tuned protocol's)."""
    lines = []
    fin = fc.final_by_seed(df, "test_acc")
    rates = sorted(float(r[1:]) for r in fin.index)
    half = df["round"].max() / 2
    late = {p: vd.per_seed(df[df["round"] > half], "test_acc", "mean", run=f"p{p:g}")
            for p in rates}
    lines.append("final test accuracy %: " + ", ".join(
        f"{p:.0%}: {fc.pm(fin.loc[f'p{p:g}'])}" for p in rates))
    lines.append("test accuracy % averaged over the second half: " + ", ".join(
        f"{p:.0%}: {100 * late[p].mean():.1f} [{100 * late[p].min():.1f}-"
        f"{100 * late[p].max():.1f}]" for p in rates))
    C = CLAIMS["E8"]
    card = fc.card(cfg, df, clients=False).plus(*proto.card_items())
    parts = []
    if len(rates) >= 2:
        parts.append(vd.ordering(C, [(f"{p:.0%}", late[p]) for p in reversed(rates)],
                                 margin=fc.MARGIN, unit="pp", scale=100,
                                 what="second-half test accuracy increases with participation"))
    if {0.05, 0.1, 0.2, 0.5} <= set(rates):
        gain = (late[0.5] - late[0.2]) - (late[0.1] - late[0.05])
        parts.append(vd.exceeds(C, gain, 0.0, direction=-1, unit="pp", scale=100,
                                what="gain 20->50 % minus gain 5->10 % (diminishing: below 0)"))
    out = (vd.every(C, parts, what="participation helps, diminishing", card=card, protocol=proto,
                    scope=scope)
           if parts else vd.missing(C, "participation", "fewer than 2 rates", scope=scope))
    return lines + ["", out]


def full_work(cfg):
    """One ``(participants, local epochs)`` per rate (:mod:`reproduce.fedlada_cost`)."""
    return [(fc.participation(cfg, r).m, fc.epochs(cfg))
            for r in common.flag_values(cfg, "rates", float)]

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
