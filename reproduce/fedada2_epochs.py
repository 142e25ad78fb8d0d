"""FedAda2 Figure 3 (top) and Figure 4 (top): GLD-23K under 1, 5 and 20 local epochs.

Figure 3 (top): test accuracy against rounds of the six methods of Figure 1 (FedAvg,
FedAdaGrad, FedAdam, Direct Joint Adap., Joint Adap. w/o Precond. Commu., FedAda2; Adam
everywhere except FedAdaGrad) on the ViT-S head fine-tuning task of GLD-23K (233 natural
clients, ``q = 0.01``) with (a) 1, (b) 5, (c) 20 local epochs, each method at its Table 6 (1
and 20 epochs) or Tables 4-5 (5 epochs) best point. Figure 4 (top), "additional results for
Figure 3 (b)": the 5-epoch runs' test accuracy, test loss and training loss.

Claim (spec 5, claim 16; Sec. 6.2): with 1 local epoch FedAda2 converges fastest, FedAdam a
close second; FedAda2's advantage shrinks as the epochs grow; at 20 epochs the jointly adaptive
methods beat FedAdam by a small margin; at 5 epochs the ordering of claim 15 (every adaptive
method above FedAvg, FedAda2 about DJA). This entry decides claim 16 (Figure 1's GLD-23K panel,
also 5 epochs, prints its numbers and names this entry), with the FedAda2 entries' one
definition of each comparison (:func:`reproduce.fedada2_common.ordering_claims`): "converges
faster" is rounds to the setting's absolute target accuracy, paired by seed; "beats" the final
test accuracy; "about equal" an equivalence test within one point.

Settings, stand-ins and hyperparameters: :mod:`reproduce.fedada2_common` (the CPU default runs
GLD-23K's stand-in: a 200-class composite task of Fashion-MNIST triples over 233
natural-like clients).

Tuning (``--tuning``): ``paper`` (the default) runs Tables 4-6's points, tuned by the paper on
the real task, so every comparison's card fails on the stand-in ("tuned on the task run");
``two-step`` first tunes every method at each local-epoch count on the stand-in by App. H.2's
two steps (:func:`reproduce.fedada2_common.two_step_tuning`, the mechanism of
``fedada2_fig5`` and ``fedada2_dp``; the paper: "Step 1 analogous sweeps for 1 and 20 local
epochs") over :data:`reproduce.fedada2_common.IMAGE_GRIDS` of the epoch count's table (43
cells each, H.1's running-10 rule at the plotted horizon on ``--tune-seeds`` seeds; the
adaptive servers' cells sample-weighted as the authors aggregate them on GLD-23K's unequal
clients), then runs the comparison at the picks.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from reproduce import fedada2_tables as tables

from . import common, plotting
from . import fedada2_common as fc
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Figure 3 (top), Figure 4 (top)"
TITLE = "GLD-23K with 1, 5 and 20 local epochs: test accuracy of six methods"
DEFAULT_COST = ("613 CPU-s measured with --threads 1 (6 methods x 1/5/20 epochs x 5 seeds "
                "x 150 rounds on GLD-23K's 200-class composite stand-in; 10 min 28 s of wall "
                "time on two shared cores); the filed run, --tuning two-step --seeds 20: "
                "1 h 55 min of wall time on one core shared with another heavy job (the 129 "
                "tuning cells included; at 5 seeds, 1,425 CPU-s)")

#: local epochs -> the table of best hyperparameters (Table 6 for 1 and 20, Tables 4-5 for 5)
TABLE_OF = {1: "gld23k-1epoch", 5: "gld23k", 20: "gld23k-20epoch"}
JOINT = ("dja", "joint-no-precond", "fedada2")


@dataclass
class Config(fc.Config):
    settings: str = "gld23k"
    epochs: str = "1,5,20"
    seeds: int = 5
    rounds: int = 150
    tuning: str = "paper"          # paper (Tables 4-6's points) | two-step (App. H.2 here)
    tune_seeds: int = 1            # selection seeds of the two-step tuning

    def scale(self):
        fc.Config.scale(self)
        if self.tiny:
            self.epochs = "1,5"

    def validate(self):
        fc.Config.validate(self)
        if fc.items(self.settings) != ["gld23k"]:
            raise common.EntryError("--settings: Figure 3 (top) is GLD-23K only (gld23k)")
        epoch_list(self)
        fc.validate_tuning(self)


def epoch_list(cfg) -> list[int]:
    try:
        vals = [int(v) for v in fc.items(cfg.epochs)]
    except ValueError:
        raise common.EntryError(f"--epochs: cannot read {cfg.epochs!r}; give e.g. 1,5,20") \
            from None
    bad = [v for v in vals if v not in TABLE_OF]
    if not vals or bad:
        raise common.EntryError(f"--epochs: the paper tunes 1, 5 and 20 local epochs only "
                                f"(Tables 4-6), got {cfg.epochs!r}")
    return vals


def run_name(epochs: int, method: str) -> str:
    return f"gld23k_E{epochs}_{method}"


TUNING_TEXT = "two-step tuning on the stand-in (App. H.2), per local-epoch count"


def epoch_config(cfg, e: int):
    """``cfg`` with ``e`` local epochs (the problem, the tuning's cells and its cache key)."""
    return dataclasses.replace(cfg, image_local_epochs=e)


def picks(cfg, e: int) -> dict:
    """``{method: {key: value}}`` at ``e`` local epochs: the two-step picks with ``--tuning
    two-step`` (:func:`reproduce.fedada2_common.tuned_picks` from the epoch count's table),
    else empty (the table's points)."""
    t = TABLE_OF[e]
    return fc.tuned_picks("gld23k", epoch_config(cfg, e), fc.TUNING_NAMES[t],
                          fc.image_grids(t, cfg), table=t)


def runs(cfg):
    out = []
    fc.load_problems(cfg)
    for e in epoch_list(cfg):
        ecfg = epoch_config(cfg, e)
        chosen = picks(cfg, e)
        for m in fc.SETTINGS["gld23k"].methods:
            def build(e=e, m=m, ecfg=ecfg, pick=chosen[m]):
                prob = fc.problem("gld23k", ecfg)[0]
                alg = tables.build(TABLE_OF[e], m, **{**fc.reference("gld23k", m, ecfg),
                                                      **pick})
                return (prob, fc.weighted(alg, prob, m, ecfg, False),
                        fc.participation("gld23k", ecfg))
            cell = tables.best(TABLE_OF[e], m)
            extra = {"hyper": {"algorithm": cell.algorithm, **cell.hyper,
                               **fc.reference("gld23k", m, ecfg), **chosen[m],
                               "aggregation": fc.aggregation("gld23k", m, ecfg),
                               "source": cell.source}}
            if fc.tuned_here("gld23k", cfg):
                extra.update(tuning=TUNING_TEXT, picked=chosen[m])
            out.append(common.Run(run_name(e, m), {"setting": "gld23k", "epochs": e,
                                                   "method": m},
                                  build=build, eval_every=cfg.eval_every, eval_grad=False,
                                  extra=extra))
    return out


def plot(df, cfg):
    df = common.healthy(df)
    epochs = epoch_list(cfg)
    methods = fc.SETTINGS["gld23k"].methods
    title = fc.setting_title("gld23k", cfg)
    fig, axes = plt.subplots(1, len(epochs), figsize=(4.6 * len(epochs), 3.8), squeeze=False)
    for ax, e in zip(axes[0], epochs):
        fc.ci_plot(ax, df[df.epochs == e], "test_acc", methods)
        ax.set_title(f"({'abc'[epochs.index(e)]}) {e} local epoch{'s' if e > 1 else ''}")
        ax.set_ylabel("test accuracy")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"FedAda2 Fig. 3 (top): {title}, local epochs varied, {_points(cfg)} (mean "
                 f"and 95% interval over {cfg.seeds} seeds)", fontsize=10)
    paths = plotting.save(fig, cfg.figures, "fedada2_fig3_top")
    if 5 in epochs:
        fig, axes = plt.subplots(1, 3, figsize=(13.5, 3.8))
        five = df[df.epochs == 5]
        for ax, metric, name in zip(axes, ("test_acc", "test_loss", "train_loss"),
                                    ("test accuracy", "test loss", "training loss")):
            fc.ci_plot(ax, five, metric, methods, logy=metric != "test_acc")
            ax.set_ylabel(name)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"FedAda2 Fig. 4 (top): {title}, 5 local epochs (the runs of Fig. 3b), "
                     f"{_points(cfg)}", fontsize=10)
        paths += plotting.save(fig, cfg.figures, "fedada2_fig4_top")
    return paths


