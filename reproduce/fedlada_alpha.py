"""FedLADA Table 5 and Figure 5: FedLADA's amended weight alpha, and the amended FedAdam
(FedAdam(*): FedCM's local steps under a server Adam) over alpha and over eta_g.

Setup as Figure 2 (:mod:`reproduce.fedlada_common`; the paper: TinyImageNet). Three sweeps
through the sweep API (:func:`reproduce.sweeps.sweep_run`, resumable cells):

* ``table5`` -- FedLADA at ``alpha in {0.01, 0.05, 0.1, 0.2, 0.5, 1}`` (Table 5's grid; 1 is
  LocalAdam);
* ``fig5a`` -- FedAdam(*) at ``alpha in {0.1, 0.3, 0.5, 0.7, 1}`` with ``eta_g = 0.1``
  (the figure's alpha grid is not stated, spec 5.17; 1 is FedAdam), beside FedCM (alpha 0.1)
  and FedAvg;
* ``fig5b`` -- FedAdam(*) at ``alpha = 0.1`` and ``eta_g in {0.1, 0.01, 0.001, 0.0001}``.

Table 3 (optimizer combinations) is read from the same runs: FedAvg (SGD / SGD), FedCM (SGD
/ SGD+A), FedAdam (Adam / SGD = FedAdam(*) at alpha 1, the same algorithm), FedAdam(*) (Adam /
SGD+A, alpha 0.1), LocalAdam (SGD / Adam = FedLADA at alpha 1) and FedLADA (SGD / Adam+A at the
setting's alpha), as gains over FedAvg.

Claims (spec 4): E6 -- Table 5's accuracy peaks at an interior alpha (paper: 0.05; 29.5 /
41.9 / 40.1 / 38.8 / 36.5 / 34.1); E9 -- lowering alpha below 1 hurts amended FedAdam, no
eta_g brings it to vanilla FedAdam's training speed, while the amendment helps local SGD
(FedCM's gain over FedAvg exceeds FedAdam(*)'s).
"""
from __future__ import annotations

import sys

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from sims.experiments.sweep import Axis, Grid

from . import common, plotting
from . import fedlada_common as fc
from . import fedlada_cost as fcost
from . import verdicts as vd
from .sweeps import sweep_run
from . import fedlada_tuning as ft

PAPER, TARGET = "FedLADA", "Tables 3 and 5, Figure 5"
TITLE = "FedLADA's alpha; amended FedAdam over alpha and eta_g"
DEFAULT_COST = ("3.4-5.5 min measured with --threads 1 (17 grid points x 2 seeds x 70 rounds, "
                "784-50-10 MLP on Fashion-MNIST; 147-244 s of CPU, the rest waiting on the "
                "shared 2 cores)")

PAPER_T3 = {"FedAvg": 34.5, "FedCM": 41.1, "FedAdam": 38.8, "FedAdam(*)": 35.0,
            "LocalAdam": 34.1, "FedLADA": 41.9}
PAPER_T5 = {0.01: 29.5, 0.05: 41.9, 0.1: 40.1, 0.2: 38.8, 0.5: 36.5, 1.0: 34.1}


@dataclass
class Config(fc.StandIn):
    rounds: int = 70
    alphas: str = "0.01,0.05,0.1,0.2,0.5,1"
    cm_alphas: str = "0.1,0.3,0.5,0.7,1"
    etas: str = "0.1,0.01,0.001,0.0001"

    def scale(self):
        fc.StandIn.scale(self)
        if self.full:                    # the paper's Table 3 / 5 and Fig. 5: TinyImageNet
            self.dataset, self.local_epochs = "tinyimagenet", 2
        if self.tiny:
            self.alphas, self.cm_alphas, self.etas = "0.1,0.5,1", "0.1,1", "0.1,0.01"


METHODS = ("fedavg", "fedcm", "fedadam", "fedlada")


def _fixed(hyper, method, *drop):
    hp = hyper(method)
    for k in drop + ("n_clients",):
        hp.pop(k, None)
    return hp


def grids(cfg, hyper=None) -> dict[str, Grid]:
    """The three sweeps at ``hyper``'s settings (default the plain runs':
    :func:`reproduce.fedlada_common.hyper`)."""
    hyper = hyper or (lambda m, **o: fc.hyper(m, cfg, **o))
    return {
        "table5": Grid({"fedlada": _fixed(hyper, "fedlada", "alpha")},
                       [Axis("alpha", tuple(common.flag_values(cfg, "alphas", float)), "fedlada")]),
        "fig5a": Grid({"fedadam-cm": _fixed(hyper, "fedadam-cm", "alpha"),
                       "fedcm": _fixed(hyper, "fedcm"), "fedavg": _fixed(hyper, "fedavg")},
                      [Axis("alpha", tuple(common.flag_values(cfg, "cm_alphas", float)),
                            "fedadam-cm")]),
        "fig5b": Grid({"fedadam-cm": _fixed(hyper, "fedadam-cm", "eta")},
                      [Axis("eta", tuple(common.flag_values(cfg, "etas", float)), "fedadam-cm")]),
    }


