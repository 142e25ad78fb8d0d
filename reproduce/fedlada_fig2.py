"""FedLADA Figure 2 and Tables 1, 6, 7, 11, 12: the seven methods' training loss and test
accuracy, rounds to a target accuracy (with the paper's multipliers) and communication.

Setup: :mod:`reproduce.fedlada_common` (CPU stand-in by default: 784-50-10 MLP on
Fashion-MNIST, 100 clients Dir-0.6, 10 % a round, batch 50, 2 local epochs, decay 0.998,
weight decay 1e-3 / 1e-2; ``--full``: ResNet-18-GN on CIFAR-10, 1500 rounds, the paper's
rates; ``--dataset cifar100`` / ``tinyimagenet`` with ``--local-epochs 2`` for the others).

**Targets.** Absolute, as the paper defines them (:data:`TEST_TARGETS`): 98 % train
accuracy (Table 1 "TRAIN") and CIFAR-10's 84 % (Table 1) and 70 % / 80 % (Table 7) test
accuracy; the Fashion-MNIST stand-in takes CIFAR-10's numbers, fixed before any run (targets
relative to this run's best method move with the data and with the methods run, and are not
used). Where nobody reaches a target, the regime card says so and the speed claims on it are
``premise absent``. Rounds are the first evaluated round at or above the target (``--eval-every`` rounds apart), mean over seeds
(``inf`` if a seed never gets there, as Table 7's mean), multipliers rounds / best,
truncated to 2 decimals as the paper prints them. Communication (Tables 11-12) counts the
paper's units: Nd per round for FedAvg, FedProx, FedAdam, 2Nd for the others.

**Protocols.** The runs use the stand-in's pilot rates, or with ``--paper-lr`` the paper's
Sec. 4.1 rates (the committed headline); ``--tuned`` adds the symmetric tuned comparison
beside them (:mod:`reproduce.fedlada_tuning`: a one-seed screen, the local rate on 3 seeds,
each pick rerun on the entry's seeds as ``tuned:METHOD``, drawn as ``fedlada_fig2_tuned``),
and every claim gets a second verdict, scoped ``tuned``, that names that protocol.

Claims checked (spec 4; :data:`CLAIMS`, one verdict each, :mod:`reproduce.verdicts`): E1 (which method reaches the train target first; LocalAdam on
CIFAR-10, FedLADA on CIFAR-100/TinyImageNet), E2 (FedLADA first to the test target, 1.5-2x
before the best SGD method), E3 (FedAdam slowest in train, 3-4.5x FedLADA), E4 (LocalAdam
lowest or next-to-lowest final test accuracy, never reaching the Table 1 test target nor
Table 7's high one), E5 (final test accuracy FedLADA >= FedCM > FedAdam > FedAvg), E12 (FedLADA's
communication to the Table 7 targets below FedAvg's: 0.95x / 0.69x).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from . import common, plotting
from . import fedlada_common as fc
from . import regime as rg
from . import verdicts as vd
from . import fedlada_cost as fcost
from . import fedlada_tuning as ft
from . import protocols as pr

PAPER, TARGET = "FedLADA", "Figure 2, Tables 1/6/7/11/12"
TITLE = "seven methods: train loss, test accuracy, rounds and communication to a target"
DEFAULT_COST = ("3-7 min with --threads 1 (7 methods x 2 seeds x 150 rounds, 784-50-10 MLP on "
                "Fashion-MNIST; 4.7 min measured, 212 s of CPU; 3.2 min on a quieter machine, "
                "6.3 min under load)")

COMM = {"fedavg": 1, "fedprox": 1, "fedadam": 1, "scaffold": 2, "fedcm": 2, "localadam": 2,
        "fedlada": 2}                                    # Table 11, in units of Nd per round

#: The paper's numbers (CIFAR-10 column) beside which the tables are printed.
PAPER_T1_TRAIN = {"fedavg": "977 (1.70x)", "fedprox": "913 (1.59x)", "scaffold": "740 (1.29x)",
                  "fedcm": "1429 (2.48x)", "fedadam": "2554 (4.44x)", "localadam": "575 (best)",
                  "fedlada": "765 (1.33x)"}
PAPER_T1_TEST = {"fedavg": "inf", "fedprox": "inf", "scaffold": "1177 (2.04x)",
                 "fedcm": "1211 (2.11x)", "fedadam": "inf", "localadam": "inf",
                 "fedlada": "598 (best)"}
PAPER_T7 = {"fedavg": ("94.0", "536.9"), "fedprox": ("90.9", "511.1"),
            "scaffold": ("85.1", "262.5"), "fedcm": ("71.5", "286.7"),
            "fedadam": ("96.1", "611.2"), "localadam": ("65.5", "inf"),
            "fedlada": ("44.6", "186.4")}
PAPER_T6 = {"fedavg": "81.8", "fedcm": "84.9", "fedadam": "83.7", "fedlada": "86.1",
            "fedprox": "-", "scaffold": "-", "localadam": "~78.5 (text)"}
PAPER_T12 = {"fedavg": ("1x", "1x"), "fedprox": ("0.97x", "0.95x"),
             "scaffold": ("1.80x", "0.97x"), "fedcm": ("1.51x", "1.06x"),
             "fedadam": ("1.02x", "1.13x"), "localadam": ("1.38x", "-"),
             "fedlada": ("0.95x", "0.69x")}


@dataclass
class Config(fc.StandIn):
    methods: str = ",".join(fc.METHODS)

    def scale(self):
        fc.StandIn.scale(self)


methods = fc.methods   # fedlada_fig1 reads it from here too


def runs(cfg):
    out = []
    for m in methods(cfg):
        def build(m=m):
            return fc.problem(cfg), fc.algorithm(m, cfg), fc.participation(cfg)
        out.append(fc.engine_run(m, {"method": m, **fc.hyper(m, cfg)}, build, cfg.rounds,
                                 cfg.eval_every))
    if cfg.tuned:               # stages 1-2 (sweep cells), then each pick on the entry's seeds
        out.append(ft.tuning_run(cfg, methods(cfg)))
        out += [ft.pick_run(cfg, m, methods(cfg)) for m in methods(cfg)]
    return out


TUNED = "tuned:"


def split(df):
    """``(paper protocol's runs, tuned picks' runs named by method, tuning record)``."""
    run = df["run"].astype(str)
    tuned = df[run.str.startswith(TUNED)].copy()
    tuned["run"] = tuned["run"].astype(str).str[len(TUNED):]
    return (df[~run.str.contains(":")], tuned, df[run.str.startswith("tuning:")])


def _palette(names):
    colors = sns.color_palette("tab10", len(fc.METHODS))
    return [colors[fc.METHODS.index(n)] if n in fc.METHODS else "k" for n in names]


def plot(df, cfg, stem="fedlada_fig2", figure="Figure 2"):
    paper, tuned, _ = split(df)
    paths = [_plot(paper, cfg, stem, figure, f"{'paper' if cfg.paper_lr else 'pilot'} "
                   "protocol")]
    if len(tuned):
        paths.append(_plot(tuned, cfg, f"{stem}_tuned", figure, "tuned protocol "
                           "(reproduce.fedlada_tuning picks)"))
    return [p for group in paths for p in group]


def _plot(df, cfg, stem, figure, protocol):
    df = common.healthy(df)
    names = sorted(df["run"].unique(), key=lambda r: fc.METHODS.index(r)
                   if r in fc.METHODS else 99)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    panels = [("train_loss", "training loss", True), ("train_acc", "train accuracy", False),
              ("test_acc", "test accuracy", False)]
    for ax, (metric, ylabel, logy) in zip(axes, panels):
        for name, color in zip(names, _palette(names)):
            plotting.band_plot(ax, df[df.run == name], metric, "run", logy=logy,
                               palette=[color], label=fc.label)
        if not logy:
            fc.zoom_accuracy(ax, df, metric)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fig.suptitle(f"FedLADA {figure} stand-in, {protocol}: {fc.setting_text(cfg)} "
                 f"(mean, band = seed range)", fontsize=9, y=1.02)
    return plotting.save(fig, cfg.figures, stem)


def _order(index):
    return [m for m in fc.METHODS if m in index]


def tables(df, cfg) -> list[str]:
    """Tables 1, 6, 7, 12 as markdown, the stand-in beside the paper's CIFAR-10 numbers."""
    tg = absolute_targets(cfg)
    tr = fc.rounds_summary(df, "train_acc", tg["train"])
    te = fc.rounds_summary(df, "test_acc", tg["test"])
    t7 = [fc.rounds_summary(df, "test_acc", t) for t in tg["t7"]]
    fin, best = fc.final_by_seed(df, "test_acc"), fc.best_by_seed(df, "test_acc")
    L = [f"Table 1 (rounds to target; targets train {100 * tg['train']:.1f} %, test "
         f"{100 * tg['test']:.1f} %; mean [seed range] (multiplier)):", "",
         "| method | train: stand-in | train: paper C10 (98 %) | test: stand-in | "
         "test: paper C10 (84 %) |", "|---|---|---|---|---|"]
    for m in _order(tr.index):
        L.append(f"| {fc.label(m)} | {fc.fmt_rounds(tr.loc[m])} | {PAPER_T1_TRAIN.get(m, '-')} "
                 f"| {fc.fmt_rounds(te.loc[m])} | {PAPER_T1_TEST.get(m, '-')} |")
    L += ["", f"Table 7 (mean rounds to {100 * tg['t7'][0]:.1f} % / {100 * tg['t7'][1]:.1f} % "
          "test accuracy; paper: C10 70 % / 80 %):", "",
          "| method | stand-in low | stand-in high | paper 70 % | paper 80 % |",
          "|---|---|---|---|---|"]
    for m in _order(t7[0].index):
        p = PAPER_T7.get(m, ("-", "-"))
        L.append(f"| {fc.label(m)} | {fc.fmt_rounds(t7[0].loc[m])} | "
                 f"{fc.fmt_rounds(t7[1].loc[m])} | {p[0]} | {p[1]} |")
    L += ["", f"Table 6 (test accuracy %, mean [seed range]; best over rounds and at the last "
          f"round {cfg.rounds}; paper C10 @1500):", "",
          "| method | best | last | paper @1500 |", "|---|---|---|---|"]
    for m in _order(fin.index):
        L.append(f"| {fc.label(m)} | {fc.pm(best.loc[m])} | {fc.pm(fin.loc[m])} | "
                 f"{PAPER_T6.get(m, '-')} |")
    L += ["", "Tables 11-12 (communication to the Table 7 targets in units of Nd: rounds x "
          "{1, 2}; ratio to FedAvg, truncated):", "",
          "| method | per round | low target | ratio | high target | ratio | paper ratios "
          "70 % / 80 % |", "|---|---|---|---|---|---|---|"]
    for m in _order(t7[0].index):
        cells = []
        for t in t7:
            cost = COMM[m] * t.loc[m, "rounds"]
            base = COMM["fedavg"] * t.loc["fedavg", "rounds"] if "fedavg" in t.index else math.nan
            ratio = (f"{math.floor(100 * cost / base) / 100:.2f}x"
                     if np.isfinite(cost) and np.isfinite(base) and base > 0 else "-")
            cells += [f"{cost:.0f}Nd" if np.isfinite(cost) else "inf", ratio]
        p = PAPER_T12.get(m, ("-", "-"))
        L.append(f"| {fc.label(m)} | {COMM[m]}Nd | {' | '.join(cells)} | {p[0]} / {p[1]} |")
    return L


