"""FedAda2 Figure 5: training and test accuracy (and loss) on CIFAR-100 at the best points.

The six methods of Figure 1 at Tables 4-5's CIFAR-100 hyperparameters (Adam everywhere except
FedAdaGrad), ViT-S head fine-tuning over 1000 LDA(0.001) clients, 5 local epochs; "at each
logging step, train/test accuracy and loss evaluation is done over all of training and testing
data" (the paper, 20 seeds): four panels, training accuracy, test accuracy, training loss,
test loss. The training accuracy is measured here on the same training samples as the training
loss (``--eval-train-samples``; 0 = all of them, the paper's protocol and ``--full``'s).

Claim (spec 5, claim 15; Sec. 6.1): every adaptive method above FedAvg; the jointly adaptive
methods (DJA, Joint w/o precond, FedAda2) converge faster than FedAdam; FedAda2 about DJA; and
(Figure 5's own point) training and test curves look alike (robust evaluation): the
train-test accuracy gap is small for every method. This entry decides claim 15 (Figure 1's
CIFAR-100 panel prints the same comparison and names this entry), with the FedAda2 entries'
one definition of each comparison (:func:`reproduce.fedada2_common.ordering_claims`): above
FedAvg in final test accuracy paired by seed, "faster" as rounds to an absolute target
accuracy, "about equal" as an equivalence test within one point.

Stand-in (CPU default): CIFAR-100's client structure (1000 LDA(0.001) clients) on a 100-class
composite task of Fashion-MNIST pairs (:mod:`reproduce.fedada2_common`); CIFAR-100's participation is not
stated by the paper (10 clients a round, GLD-23K's rate).

Tuning (``--tuning``): ``paper`` (the default) runs Tables 4-5's points, tuned by the paper
on the real task, so every comparison's card fails on the stand-in ("tuned on the task
run"); ``two-step`` first tunes every method on the stand-in by App. H.2's two steps
(:func:`reproduce.fedada2_common.two_step_tuning`, the mechanism :mod:`reproduce.fedada2_dp`
uses) with H.1's running-10 rule at the plotted horizon on ``--tune-seeds`` seeds (1, the
paper's), over :data:`GRIDS`: two values an axis on H.2's grids, each method's Tables 4-5
point in one of the steps (43 cells), then runs the comparison at the picks.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch

from . import common, plotting
from . import fedada2_common as fc
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Figure 5"
TITLE = "CIFAR-100: training and test accuracy and loss of six methods at their best points"
DEFAULT_COST = ("166 CPU-s measured with --threads 1 (6 methods x 5 seeds x 150 rounds, "
                "CIFAR-100's 100-class composite stand-in; 3 min 22 s of wall time on two "
                "shared cores)")

JOINT = ("dja", "joint-no-precond", "fedada2")
PANELS = (("train_acc", "training accuracy"), ("test_acc", "test accuracy"),
          ("train_loss", "training loss"), ("test_loss", "test loss"))


@dataclass
class Config(fc.Config):
    settings: str = "cifar100"
    seeds: int = 5
    rounds: int = 150
    tuning: str = "paper"          # paper (Tables 4-5's points) | two-step (App. H.2 here)
    tune_seeds: int = 1            # selection seeds of the two-step tuning

    def validate(self):
        fc.Config.validate(self)
        if fc.items(self.settings) != ["cifar100"]:
            raise common.EntryError("--settings: Figure 5 is CIFAR-100 only (cifar100)")
        fc.validate_tuning(self)


#: ``--tuning two-step``'s grids: CIFAR-100's of the FedAda2 image tunings
#: (:data:`reproduce.fedada2_common.IMAGE_GRIDS`: two values an axis on H.2's grids, each
#: method's Tables 4-5 point in one of the steps; 43 cells of ``--rounds`` rounds on
#: ``--tune-seeds`` seeds), under the one CIFAR-100 tuning name every tuned entry shares
GRIDS = fc.IMAGE_GRIDS["cifar100"]
GRIDS_NAME = fc.TUNING_NAMES["cifar100"]


def grids(cfg) -> dict:
    """:data:`GRIDS`; with ``--tiny`` one point a step."""
    return fc.image_grids("cifar100", cfg)


class WithTrainAccuracy:
    """``problem`` whose evaluation adds ``train_acc``: the plain accuracy on the training
    samples its training loss is evaluated on (``eval_index``: all of them with
    ``--eval-train-samples 0``)."""

    def __init__(self, problem):
        self._problem = problem

    def __getattr__(self, name):
        return getattr(self._problem, name)

    def evaluate(self, theta, test: bool = True, grad: bool = True):
        import inspect
        p = self._problem
        out = (p.evaluate(theta, test, grad=grad)
               if "grad" in inspect.signature(p.evaluate).parameters else p.evaluate(theta, test))
        idx = torch.as_tensor(p.eval_index, device=p.x.device)
        out["train_acc"] = p._accuracy(theta, p.x[idx], p.y[idx])[0].to(out["train_loss"].dtype)
        return out


def runs(cfg):
    out = fc.tuned_runs("cifar100", cfg, GRIDS_NAME, grids(cfg),
                        "two-step tuning on the stand-in (App. H.2)")
    for run in out:
        build = run.build
        run.build = lambda build=build: (WithTrainAccuracy(build()[0]), *build()[1:])
    return out


def plot(df, cfg):
    df = common.healthy(df)
    methods = fc.SETTINGS["cifar100"].methods
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, (metric, name) in zip(axes, PANELS):
        fc.ci_plot(ax, df, metric, methods, logy="loss" in metric)
        ax.set_ylabel(name)
        ax.set_title(name)
    axes[0].legend(fontsize=7)
    points = ("points tuned here (App. H.2's two steps)" if fc.tuned_here("cifar100", cfg)
              else "Tables 4-5 hyperparameters")
    fig.suptitle(f"FedAda2 Fig. 5: {fc.setting_title('cifar100', cfg)}, {points} "
                 f"(mean and 95% interval over {cfg.seeds} seeds)", fontsize=10)
    return plotting.save(fig, cfg.figures, "fedada2_fig5")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_fig5",)
CLAIMS = vd.claims(
    vd.Claim("15a", "FedAda2", "CIFAR-100: every adaptive method ends above FedAvg", "every",
             "Sec. 6.1; spec 5 claim 15"),
    vd.Claim("15b", "FedAda2", "CIFAR-100: joint adaptivity (DJA, Joint w/o precond, FedAda2) "
             "converges faster than FedAdam", "faster", "Sec. 6.1; spec 5 claim 15"),
    vd.Claim("15c", "FedAda2", "CIFAR-100: FedAda2 about equal to DJA in accuracy",
             "about equal", "Sec. 6.1; spec 5 claim 15"),
    vd.Claim("F5", "FedAda2", "training and test curves look alike (robust evaluation): every "
             "method's train - test accuracy gap is small", "every", "Figure 5"),
)

GAP = 0.05       # "small": a train - test accuracy gap within 5 points


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    methods = fc.SETTINGS["cifar100"].methods
    name = lambda m: fc.run_name("cifar100", m)  # noqa: E731
    lines = [f"setting: {fc.data_note(cfg)}; m = {fc.participants('cifar100', cfg)} clients a "
             f"round, {cfg.rounds} rounds, {cfg.seeds} seeds, "
             + ("points tuned here" if fc.tuned_here("cifar100", cfg) else "Tables 4-5")] + notes
    lines += fc.tuning_lines("cifar100", cfg, GRIDS_NAME, entry=sys.modules[__name__])
    if fc.is_standin("cifar100", cfg):
        lines.append("STAND-IN: every number below is on CIFAR-100's stand-in, not the paper's "
                     "data; " + ("each method tuned on it by App. H.2's two steps"
                                 if fc.tuned_here("cifar100", cfg) else
                                 "the paper's tuned hyperparameters are used untuned"))
    final = {k: fc.seed_scores(df, k, "final") for k in ("train_acc", "test_acc")}
    for metric in ("train_acc", "test_acc"):
        lines.append(f"final {metric.replace('_acc', '')} accuracy (%, 95% interval): "
                     + " | ".join(f"{fc.label(m, True)} "
                                  f"{fc.fmt_pp(fc.score_ci(final[metric], name(m)))}"
                                  for m in methods))
    if set(map(name, methods)) - set(df["run"].unique()):
        return lines + [vd.missing(c, c.statement) for c in CLAIMS.values()]
    out = fc.ordering_claims(CLAIMS, ("15a", "15b", "15c"), df, name, cfg, "cifar100",
                             scope="CIFAR-100")
    card = fc.card("cifar100", cfg, df)
    gaps = [vd.size(CLAIMS["F5"], fc.seeds_of(df, name(m), "train_acc")
                    - fc.seeds_of(df, name(m), "test_acc"), -GAP, GAP, unit="pp", scale=100,
                    what=f"{fc.label(m, True)} train - test accuracy") for m in methods]
    out.append(vd.every(CLAIMS["F5"], gaps, what=f"every train - test gap within "
                        f"{100 * GAP:g} points", card=card,
                        protocol=fc.protocol("cifar100", cfg), scope="CIFAR-100"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