def make(cfg):
    """``hyper -> runs`` (:func:`reproduce.fedlada_tuning.protocol_runs`): the three sweeps
    at ``hyper``'s settings (both protocols' cells in one folder per sweep: a cell both
    protocols share runs once)."""
    def build_runs(hyper):
        return [sweep_run(name, grid, fc.problem_desc(cfg), fc.build_problem,
                          fc.participation_text(cfg), eval_every=cfg.eval_every,
                          params={"panel": name})
                for name, grid in grids(cfg, hyper).items()]
    return build_runs


def runs(cfg):
    if not cfg.plot_only:     # a missing dataset: its one-line error, before the sweep starts
        common.cached_dataset(cfg.dataset, cfg.data_dir)
    return ft.protocol_runs(cfg, make(cfg), METHODS)


def _panel(df, name):
    return df[df.panel == name]


def _by(df, metric, col):
    """Final ``metric`` (mean/min/max over seeds) per value of ``col``, sorted."""
    fin = fc.final_by_seed(df, metric)
    vals = df.drop_duplicates("run").set_index("run")[col]
    fin.index = [float(vals[r]) for r in fin.index]
    return fin.sort_index()


def plot(df, cfg):
    return ft.plot_both(df, cfg, {}, lambda d, stem, proto: _plot(d, cfg, stem, proto),
                        "fedlada_alpha")


def _plot(df, cfg, stem, protocol):
    df = common.healthy(df)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    t5 = _panel(df, "table5")
    if len(t5):
        fin = _by(t5, "test_acc", "alpha")
        ax = axes[0]
        ax.errorbar(fin.index, 100 * fin["mean"], yerr=[100 * (fin["mean"] - fin["min"]),
                    100 * (fin["max"] - fin["mean"])], fmt="o-", capsize=3,
                    label="stand-in (seed range)")
        ax.set_xscale("log")
        ax.set_xlabel("FedLADA alpha")
        ax.set_ylabel("final test accuracy (%)")
        ax2 = ax.twinx()
        ax2.plot(list(PAPER_T5), list(PAPER_T5.values()), "s:", color="gray",
                 label="paper, TinyImageNet (right axis)")
        ax2.set_ylabel("paper accuracy (%)", color="gray")
        ax.legend(fontsize=7, loc="lower left")
        ax2.legend(fontsize=7, loc="lower right")
        ax.set_title("Table 5: FedLADA alpha")
    a = _panel(df, "fig5a")
    if len(a):
        runs_a = list(dict.fromkeys(a["run"]))
        plotting.band_plot(axes[1], a, "test_acc", "run", label=lambda r: r,
                           palette=sns.color_palette("viridis", len(runs_a)))
        axes[1].set_ylabel("test accuracy")
        fc.zoom_accuracy(axes[1], a, "test_acc")
        axes[1].set_title("Fig. 5(a): FedAdam(*) over alpha (eta_g = 0.1)")
        axes[1].legend(fontsize=7)
    b = _panel(df, "fig5b")
    if len(b):
        ref = a[(a.algorithm == "fedadam-cm") & (a.alpha == 1.0)] if len(a) else a
        plotting.band_plot(axes[2], b, "train_loss", "run", logy=True, label=lambda r: r,
                           palette=sns.color_palette("magma", b["run"].nunique() + 1))
        if len(ref):
            plotting.band_plot(axes[2], ref.assign(run="FedAdam (alpha=1, eta_g=0.1)"),
                               "train_loss", "run", logy=True, palette=["tab:blue"],
                               linestyle="--")
        axes[2].set_ylabel("training loss")
        axes[2].set_title("Fig. 5(b): FedAdam(*) alpha=0.1 over eta_g")
        axes[2].legend(fontsize=7)
    fig.suptitle(f"FedLADA Table 5 / Fig. 5 stand-in, {protocol}: {fc.setting_text(cfg)}, "
                 f"{cfg.rounds} rounds", fontsize=9, y=1.02)
    return plotting.save(fig, cfg.figures, stem)