#: The SGD-based baselines (E2's "best SGD baseline").
SGD_METHODS = ("fedavg", "fedprox", "scaffold", "fedcm")

#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_fig2", "fedlada_fig2_tuned")
CLAIMS = vd.claims(
    vd.Claim("E1", "FedLADA", "LocalAdam reaches 98 % train accuracy first on CIFAR-10 "
             "(FedLADA first on CIFAR-100 / TinyImageNet)", "faster", "Table 1; spec 4 E1"),
    vd.Claim("E2", "FedLADA", "FedLADA reaches the target test accuracy first on all three "
             "datasets, about 1.5-2x faster than the best SGD baseline; fastest on every "
             "Table 7 column", "faster", "Tables 1, 7; spec 4 E2"),
    vd.Claim("E3", "FedLADA", "FedAdam is the slowest to 98 % train accuracy, about 3-4.5x "
             "FedLADA's rounds", "faster", "Table 1; spec 4 E3"),
    vd.Claim("E4", "FedLADA", "LocalAdam fits fast but has the lowest or next-to-lowest test "
             "accuracy and never reaches Table 1's nor Table 7's high test target", "every",
             "Tables 1, 6, 7; spec 4 E4"),
    vd.Claim("E5", "FedLADA", "final test accuracy FedLADA >= FedCM > FedAdam > FedAvg",
             "ordering", "Table 6; spec 4 E5"),
    vd.Claim("E12", "FedLADA", "FedLADA's communication to the Table 7 targets is below "
             "FedAvg's (0.95x / 0.69x at 2Nd against Nd a round)", "faster",
             "Tables 11-12; spec 4 E12"),
)


