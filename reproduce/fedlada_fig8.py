"""FedLADA Figure 8(b, c) and Table 10: FedLADA's alpha against SCAFFOLD (test accuracy and
the consistency term ``E||x_{i,K} - x^{t+1}||^2`` recorded every round), and SCAFFOLD with
its correction scaled by alpha (App. C.2, Eq. 26).

Setup as Figure 2 (:mod:`reproduce.fedlada_common`; the paper: CIFAR-10 Dir-0.6, ``eta_g =
1``, so ``x^{t+1}`` is the clients' mean end model). The figure's alpha values are not stated
(spec 5.17): FedLADA at ``alpha in {0.05, 0.1, 0.3, 0.5}``; Table 10's grid ``{0, 0.25, ...,
1.5}`` for SCAFFOLD-alpha (0 = FedAvg, 1 = SCAFFOLD). The consistency term is
:class:`sims.experiments.probes.consistency.TrackConsistency`'s metric ``consistency``.

Claims (spec 4): E10 -- for small alpha FedLADA's test accuracy exceeds SCAFFOLD's and its
consistency term is smaller, growing with alpha; E11 -- SCAFFOLD-alpha's accuracy peaks at
alpha = 1 (Table 10: 78.32 / 80.74 / 81.09 / 81.72 / 81.77 / 81.05 / 80.62).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from . import common, plotting
from . import fedlada_common as fc
from . import verdicts as vd
from . import fedlada_cost as fcost
from . import fedlada_tuning as ft

PAPER, TARGET = "FedLADA", "Figure 8(b,c), Table 10"
TITLE = "FedLADA's alpha vs SCAFFOLD: test accuracy and consistency term; SCAFFOLD-alpha"
DEFAULT_COST = ("3.3-5.0 min measured with --threads 1 (11 runs x 2 seeds x 80 rounds, 784-50-10 "
                "MLP on Fashion-MNIST; 134-178 s of CPU, the rest waiting on the shared 2 cores)")

PAPER_T10 = {0.0: 78.32, 0.25: 80.74, 0.5: 81.09, 0.75: 81.72, 1.0: 81.77, 1.25: 81.05,
             1.5: 80.62}


@dataclass
class Config(fc.StandIn):
    rounds: int = 80
    alphas: str = "0.05,0.1,0.3,0.5"
    scaffold_alphas: str = "0,0.25,0.5,0.75,1,1.25,1.5"

    def scale(self):
        fc.StandIn.scale(self)
        if self.tiny:
            self.alphas, self.scaffold_alphas = "0.1,0.5", "0,1"


METHODS = ("fedlada", "scaffold")


def make(cfg):
    """``hyper -> runs`` (:func:`reproduce.fedlada_tuning.protocol_runs`): FedLADA at each
    alpha, SCAFFOLD-alpha at each scale, each at ``hyper``'s settings."""
    def build_runs(hyper):
        out = []
        for method, name in (("fedlada", "alphas"), ("scaffold", "scaffold_alphas")):
            for a in common.flag_values(cfg, name, float):
                hp = hyper(method, alpha=a)

                def build(method=method, hp=hp):
                    return (fc.problem(cfg), fc.make_algorithm(method, **hp),
                            fc.participation(cfg))
                out.append(fc.engine_run(f"{method}_a{a:g}", {"method": method, **hp},
                                         build, cfg.rounds, cfg.eval_every))
        return out
    return build_runs


def runs(cfg):
    return ft.protocol_runs(cfg, make(cfg), METHODS)


def _label(run):
    method, a = run.split("_a")
    return f"{fc.label(method)} alpha={a}"


def plot(df, cfg):
    plain, tuned = ft.split_protocols(df, ft.aliases(cfg, make(cfg), METHODS))
    paths = [_plot(plain, cfg, "fedlada_fig8", f"{fc.protocol(cfg).kind} protocol")]
    if len(tuned):
        paths.append(_plot(tuned, cfg, "fedlada_fig8_tuned", "tuned protocol (fedlada_fig2's "
                           "picks)"))
    return [p for group in paths for p in group]


def _plot(df, cfg, stem, protocol):
    df = common.healthy(df)
    lada = df[df.method == "fedlada"]
    sc1 = df[(df.method == "scaffold") & (df.alpha == 1.0)]
    sca = df[df.method == "scaffold"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    n = lada["run"].nunique()
    for ax, metric, ylabel, logy in ((axes[0], "test_acc", "test accuracy", False),
                                     (axes[1], "consistency", "consistency term", True)):
        plotting.band_plot(ax, lada, metric, "run", logy=logy, label=_label,
                           palette=sns.color_palette("viridis", n))
        if len(sc1):
            plotting.band_plot(ax, sc1, metric, "run", logy=logy, label=_label,
                               palette=["tab:red"], linestyle="--")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fc.zoom_accuracy(axes[0], df, "test_acc")
    axes[0].set_title("(b) test accuracy")
    axes[1].set_title("(c) E||x_{i,K} - x^{t+1}||^2 each round")
    if len(sca):
        fin = fc.final_by_seed(sca, "test_acc")
        alphas = [float(r.split("_a")[1]) for r in fin.index]
        order = np.argsort(alphas)
        a = np.asarray(alphas)[order]
        axes[2].errorbar(a, 100 * fin["mean"].to_numpy()[order],
                         yerr=[100 * (fin["mean"] - fin["min"]).to_numpy()[order],
                               100 * (fin["max"] - fin["mean"]).to_numpy()[order]],
                         fmt="o-", capsize=3, label="stand-in (seed range)")
        ax2 = axes[2].twinx()
        ax2.plot(list(PAPER_T10), list(PAPER_T10.values()), "s:", color="gray",
                 label="paper, CIFAR-10 (right axis)")
        ax2.set_ylabel("paper accuracy (%)", color="gray")
        axes[2].set_xlabel("SCAFFOLD correction scale alpha")
        axes[2].set_ylabel("final test accuracy (%)")
        axes[2].set_title("Table 10: SCAFFOLD-alpha")
        axes[2].legend(fontsize=7, loc="lower left")
        ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"FedLADA Fig. 8 / Table 10 stand-in, {protocol}: {fc.setting_text(cfg)}, "
                 f"{cfg.rounds} rounds (mean, band = seed range)", fontsize=9, y=1.02)
    return plotting.save(fig, cfg.figures, stem)


