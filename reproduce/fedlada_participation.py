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
from . import fedlada_cost as fcost

PAPER, TARGET = "FedLADA", "Figure 4"
TITLE = "FedLADA at participation 5 / 10 / 20 / 50 %: test accuracy and training loss"
DEFAULT_COST = ("2-4 min with --threads 1 (4 rates x 2 seeds x 100 rounds; 2.2 min measured, "
                "129 s of CPU; 3.9 min under load)")


@dataclass
class Config(fc.StandIn):
    rounds: int = 100
    rates: str = "0.05,0.1,0.2,0.5"

    def scale(self):
        fc.StandIn.scale(self)
        if self.tiny:
            self.rates = "0.1,0.3"


def _floats(text):
    return [float(v) for v in str(text).split(",") if v.strip()]


def runs(cfg):
    out = []
    for p in _floats(cfg.rates):
        def build(p=p):
            return fc.problem(cfg), fc.algorithm("fedlada", cfg), fc.participation(cfg, p)
        out.append(fc.engine_run(f"p{p:g}", {"rate": p}, build, cfg.rounds, cfg.eval_every))
    return out


def plot(df, cfg):
    return fc.plot_varied(
        df, cfg, "rate", lambda p: f"{p:.0%}",
        lambda text: text.replace(f"{cfg.participation:.0%} a round", "participation varied"),
        "FedLADA Fig. 4 stand-in", "fedlada_participation")


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    text = fc.setting_text(cfg).replace(f"{cfg.participation:.0%} a round", "participation varied")
    lines = [f"setting: {text}, {cfg.rounds} rounds"] + notes
    fin = fc.final_by_seed(df, "test_acc")
    sub = df[(df.metric == "test_acc") & (df["round"] > df["round"].max() / 2)]
    late = sub.groupby(["run", "seed"])["value"].mean().groupby("run").agg(["mean", "min", "max"])
    rates = sorted(float(r[1:]) for r in fin.index)
    acc = {p: late.loc[f"p{p:g}", "mean"] for p in rates}
    lines.append("final test accuracy %: " + ", ".join(
        f"{p:.0%}: {fc.pm(fin.loc[f'p{p:g}'])}" for p in rates))
    lines.append("test accuracy % averaged over the second half: " + ", ".join(
        f"{p:.0%}: {fc.pm(late.loc[f'p{p:g}'])}" for p in rates))
    if len(rates) >= 2:
        up = all(acc[a] < acc[b] for a, b in zip(rates, rates[1:]))
        lines.append(f"E8 (accuracy increases with participation) -> "
                     f"{'shows' if up else 'does not show'}")
    if {0.05, 0.1, 0.2, 0.5} <= set(rates):
        g_lo, g_hi = acc[0.1] - acc[0.05], acc[0.5] - acc[0.2]
        lines.append(f"E8 diminishing (gain 20->50 % below gain 5->10 %): {100 * g_hi:+.2f} vs "
                     f"{100 * g_lo:+.2f} points -> {'shows' if g_hi < g_lo else 'does not show'}")
    return lines


def full_work(cfg):
    """One ``(participants, local epochs)`` per rate (:mod:`reproduce.fedlada_cost`)."""
    return [(fc.participation(cfg, r).m, fc.epochs(cfg)) for r in _floats(cfg.rates)]

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