def _seeds(df, run, metric, how="final"):
    return vd.per_seed(df, metric, how, run=run)


def _to(df, run, metric, target):
    return vd.rounds_to(df, metric, target, run=run)


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    paper, tuned, record = split(df)
    lines = [f"setting: {fc.setting_text(cfg)}"] + notes
    proto = fc.protocol(cfg)
    lines += [f"{proto.kind} protocol ({proto.describe()}):", ""]
    lines += _claims(paper, cfg, proto)
    if len(record):
        tproto = pr.protocol_of(record)
        lines += ["", f"tuned protocol ({tproto.describe()}):", ""] + ft.stage_lines(record)
        picks = ft.picks_of(record)
        lines += ["", "tuned picks: " + "; ".join(
            f"{fc.label(m)} " + ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                                          for k, v in sorted(picks[m].items()))
            for m in _order(picks)), ""]
        if len(tuned):
            lines += _claims(tuned, cfg, tproto, scope="tuned")
    return lines


def _claims(df, cfg, proto, scope=""):
    """Tables 1, 6, 7, 12 and the claims' verdicts on one protocol's runs (``scope`` names
    the tuned protocol's rows in the ledger; the paper protocol's have none)."""
    lines = []
    have = set(df["run"].unique())
    lines += tables(df, cfg)
    lines.append("")
    tg = absolute_targets(cfg)
    lines.append(f"targets (absolute, {tg['why']}): train {100 * tg['train']:g} %, test "
                 f"{100 * tg['test']:g} %, Table 7 {' / '.join(f'{100 * t:g} %' for t in tg['t7'])}")
    horizon = cfg.rounds
    # the premise (LocalAdam fits fastest, then generalises worse) is checked on E1-E4's
    # cards and shown on E5's and E12's, which do not presuppose it (fedlada_common.card)
    prem = fc.localadam_premise(df)
    if prem is not None:
        lines.append(prem.text())
    fit = fc.card(cfg, df, fit=True, premise=True).plus(*proto.card_items())
    test_card = fc.card(cfg, df, premise=True).plus(*proto.card_items(),
                                                    _reached(df, tg["test"], "test target"))
    test_card_free = fc.card(cfg, df).plus(*proto.card_items(),
                                           _reached(df, tg["test"], "test target"))
    final_card = fc.card(cfg, df, premise=True).plus(*proto.card_items())
    final_card_free = fc.card(cfg, df).plus(*proto.card_items())
    C = CLAIMS
    out = []
    if "localadam" in have:
        others = [m for m in _order(have) if m != "localadam"]
        out.append(vd.every(C["E1"], [
            vd.faster(C["E1"], _to(df, "localadam", "train_acc", tg["train"]),
                      _to(df, m, "train_acc", tg["train"]), horizon=horizon,
                      what=f"LocalAdam vs {fc.label(m)}: rounds to {100 * tg['train']:g} % train")
            for m in others], what="LocalAdam first to the train target (CIFAR-10 reading)",
            card=fit, protocol=proto, scope=scope))
    if "fedlada" in have:
        others = [m for m in _order(have) if m != "fedlada"]
        parts = [vd.faster(C["E2"], _to(df, "fedlada", "test_acc", tg["test"]),
                           _to(df, m, "test_acc", tg["test"]), horizon=horizon,
                           what=f"FedLADA vs {fc.label(m)}: rounds to {100 * tg['test']:g} % test")
                 for m in others]
        sgd = [m for m in SGD_METHODS if m in have]
        if sgd:
            mean_r = {m: np.nanmean(np.minimum(_to(df, m, "test_acc", tg["test"]), horizon + 1))
                      for m in sgd}
            best = min(sgd, key=lambda m: (mean_r[m], sgd.index(m)))
            parts.append(vd.faster(C["E2"], _to(df, "fedlada", "test_acc", tg["test"]),
                                   _to(df, best, "test_acc", tg["test"]), horizon=horizon,
                                   band=(1.5, 2.0),
                                   what=f"FedLADA 1.5-2x faster than the best SGD baseline "
                                        f"({fc.label(best)})"))
        for t in tg["t7"]:
            parts += [vd.faster(C["E2"], _to(df, "fedlada", "test_acc", t),
                                _to(df, m, "test_acc", t), horizon=horizon,
                                what=f"Table 7 {100 * t:g} %: FedLADA vs {fc.label(m)}")
                      for m in others]
        out.append(vd.every(C["E2"], parts, what="FedLADA first to the test targets, 1.5-2x the "
                            "best SGD baseline", card=test_card, protocol=proto,
                            scope=scope))
    if {"fedadam", "fedlada"} <= have:
        others = [m for m in _order(have) if m != "fedadam"]
        parts = [vd.faster(C["E3"], _to(df, m, "train_acc", tg["train"]),
                           _to(df, "fedadam", "train_acc", tg["train"]), horizon=horizon,
                           what=f"{fc.label(m)} vs FedAdam to {100 * tg['train']:g} % train")
                 for m in others]
        parts.append(vd.faster(C["E3"], _to(df, "fedlada", "train_acc", tg["train"]),
                               _to(df, "fedadam", "train_acc", tg["train"]), horizon=horizon,
                               band=(3.0, 4.5), what="FedAdam's rounds 3-4.5x FedLADA's"))
        out.append(vd.every(C["E3"], parts, what="FedAdam slowest to the train target, 3-4.5x "
                            "FedLADA", card=fit, protocol=proto, scope=scope))
    if "localadam" in have and len(have) >= 3:
        others = [m for m in _order(have) if m != "localadam"]
        means = {m: _seeds(df, m, "test_acc").mean() for m in others}
        allowed = min(others, key=lambda m: means[m])        # the one allowed below it
        parts = [vd.above(C["E4"], _seeds(df, m, "test_acc"), _seeds(df, "localadam", "test_acc"),
                          margin=fc.MARGIN, unit="pp", scale=100,
                          what=f"{fc.label(m)} above LocalAdam (final test acc)")
                 for m in others if m != allowed]
        for t in (tg["test"], tg["t7"][1]):
            parts.append(vd.exceeds(C["E4"], _seeds(df, "localadam", "test_acc", "max"), t,
                                    direction=-1, unit="%", scale=100,
                                    what=f"LocalAdam's best test accuracy below {100 * t:g} %"))
        out.append(vd.every(C["E4"], parts, what="LocalAdam lowest or next-to-lowest, never "
                            "at the high targets", card=final_card, protocol=proto,
                            scope=scope))
    if {"fedlada", "fedcm", "fedadam", "fedavg"} <= have:
        out.append(vd.ordering(C["E5"], [(fc.label(m), _seeds(df, m, "test_acc"))
                                         for m in ("fedlada", "fedcm", "fedadam", "fedavg")],
                               strict=[False, True, True], margin=fc.MARGIN, unit="pp",
                               scale=100, card=final_card_free, protocol=proto, scope=scope,
                               what="final test accuracy FedLADA >= FedCM > FedAdam > FedAvg"))
    if {"fedlada", "fedavg"} <= have:
        parts = [vd.faster(C["E12"], _to(df, "fedlada", "test_acc", t),
                           _to(df, "fedavg", "test_acc", t), horizon=horizon, by=2.0,
                           what=f"FedAvg's rounds over FedLADA's to {100 * t:g} % above 2 (cost "
                                "2Nd vs Nd a round)")
                 for t in tg["t7"]]
        out.append(vd.every(C["E12"], parts, what="FedLADA's communication below FedAvg's",
                            card=test_card_free, protocol=proto, scope=scope))
    return lines + out