def _mean_consistency(df, run):
    sub = df[(df.run == run) & (df.metric == "consistency")]
    per_seed = sub.groupby("seed")["value"].mean()
    return per_seed.mean(), per_seed.min(), per_seed.max()


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_fig8", "fedlada_fig8_tuned")
CLAIMS = vd.claims(
    vd.Claim("E10", "FedLADA", "for small alpha FedLADA's test accuracy exceeds SCAFFOLD's, and "
             "its consistency term is smaller and grows with alpha", "every",
             "Fig. 8(b, c); spec 4 E10"),
    vd.Claim("E11", "FedLADA", "scaling SCAFFOLD's correction by alpha peaks at alpha = 1 "
             "(78.32 / 80.74 / 81.09 / 81.72 / 81.77 / 81.05 / 80.62)", "every",
             "Table 10; spec 4 E11"),
)


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    lines = [f"setting: {fc.setting_text(cfg)}, {cfg.rounds} rounds"] + notes
    alias = ft.aliases(cfg, make(cfg), METHODS)
    return lines + ft.check_both(cfg, df, alias,
                                 lambda d, proto, scope: _claims(d, cfg, proto, scope), METHODS)


def _claims(df, cfg, proto, scope=""):
    """The table and E10 / E11 on one protocol's runs (``scope``: the tuned protocol's)."""
    lines = []
    fin = fc.final_by_seed(df, "test_acc")
    have = set(fin.index)
    lines += ["| run | final test acc % [seeds] | mean consistency term [seeds] |",
              "|---|---|---|"]
    for run in fin.index:
        c = _mean_consistency(df, run)
        lines.append(f"| {_label(run)} | {fc.pm(fin.loc[run])} | {c[0]:.4g} "
                     f"[{c[1]:.4g}-{c[2]:.4g}] |")
    card = fc.card(cfg, df).plus(*proto.card_items())
    acc = lambda r: vd.per_seed(df, "test_acc", run=r)  # noqa: E731
    cons = lambda r: vd.per_seed(df, "consistency", "mean", run=r)  # noqa: E731
    out = []
    lada = sorted((float(r.split("_a")[1]), r) for r in have if r.startswith("fedlada_a"))
    if lada and "scaffold_a1" in have:
        small_a, small = lada[0]
        parts = [vd.above(CLAIMS["E10"], acc(small), acc("scaffold_a1"), margin=fc.MARGIN,
                          unit="pp", scale=100,
                          what=f"FedLADA alpha={small_a:g} above SCAFFOLD (final test acc)"),
                 vd.above(CLAIMS["E10"], cons(small), cons("scaffold_a1"), lower_is_better=True,
                          what=f"FedLADA alpha={small_a:g}'s consistency term below SCAFFOLD's "
                               "(mean over rounds)")]
        if len(lada) >= 2:
            parts.append(vd.ordering(CLAIMS["E10"], [(f"alpha {a:g}", cons(r)) for a, r in lada],
                                     lower_is_better=True,
                                     what="consistency term grows with alpha"))
        out.append(vd.every(CLAIMS["E10"], parts, what="small alpha: above SCAFFOLD, smaller "
                            "consistency term growing with alpha", card=card, protocol=proto,
                            scope=scope))
    else:
        out.append(vd.missing(CLAIMS["E10"], "FedLADA against SCAFFOLD", scope=scope))
    sca = sorted((float(r.split("_a")[1]), r) for r in have if r.startswith("scaffold_a"))
    if len(sca) >= 3 and any(a == 1.0 for a, _ in sca):
        lines.append(f"E11 paper Table 10: {' / '.join(f'{v:.2f}' for v in PAPER_T10.values())}")
        parts = [vd.above(CLAIMS["E11"], acc("scaffold_a1"), acc(r), margin=fc.MARGIN,
                          unit="pp", scale=100, what=f"alpha 1 above alpha {a:g}")
                 for a, r in sca if a != 1.0]
        out.append(vd.every(CLAIMS["E11"], parts, what="SCAFFOLD-alpha peaks at alpha = 1",
                            card=card, protocol=proto, scope=scope))
    else:
        out.append(vd.missing(CLAIMS["E11"], "SCAFFOLD-alpha peak",
                              "fewer than 3 SCAFFOLD alphas, or no alpha = 1", scope=scope))
    return lines + [""] + out


def full_work(cfg):
    """One ``(participants, local epochs)`` per run (:mod:`reproduce.fedlada_cost`)."""
    n = (len(common.flag_values(cfg, "alphas", float))
         + len(common.flag_values(cfg, "scaffold_alphas", float)))
    return [(fc.participation(cfg).m, fc.epochs(cfg))] * n

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