def table3(df, cfg, card=None, proto=None, scope="") -> tuple[list[str], list]:
    """Table 3 from the table5 and fig5a sweeps (module docstring): its lines and the verdict
    on its claim (FedLADA the best combination)."""
    t5, a = _panel(df, "table5"), _panel(df, "fig5a")
    if not len(t5) or not len(a):
        return [], []
    alpha = fc.paper_alpha(cfg)
    pick = {"FedAvg": (a, "fedavg", None), "FedCM": (a, "fedcm", None),
            "FedAdam": (a, "fedadam-cm", 1.0), "FedAdam(*)": (a, "fedadam-cm", 0.1),
            "LocalAdam": (t5, "fedlada", 1.0), "FedLADA": (t5, "fedlada", alpha)}
    combos = {"FedAvg": ("SGD", "SGD"), "FedCM": ("SGD", "SGD(+A)"), "FedAdam": ("Adam", "SGD"),
              "FedAdam(*)": ("Adam", "SGD(+A)"), "LocalAdam": ("SGD", "Adam"),
              "FedLADA": ("SGD", "Adam(+A)")}
    acc, seeds = {}, {}
    for name, (sub, alg, al) in pick.items():
        rows = common.healthy(sub[sub.algorithm == alg])
        if al is not None:
            rows = rows[np.isclose(rows.alpha.astype(float), al)]
        if len(rows):
            acc[name] = fc.final_by_seed(rows.assign(run=name), "test_acc").iloc[0]
        seeds[name] = _alpha_seeds(sub, alg, "test_acc", al)
    if "FedAvg" not in acc:
        return [], []
    base = acc["FedAvg"]["mean"]
    lines = ["", f"Table 3 (final test accuracy %, gain over FedAvg; FedLADA at alpha "
             f"{alpha:g}; paper TinyImageNet @1500):", "",
             "| mode | global | local | stand-in | gain | paper | paper gain |",
             "|---|---|---|---|---|---|---|"]
    for name, (g, l) in combos.items():
        if name in acc:
            gain = 100 * (acc[name]["mean"] - base)
            pg = PAPER_T3[name] - PAPER_T3["FedAvg"]
            lines.append(f"| {name} | {g} | {l} | {fc.pm(acc[name])} | {gain:+.1f} | "
                         f"{PAPER_T3[name]} | {pg:+.1f} |")
    verdicts = []
    if {"FedLADA", "FedCM", "FedAdam(*)"} <= set(acc):
        parts = [vd.above(CLAIMS["Tab3"], seeds["FedLADA"], seeds[k], margin=fc.MARGIN,
                          unit="pp", scale=100, what=f"FedLADA above {k}")
                 for k in combos if k != "FedLADA" and k in seeds and len(seeds[k])]
        verdicts.append(vd.every(CLAIMS["Tab3"], parts, what="FedLADA the best combination",
                                 card=card, protocol=proto, scope=scope))
    return lines, verdicts


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_alpha", "fedlada_alpha_tuned")
CLAIMS = vd.claims(
    vd.Claim("E6", "FedLADA", "accuracy is non-monotone in alpha with an interior peak, at "
             "0.05 (TinyImageNet: 29.5 / 41.9 / 40.1 / 38.8 / 36.5 / 34.1)", "every",
             "Table 5; spec 4 E6"),
    vd.Claim("E9", "FedLADA", "the amendment takes away server Adam's gain: FedAdam(*) gains "
             "+0.5 over FedAvg against FedAdam's +4.3", "above", "Table 3; spec 4 E9"),
    vd.Claim("E9a", "FedLADA", "lowering alpha below 1 in amended FedAdam reduces accuracy "
             "extremely", "ordering", "Fig. 5(a); spec 4 E9"),
    vd.Claim("E9b", "FedLADA", "no eta_g in {1e-1 .. 1e-4} gives FedAdam(*) vanilla FedAdam's "
             "training speed", "every", "Fig. 5(b); spec 4 E9"),
    vd.Claim("E9c", "FedLADA", "the amendment helps local SGD (FedCM +6.6 over FedAvg) more than "
             "server Adam (FedAdam(*) +0.5)", "above", "Table 3; spec 4 E9"),
    vd.Claim("Tab3", "FedLADA", "FedLADA (SGD / Adam+A) is the best of Table 3's optimizer "
             "combinations", "every", "Table 3"),
)


def _alpha_seeds(df, algorithm, metric, alpha=None, how="final"):
    rows = df[df.algorithm == algorithm]
    if alpha is not None:
        rows = rows[np.isclose(rows.alpha.astype(float), alpha)]
    return vd.per_seed(rows, metric, how)


def check(df, cfg):
    # a sweep's rows are named by grid point, so the missing sweeps are read from ``panel``
    missing = [n for n in grids(cfg) if "panel" not in df or not (df.panel == n).any()]
    lines = [f"setting: {fc.setting_text(cfg)}, {cfg.rounds} rounds"]
    if missing:
        lines.append(f"missing sweeps (no verdict needs them): {', '.join(missing)}")
    return lines + ft.check_both(cfg, df, {},
                                 lambda d, proto, scope: _claims(d, cfg, proto, scope), METHODS)