def _reached(df, target, what):
    """Regime item: the best method's final test accuracy reaches the target (a speed claim
    on a target nobody reaches tests nothing)."""
    fin = fc.final_by_seed(df, "test_acc")["mean"] if (df.metric == "test_acc").any() else []
    best = float(max(fin)) if len(fin) else math.nan
    return rg.value(f"best final acc vs {what}", best, target, rg.at_least(target),
                    "the target must be reached by the best method")


#: Absolute targets (the paper's definitions, spec 3.1): 98 % train accuracy (Table 1) and
#: CIFAR-10's 84 % (Table 1) and 70 % / 80 % (Table 7) test targets; CIFAR-100 51 %,
#: TinyImageNet 38 % (Table 1; Table 7's columns are CIFAR-10's). The Fashion-MNIST stand-in
#: takes CIFAR-10's numbers as they stand (its methods end in the same 80-90 % range), fixed
#: before any run, never derived from the results.
TEST_TARGETS = {"cifar10": (0.84, (0.70, 0.80)), "cifar100": (0.51, (0.45, 0.50)),
                "tinyimagenet": (0.38, (0.30, 0.35)), "fmnist": (0.84, (0.70, 0.80))}


def absolute_targets(cfg) -> dict:
    test, t7 = TEST_TARGETS.get(cfg.dataset, TEST_TARGETS["cifar10"])
    why = ("the paper's" if cfg.dataset in ("cifar10", "cifar100", "tinyimagenet") else
           "the paper's CIFAR-10 numbers on the stand-in")
    return {"train": fc.TRAIN_TARGET, "test": test, "t7": list(t7), "why": why}


def full_work(cfg):
    """One ``(participants, local epochs)`` per run (:mod:`reproduce.fedlada_cost`)."""
    return [(fc.participation(cfg).m, fc.epochs(cfg))] * len(methods(cfg))

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
