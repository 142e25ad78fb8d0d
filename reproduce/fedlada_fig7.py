"""FedLADA Figure 7 (Table 8): smooth activations, GeLU and SMU -- test accuracy and training
loss of FedAvg, FedAdam, LocalAdam and FedLADA.

The paper: the LeNet of spec 3.1 (:class:`sims.problems.models.LeNet`, ``activation="gelu"`` /
``"smu"``) on CIFAR-10 with Dirichlet-0.3 clients, T = 4000 rounds, each method at its best
hyperparameters (not listed); it says SCAFFOLD and FedCM "may diverge" with smooth
activations and leaves them out. ``--full`` runs that (LeNet, 5 local epochs, the paper's
crop of the 4-pixel-padded image, the paper's rates). **CPU stand-in:** one engine round of
FedLADA with the LeNet costs 20 s here (10 clients x 24 steps of batch 50, one core:
``benchmarks/fedlada_paper_cost.py --lenet-round``; a LeNet step is 150-180x the MLP's), so
the default's 16 replicas x 100 rounds would take about 9 hours and 10 minutes buy about 2
LeNet rounds a replica. The stand-in therefore keeps the smooth activations and the
Dirichlet-0.3 split and swaps the model for the 784-50-10 MLP with the same activation
(:class:`sims.problems.models.SmoothMLP`; about 0.2 s a round), on Fashion-MNIST as Figure 2.
``--model lenet`` runs the LeNet on the CPU anyway.

**Protocols.** The plain runs take the pilot's rates (:data:`reproduce.fedlada_common.CPU_LR`),
or with ``--paper-lr`` the paper's Sec. 4.1 rates. ``--tuned`` adds the tuned protocol: the
paper re-tuned each method for the smooth activations ("best hyperparameters"), so each
method's local rate is bracketed per activation on 3 seeds at this entry's horizon, edges
extended (:func:`reproduce.fedlada_tuning.retuned_run`), the other settings at
``fedlada_fig2``'s tuned picks; the picks' selection cells (seeds 0-2) are the tuned curves,
decided with scope ``tuned ACTIVATION``.

Claims (spec 4, E13), for each activation: FedAdam trains slowest, LocalAdam faster than
FedAvg, FedLADA has the best test accuracy and training loss. "Trains faster / slower" is
read as the training loss averaged over the evaluated rounds; "best" at the last round.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

import matplotlib.pyplot as plt
import seaborn as sns

from . import common, plotting
from . import fedlada_common as fc
from . import verdicts as vd
from . import fedlada_cost as fcost
from . import fedlada_tuning as ft
from . import protocols as pr

PAPER, TARGET = "FedLADA", "Figure 7"
TITLE = "smooth activations (GeLU, SMU): FedAvg, FedAdam, LocalAdam, FedLADA"
DEFAULT_COST = ("3-6 min with --threads 1 (4 methods x 2 activations x 2 seeds x 100 rounds, "
                "784-50-10 MLP with GeLU / SMU on Fashion-MNIST; 3.1-3.9 min measured, 175-223 s of CPU)")

METHODS = ("fedavg", "fedadam", "localadam", "fedlada")


@dataclass
class Config(fc.StandIn):
    rounds: int = 100
    dirichlet: float = 0.3
    model: str = "smooth-mlp"
    activations: str = "gelu,smu"

    def scale(self):
        fc.StandIn.scale(self)
        if self.full:
            self.model, self.rounds, self.dirichlet = "lenet", 4000, 0.3
        if self.tiny:
            self.activations = "gelu,smu"


@lru_cache(maxsize=4)
def _problem(cfg_key, activation):
    from sims.problems.image import build_image_problem
    cfg = dict(cfg_key)
    kw = {"model_kw": {"activation": activation}}
    if cfg["model"] == "smooth-mlp":
        kw["model_kw"]["hidden"] = cfg["hidden"]
    else:                            # the LeNet: the paper's crop of the 4-pixel-padded image
        kw.update(conv=True, eval_grad=False, augment="crop", pad=4)
    return build_image_problem(
        cfg["dataset"], cfg["model"], cfg["n_clients"], scheme="dirichlet", partition_seed=0,
        partition_kw={"alpha": cfg["dirichlet"], "variant": "per_client"},
        batch_size=cfg["batch_size"], local_epochs=cfg["local_epochs"],
        local_steps=cfg.get("local_steps") or None,
        eval_train_samples=cfg["eval_train_samples"] or None,
        test_samples=cfg["test_samples"] or None, device=cfg["device"],
        data=common.cached_dataset(cfg["dataset"], cfg["data_dir"]), **kw)


def problem(cfg, activation):
    return _problem(tuple(sorted(fc.problem_desc(cfg).items())),
                    activation)


def build_problem(desc: dict):
    """The sweep API's ``build_problem`` (the tuned protocol's cells): ``desc`` is
    :func:`reproduce.fedlada_common.problem_desc` with the ``activation``."""
    desc = dict(desc)
    act = desc.pop("activation")
    return _problem(tuple(sorted(desc.items())), act)


def _acts(cfg):
    return [a.strip() for a in cfg.activations.split(",") if a.strip()]


def make(cfg):
    """``hyper -> runs``: each method under each activation at ``hyper``'s settings."""
    def build_runs(hyper):
        out = []
        for act in _acts(cfg):
            for m in METHODS:
                hp = hyper(m)

                def build(m=m, act=act, hp=hp):
                    return problem(cfg, act), fc.make_algorithm(m, **hp), fc.participation(cfg)
                out.append(fc.engine_run(f"{act}_{m}", {"activation": act, "method": m, **hp},
                                         build, cfg.rounds, cfg.eval_every))
        return out
    return build_runs