def _claims(df, cfg, proto, scope=""):
    """Tables 5 and 3 and E6, E9, E9a-c, Tab3 (Table 3) on one protocol's runs (``scope``: the tuned
    protocol's)."""
    lines = []
    card = fc.card(cfg, df, end=True).plus(*proto.card_items())
    C, out = CLAIMS, []
    acc = dict(unit="pp", scale=100, margin=fc.MARGIN)
    t5 = _panel(df, "table5")
    if len(t5):
        fin = _by(common.healthy(t5), "test_acc", "alpha")
        lines += ["Table 5 (final test accuracy %, mean [seed range]):", "",
                  "| alpha | " + " | ".join(f"{a:g}" for a in fin.index) + " |",
                  "|---|" + "---|" * len(fin),
                  "| stand-in | " + " | ".join(fc.pm(fin.loc[a]) for a in fin.index) + " |",
                  "| paper (TinyImageNet) | " + " | ".join(
                      f"{PAPER_T5[a]}" if a in PAPER_T5 else "-" for a in fin.index) + " |"]
        alphas = list(fin.index)
        inner = alphas[1:-1]
        if inner:
            peak = max(inner, key=lambda a: fin.loc[a, "mean"])
            at = lambda a: _alpha_seeds(t5, "fedlada", "test_acc", a)  # noqa: E731
            parts = [vd.above(C["E6"], at(peak), at(e), what=f"alpha {peak:g} above alpha "
                              f"{e:g} (interior peak above both ends)", **acc)
                     for e in (alphas[0], alphas[-1])]
            if 0.05 in alphas:
                parts += [vd.above(C["E6"], at(0.05), at(a), what=f"alpha 0.05 above {a:g}",
                                   **acc) for a in alphas if a != 0.05]
            out.append(vd.every(C["E6"], parts, what="interior alpha peak, at 0.05",
                                card=card, protocol=proto, scope=scope))
        else:
            out.append(vd.missing(C["E6"], "interior alpha peak", "fewer than 3 alphas run",
                                  scope=scope))
    a = _panel(df, "fig5a")
    if len(a):
        cm_alphas = sorted({float(x) for x in a.loc[a.algorithm == "fedadam-cm", "alpha"]},
                           reverse=True)
        if len(cm_alphas) >= 2:
            out.append(vd.ordering(C["E9a"], [(f"alpha {x:g}", _alpha_seeds(a, "fedadam-cm",
                                                                              "test_acc", x))
                                              for x in cm_alphas], card=card, protocol=proto,
                                              scope=scope,
                                   what="FedAdam(*)'s final test accuracy falls as alpha falls",
                                   **acc))
        amended = _alpha_seeds(a, "fedadam-cm", "test_acc", 0.1)
        vanilla = _alpha_seeds(a, "fedadam-cm", "test_acc", 1.0)
        fedcm = _alpha_seeds(a, "fedcm", "test_acc")
        if len(fedcm) and len(amended):
            out.append(vd.above(C["E9c"], fedcm, amended, card=card, protocol=proto, scope=scope,
                                what="FedCM's gain over FedAvg above FedAdam(*)'s (alpha 0.1): "
                                     "FedCM - FedAdam(*) final test accuracy", **acc))
        if len(vanilla) and len(amended):
            out.append(vd.above(C["E9"], vanilla, amended, card=card, protocol=proto, scope=scope,
                                what="FedAdam's gain over FedAvg above FedAdam(*)'s: FedAdam "
                                     "(alpha 1) - FedAdam(*) (alpha 0.1)", **acc))
    lines_t3, t3 = table3(df, cfg, card, proto, scope)
    lines += lines_t3
    out += t3
    b = _panel(df, "fig5b")
    if len(b) and len(a):
        ref = _alpha_seeds(a, "fedadam-cm", "train_loss", 1.0)
        etas = sorted({float(x) for x in b["eta"]}, reverse=True)
        parts = [vd.above(C["E9b"], vd.per_seed(b[np.isclose(b.eta.astype(float), e)],
                                                "train_loss"), ref,
                          what=f"FedAdam(*) eta_g={e:g}: final training loss above vanilla "
                               "FedAdam's") for e in etas]
        out.append(vd.every(C["E9b"], parts, what="no eta_g recovers vanilla FedAdam's speed",
                            card=card, protocol=proto, scope=scope))
    return lines + [""] + out


def full_work(cfg):
    """One ``(participants, local epochs)`` per grid point (:mod:`reproduce.fedlada_cost`)."""
    n = sum(len(g.points()) for g in grids(cfg).values())
    return [(fc.participation(cfg).m, fc.epochs(cfg))] * n

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