def _points(cfg) -> str:
    return ("points tuned on the stand-in (App. H.2's two steps)"
            if fc.tuned_here("gld23k", cfg) else "Tables 4-6's points")


def _table(scores, e, methods, unit="acc"):
    row = lambda m: fc.fmt_pp(fc.score_ci(scores, run_name(e, m)))  # noqa: E731
    return " | ".join(f"{fc.label(m, True)} {row(m)}" for m in methods)


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_fig3_top", "fedada2_fig4_top")
CLAIMS = vd.claims(
    vd.Claim("16a", "FedAda2", "GLD-23K, 1 local epoch: FedAda2 converges fastest, FedAdam a "
             "close second", "faster", "Sec. 6.2, Fig. 3 top (a); spec 5 claim 16"),
    vd.Claim("16b", "FedAda2", "GLD-23K: FedAda2's advantage shrinks as the local epochs grow "
             "(1 -> 20)", "exceeds", "Sec. 6.2, Fig. 3 top; spec 5 claim 16"),
    vd.Claim("16c", "FedAda2", "GLD-23K, 20 local epochs: the jointly adaptive methods beat "
             "FedAdam, by a small margin", "size", "Sec. 6.2, Fig. 3 top (c)"),
    vd.Claim("16d", "FedAda2", "GLD-23K, 5 local epochs: every adaptive method ends above "
             "FedAvg (claim 15's ordering)", "every", "Sec. 6.1; spec 5 claim 16"),
    vd.Claim("16e", "FedAda2", "GLD-23K, 5 local epochs: joint adaptivity converges faster than "
             "FedAdam", "faster", "Sec. 6.1; spec 5 claim 16"),
    vd.Claim("16f", "FedAda2", "GLD-23K, 5 local epochs: FedAda2 about equal to DJA",
             "about equal", "Sec. 6.1; spec 5 claim 16"),
)
SMALL = 0.05      # 16c's "small margin": above FedAdam by at most 5 points


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    epochs = epoch_list(cfg)
    methods = fc.SETTINGS["gld23k"].methods
    lines = [f"setting: {fc.data_note(cfg)}; m = {fc.participants('gld23k', cfg)} clients a "
             f"round, {cfg.rounds} rounds, {cfg.seeds} seeds; hyperparameters: "
             + ", ".join(f"{e} epochs {tables.best(TABLE_OF[e], 'fedada2').source}"
                         for e in epochs)] + notes
    for e in epochs:
        lines += [f"{e} local epoch(s): " + t if i == 0 else t for i, t in enumerate(
            fc.tuning_lines("gld23k", epoch_config(cfg, e), fc.TUNING_NAMES[TABLE_OF[e]],
                            table=TABLE_OF[e], entry=sys.modules[__name__]))]
    if fc.is_standin("gld23k", cfg):
        lines.append("STAND-IN: every number below is on GLD-23K's stand-in, not the paper's "
                     "data; " + ("each method tuned on it by App. H.2's two steps at each "
                                 "epoch count" if fc.tuned_here("gld23k", cfg) else
                                 "the paper's tuned hyperparameters are used untuned"))
    final = fc.seed_scores(df, "test_acc", "final")
    have = set(df["run"].unique())
    for e in epochs:
        lines.append(f"{e} epoch(s): final test accuracy (%): " + _table(final, e, methods))
    C, out = CLAIMS, []
    t = fc.target("gld23k", cfg)
    proto = fc.protocol("gld23k", cfg)
    card = lambda e: fc.card("gld23k", cfg, df[df.epochs == e]).plus(  # noqa: E731
        *(fc._reached_item(df[df.epochs == e], t),) if t is not None else ())
    speed = {}
    for e in epochs:
        if not {run_name(e, m) for m in methods} <= have:
            continue
        if t is None:
            break
        to = {m: fc.rounds_of(df, run_name(e, m), t) for m in methods}
        speed[e] = to
        if e == 1:
            parts = [vd.faster(C["16a"], to["fedada2"], to[m], horizon=cfg.rounds,
                               what=f"FedAda2 vs {fc.label(m, True)}: rounds to {100 * t:g} %")
                     for m in methods if m != "fedada2"]
            parts += [vd.faster(C["16a"], to["fedadam"], to[m], horizon=cfg.rounds,
                                what=f"FedAdam vs {fc.label(m, True)} (second)")
                      for m in methods if m not in ("fedada2", "fedadam")]
            out.append(vd.every(C["16a"], parts, what="FedAda2 fastest, FedAdam second",
                                card=card(1), protocol=proto, scope="1 epoch"))
    if t is None:
        out.append(vd.missing(C["16a"], "FedAda2 fastest", "no absolute target declared for "
                              "the real task (fedada2_common.TARGETS)"))
    if 1 in speed and 20 in speed:
        def advantage(e):        # FedAda2's log speed-up over the fastest other method
            to = speed[e]
            rival = min((m for m in methods if m != "fedada2"),
                        key=lambda m: np.nanmean(np.minimum(to[m], cfg.rounds + 1)))
            cap = cfg.rounds + 1
            return np.log(np.minimum(to[rival], cap) / np.minimum(to["fedada2"], cap))
        shrink = advantage(1) - advantage(20)
        out.append(vd.exceeds(C["16b"], shrink, 0.0, what="FedAda2's log speed-up over the "
                              "fastest other method at 1 epoch minus at 20 epochs",
                              card=card(1), protocol=proto))
    if 20 in epochs and {run_name(20, m) for m in JOINT + ('fedadam',)} <= have:
        adam = fc.seeds_of(df, run_name(20, "fedadam"))
        parts = [vd.size(C["16c"], fc.seeds_of(df, run_name(20, m)) - adam, 0.0, SMALL,
                         unit="pp", scale=100,
                         what=f"{fc.label(m, True)} - FedAdam final test accuracy in (0, "
                              f"{100 * SMALL:g}] pp") for m in JOINT]
        out.append(vd.every(C["16c"], parts, what="joint above FedAdam by a small margin",
                            card=card(20), protocol=proto, scope="20 epochs"))
    if 5 in epochs and {run_name(5, m) for m in methods} <= have:
        five = df[df.epochs == 5]
        out += fc.ordering_claims(C, ("16d", "16e", "16f"), five,
                                  lambda m: run_name(5, m), cfg, "gld23k", scope="5 epochs")
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