def runs(cfg):
    """The plain runs (paper's or pilot's rates); with ``--tuned`` the tuned protocol: the
    paper re-tuned each method for the smooth activations, so the local rate is bracketed per
    activation (:func:`reproduce.fedlada_tuning.retuned_run`), the other settings at the base
    picks, and the picks' selection cells (3 seeds) are the tuned curves."""
    out = make(cfg)(lambda m, **o: fc.hyper(m, cfg, **o))
    if cfg.tuned:
        groups = {act: ({**fc.problem_desc(cfg), "activation": act}, build_problem,
                        {"activation": act}) for act in _acts(cfg)}
        out.append(ft.retuned_run(cfg, groups, METHODS))
    return out


def plot(df, cfg):
    return ft.plot_both(df, cfg, {}, lambda d, stem, proto: _plot(d, cfg, stem, proto),
                        "fedlada_fig7", "tuned protocol (local rate re-bracketed per "
                        "activation, the rest at fedlada_fig2's picks)")


def _plot(df, cfg, stem, protocol):
    df = common.healthy(df)
    acts = list(dict.fromkeys(df["activation"]))
    fig, axes = plt.subplots(len(acts), 2, figsize=(11, 3.8 * len(acts)), squeeze=False)
    colors = sns.color_palette("tab10", len(fc.METHODS))
    for row, act in zip(axes, acts):
        sub = df[df.activation == act]
        for ax, metric, ylabel, logy in ((row[0], "test_acc", "test accuracy", False),
                                         (row[1], "train_loss", "training loss", True)):
            for m in METHODS:
                plotting.band_plot(ax, sub[sub.method == m], metric, "method", logy=logy,
                                   label=fc.label, palette=[colors[fc.METHODS.index(m)]])
            if not logy:
                fc.zoom_accuracy(ax, sub, metric)
            ax.set_ylabel(ylabel)
            ax.set_title(act.upper())
            ax.legend(fontsize=7)
    fig.suptitle(f"FedLADA Fig. 7 stand-in, {protocol}: {fc.setting_text(cfg)}, "
                 f"{cfg.rounds} rounds (mean, band = seed range)", fontsize=9, y=1.01)
    return plotting.save(fig, cfg.figures, stem)


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_fig7", "fedlada_fig7_tuned")
CLAIMS = vd.claims(
    vd.Claim("E13", "FedLADA", "with smooth activations (GeLU, SMU) the ReLU picture stays: "
             "FedAdam converges slowly, LocalAdam is faster than FedAvg, FedLADA has the best test "
             "accuracy and training loss", "every", "Fig. 7; spec 4 E13"),
)


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    lines = [f"setting: {fc.setting_text(cfg)}, {cfg.rounds} rounds"] + notes
    plain, tuned = ft.split_protocols(df)
    proto = fc.protocol(cfg)
    lines += [f"{proto.kind} protocol ({proto.describe()}):", ""] + _claims(plain, cfg, proto)
    record = df[df["run"].astype(str).str.startswith("tuning:") |
                df["run"].astype(str).str.startswith(ft.TUNED)]
    tp = pr.protocol_of(record) if "protocol_kind" in record else None
    if cfg.tuned and tp is not None:
        lines += ["", f"tuned protocol ({tp.describe()}):", ""] + _retune_lines(record, tuned)
        lines += _claims(tuned, cfg, tp, "tuned")
    return lines


def _retune_lines(record, tuned):
    """The local-rate brackets per activation: final test accuracy % (3 seeds) per value."""
    L = ["Local rate re-bracketed per activation (final test accuracy %, mean over 3 seeds; "
         "* = pick):", "", "| activation | method | eta_l: acc |", "|---|---|---|"]
    acc = record[record.metric == "test_acc"]
    acc = acc[acc["round"] == acc.groupby(["run", "seed"])["round"].transform("max")]
    for (act, m), g in acc.groupby(["activation", "method"], sort=False):
        cells = []
        for run, p in g.groupby("run"):
            star = "*" if str(run).startswith(ft.TUNED) else ""
            cells.append((float(p["eta_l"].iloc[0]),
                          f"{float(p['eta_l'].iloc[0]):g}: {100 * p['value'].mean():.1f}{star}"))
        L.append(f"| {act} | {fc.label(m)} | {'; '.join(c for _, c in sorted(cells))} |")
    return L + [""]


def _claims(df, cfg, proto, scope=""):
    """E13 per activation on one protocol's runs (``scope``: ``ACT`` or ``tuned ACT``)."""
    lines, C, out = [], CLAIMS["E13"], []
    for act in dict.fromkeys(df["activation"]):
        sc = f"{scope} {act}".strip()
        sub = df[df.activation == act].assign(run=lambda d: d["method"])
        have = set(sub["run"])
        if not set(METHODS) <= have:
            out.append(vd.missing(C, "FedAdam slowest, LocalAdam > FedAvg, FedLADA best",
                                  f"methods missing: {', '.join(sorted(set(METHODS) - have))}",
                                  scope=sc))
            continue
        fin_acc = fc.final_by_seed(sub, "test_acc")
        lines.append(f"{act}: final test acc % " + ", ".join(
            f"{fc.label(m)} {fc.pm(fin_acc.loc[m])}" for m in METHODS))
        area = {m: vd.per_seed(sub, "train_loss", "mean", run=m) for m in METHODS}
        lines.append(f"{act}: training loss averaged over rounds " + ", ".join(
            f"{fc.label(m)} {area[m].mean():.4f}" for m in METHODS))
        acc = {m: vd.per_seed(sub, "test_acc", "final", run=m) for m in METHODS}
        loss = {m: vd.per_seed(sub, "train_loss", "final", run=m) for m in METHODS}
        parts = [vd.above(C, area["fedadam"], area[m], what=f"FedAdam's mean training loss "
                          f"above {fc.label(m)}'s") for m in METHODS if m != "fedadam"]
        parts.append(vd.above(C, area["localadam"], area["fedavg"], lower_is_better=True,
                              what="LocalAdam's mean training loss below FedAvg's"))
        parts += [vd.above(C, acc["fedlada"], acc[m], margin=fc.MARGIN, unit="pp", scale=100,
                           what=f"FedLADA's final test accuracy above {fc.label(m)}'s")
                  for m in METHODS if m != "fedlada"]
        parts += [vd.above(C, loss["fedlada"], loss[m], lower_is_better=True,
                           what=f"FedLADA's final training loss below {fc.label(m)}'s")
                  for m in METHODS if m != "fedlada"]
        prem = fc.localadam_premise(sub)
        if prem is not None:
            lines.append(f"{act}: {prem.text()}")
        card = fc.card(cfg, sub, premise=True).plus(*proto.card_items())
        out.append(vd.every(C, parts, what="FedAdam slowest, LocalAdam > FedAvg, FedLADA best",
                            card=card, protocol=proto, scope=sc))
    return lines + [""] + out


def full_work(cfg):
    """One ``(participants, local epochs)`` per run (:mod:`reproduce.fedlada_cost`)."""
    acts = [a for a in cfg.activations.split(",") if a.strip()]
    return [(fc.participation(cfg).m, fc.epochs(cfg))] * (len(acts) * len(METHODS))

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
