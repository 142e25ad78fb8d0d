"""Fed-EF compression discrepancy q_A (Assumption 3; App. C, Figures 16-18, and 19's quantity).

1. Simulation (Figs. 16-18, spec 4.10): ``n = 5`` heterogeneous clients, ``d = 1100``,
   Gaussian ``N(0, 0.01^2)`` or Laplace ``Lap(0, 0.01)`` coordinates with each client's
   strong block scaled by ``s in {2, 10, 100}``; TopK-0.1 and Sign; the mean over ``--draws``
   draws of the per-draw ``q_A^2`` against the "compression of the average" ``q_C^2``.
   ``--layout disjoint`` (default: 5 blocks of 220, every coordinate strong for one client)
   or ``partial`` (5 blocks of 100, 600 coordinates weak everywhere); see
   :mod:`sims.experiments.synthetic.qa`.
   Figure 16 (Gaussian) and Figure 17 (Laplace) draw one draw's client vectors at each
   ``s``. The default is the paper's ``10^5`` draws per cell (``--draws``; the mean's
   standard error is printed beside it).
2. Training (Fig. 19's quantity): ``q_A^2`` of every round of a real Fed-EF-SGD run over the
   paper's 100 rounds, read from the engine hook ``RunOutput.metrics["qA2"]`` (computed over
   the round's participants by :meth:`sims.algorithms.fed_ef.FedEF.server_step`).
   ``--train-problems`` (default both): ``quadratic``, a heterogeneous quadratic (``n = 20``,
   ``d = 200``, 5 local steps, ``m = 10``, ``eta_l = --eta-l``), and ``mnist``, the MLP on
   20 clients of 300 samples cut from the 200-client label-shard partition of full MNIST
   (else the Fashion-MNIST stand-in, :func:`sims.data.paper_dataset`), ``m = 10``, one
   local epoch of batch 32, ``eta = 1``, ``eta_l = --mlp-eta-l`` (0.01, Fig. 19's).

The claims: Fig. 18, ``q_A^2 < 1`` for both compressors, both laws and every ``s`` (mean +
2 s.e.); Fig. 19, ``q_A`` "well below 1" throughout training, read here as every round's
``q_A^2 <= 0.5`` (:data:`sims.experiments.synthetic.qa.WELL_BELOW`: ``q_A <= 0.71``, where the
theory's constant ``q^2/(1-q^2)^3`` is 4 rather than unbounded); the check says for which
compressor and problem it fails, and from which round.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import make_compressor
from sims.data import dataset_label, paper_dataset
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from sims.store.results import tidy
from sims.experiments.synthetic import qa, torch_threads

from . import common, plotting
from . import verdicts as vd

PAPER, TARGET = "Fed-EF", "Figures 16-18 (and 19's quantity)"
TITLE = "compression discrepancy q_A on simulated heterogeneous gradients and in training"
DEFAULT_COST = ("about 3-4 min on one core (10^5 draws per cell, two distributions; 100-round "
                "Fed-EF runs on a quadratic and on the MLP; 6 min wall with the 2 cores shared "
                "4-9 ways); the filed run, --train-n 100 --train-m 50 (50 clients a round): "
                "about 5 min of run wall time on one core")

COMP_COLORS = {"topk-0.1": "C0", "sign": "C3", "topk-0.01": "C2"}


@dataclass
class Config(common.EntryConfig):
    seeds: int = 1
    rounds: int = 100                # rounds of the training runs (the paper's)
    draws: int = 100_000             # the paper's 10^5
    dists: str = "gaussian,laplace"
    scales: str = "2,10,100"
    layout: str = "disjoint"         # or partial (spec 4.10)
    k: float = 0.1
    n_sim: int = 5
    d_sim: int = 1100
    train_problems: str = "quadratic,mnist"
    train_compressors: str = "sign,topk-0.01,topk-0.1"
    train_n: int = 20
    train_m: int = 10
    eta: float = 1.0
    eta_l: float = 0.1                # the quadratic's local learning rate
    mlp_eta_l: float = 0.01           # the MLP's (Fig. 19's eta_l)
    dataset: str = "mnist"            # the MLP's data: full MNIST, else the stand-in

    def scale(self):
        if self.full:
            self.seeds = 3
        if self.tiny:
            self.draws, self.rounds, self.dataset = 200, 4, "mnist-subset"


TRAIN_PROBLEMS = ("quadratic", "mnist")


def _train_problem(cfg, which):
    if which == "quadratic":
        return heterogeneous_quadratic(cfg.train_n, 200, L=1.0, mu=0.1, sigma=0.5,
                                       heterogeneity=1.0, local_steps=5, x0=3.0)
    ds = paper_dataset(cfg.dataset, cfg.data_dir)
    total = 200 if ds != "mnist-subset" else None
    return common.cached_problem(dataset=ds, model="mlp", n_clients=cfg.train_n,
                                 subset_of=total, data_dir=cfg.data_dir, device=cfg.device)


def _problem_label(cfg, which):
    if which == "quadratic":
        return "quadratic"
    return f"MLP on {dataset_label(cfg.dataset, cfg.data_dir)}"


def runs(cfg):
    if cfg.layout not in qa.LAYOUTS:
        raise common.EntryError(f"--layout must be one of {qa.LAYOUTS}, got {cfg.layout!r}")
    if cfg.draws < 1:
        raise common.EntryError(f"--draws must be >= 1, got {cfg.draws}")
    out = []
    scales = common.flag_values(cfg, "scales", float)
    for dist in common.flag_values(cfg, "dists"):
        if dist not in qa.DISTS:
            raise common.EntryError(f"unknown distribution {dist!r}; use {qa.DISTS}")

        def execute(cfg, seeds, progress, dist=dist):
            rows = []
            for seed in seeds:
                with torch_threads(1):
                    res = qa.simulate(dist, scales, cfg.draws, seed, n=cfg.n_sim, d=cfg.d_sim,
                                      layout=cfg.layout, k=cfg.k,
                                      progress=lambda f: progress(f / len(seeds)))
                for (s, comp), val in res.items():
                    for name, arr in val.items():
                        stats = {name: arr.mean(), f"{name}_se": arr.std() / math.sqrt(len(arr)),
                                 f"{name}_p99": np.quantile(arr, 0.99), f"{name}_max": arr.max()}
                        rows += [{"seed": seed, "round": 0, "metric": k, "value": float(v),
                                  "s": s, "compressor": comp} for k, v in stats.items()]
            df = pd.DataFrame(rows)
            df.insert(0, "run", f"sim_{dist}_{cfg.layout}")
            df["part"], df["dist"], df["layout"] = "sim", dist, cfg.layout
            return df, {"draws": cfg.draws, "n": cfg.n_sim, "d": cfg.d_sim,
                        "layout": cfg.layout, "scales": scales,
                        "randomness": "numpy default_rng([seed, chunk]) per 1000 draws"}
        out.append(common.Run(f"sim_{dist}_{cfg.layout}",
                              {"part": "sim", "dist": dist, "layout": cfg.layout},
                              execute=execute, rounds=1))
    problems = common.flag_values(cfg, "train_problems")
    for which in problems:
        if which not in TRAIN_PROBLEMS:
            raise common.EntryError(f"--train-problems: {which!r} is not one of "
                                    f"{TRAIN_PROBLEMS}")
    compressors = common.flag_values(cfg, "train_compressors")
    for which, comp in [(w, c) for w in problems for c in compressors]:
        name = f"train_{which}_{comp}"
        eta_l = cfg.eta_l if which == "quadratic" else cfg.mlp_eta_l
        params = {"part": "train", "compressor": comp, "train_problem": which, "eta_l": eta_l}
        if which == "mnist":
            params["dataset"] = paper_dataset(cfg.dataset, cfg.data_dir, notice=False)

        def execute(cfg, seeds, progress, comp=comp, name=name, params=params, which=which):
            prob = _train_problem(cfg, which)
            alg = FedEF(eta=cfg.eta, eta_l=params["eta_l"], compressor=make_compressor(comp))
            part = Participation("fixed", m=cfg.train_m)
            with torch_threads(1):
                res = engine.run(prob, alg, part, cfg.rounds, seeds,
                                 eval_every=max(1, cfg.rounds // 10),
                                 progress=lambda t: progress(1))
            return tidy(res, name, params), {"algorithm": alg.describe(),
                                             "participation": part.describe(),
                                             "problem": common.describe_problem(prob)}
        out.append(common.Run(name, params, execute=execute))
    return out


def _scatter(ax, cfg, dist, s):
    """One draw's client vectors (Fig. 16: Gaussian, Fig. 17: Laplace) at scale ``s``."""
    rng = np.random.default_rng([cfg.seed0, 10 ** 6])
    mask = qa.strong_mask(cfg.n_sim, cfg.d_sim, cfg.layout)
    x = qa.client_vectors(qa.base_draws(rng, 1, cfg.n_sim, cfg.d_sim, dist)[0], mask, s)
    palette = sns.color_palette("tab10", cfg.n_sim)
    for i in range(cfg.n_sim):
        ax.plot(np.arange(cfg.d_sim), x[i], ".", ms=1.5, color=palette[i], label=f"client {i + 1}")
    fig_no = {"gaussian": 16, "laplace": 17}[dist]
    ax.set(xlabel="dimension", ylabel="simulated gradient",
           title=f"Fig. {fig_no}: {dist.capitalize()}, strong block x s={s:g} ({cfg.layout})")
    ax.legend(fontsize=6, markerscale=5, loc="upper right")


def plot(df, cfg):
    fig, axes = plt.subplots(3, 3, figsize=(16, 12.5))
    scales = common.flag_values(cfg, "scales", float)
    for row, dist in zip(axes[:2], ["gaussian", "laplace"]):
        for ax, s in zip(row, scales[:3]):
            _scatter(ax, cfg, dist, s)
    sim = df[df.part == "sim"] if "part" in df else df.iloc[:0]
    for ax, dist in zip(axes[2][:2], ["gaussian", "laplace"]):
        sub = sim[sim.dist == dist] if "dist" in sim else sim
        for comp, grp in sub.groupby("compressor"):
            color = COMP_COLORS.get(comp, "k")
            for metric, ls, label in (("qA2", "-", "q_A^2"), ("qC2", "--", "q_C^2")):
                g = grp[grp.metric == metric].groupby("s").value.mean()
                se = grp[grp.metric == f"{metric}_se"].groupby("s").value.mean()
                ax.errorbar(g.index, g.values, yerr=2 * se.reindex(g.index).values, color=color,
                            ls=ls, marker="o" if ls == "-" else "s", ms=4, capsize=2,
                            label=f"{comp} {label}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xticks(scales, [f"{v:g}" for v in scales])
        ax.set(ylim=(0, 1.05), xlabel="scaling factor s", ylabel="mean over draws",
               title=f"Fig. 18, {dist.capitalize()}: q_A^2 (solid) vs q_C^2 (dashed), "
                     f"{cfg.draws:,} draws")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    train = df[df.part == "train"] if "part" in df else df.iloc[:0]
    ax = axes[2][2]
    for which, ls in (("mnist", "-"), ("quadratic", ":")):
        sub = train[train.train_problem == which] if "train_problem" in train else train.iloc[:0]
        if len(sub):
            comps = sorted(set(sub.compressor))
            plotting.band_plot(ax, sub, "qA2", "compressor", linestyle=ls,
                               palette=[COMP_COLORS.get(c, "k") for c in comps],
                               label=lambda c, w=which: f"{c}, {_problem_label(cfg, w)}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(qa.WELL_BELOW, color="gray", lw=0.8, ls="--")
    ax.set(ylim=(0, 1.1), ylabel="q_A^2 of the round",
           title=f"Fig. 19's quantity in Fed-EF-SGD training\n(n={cfg.train_n}, "
                 f"m={cfg.train_m}); dashed: 'well below' line {qa.WELL_BELOW:g}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)
    fig.suptitle("Fed-EF compression discrepancy q_A (Assumption 3)", y=1.0)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedef_qa_sim")


def table(df) -> pd.DataFrame:
    sim = df[(df.part == "sim") & df.metric.isin(["qA2", "qC2", "qA2_se", "qA2_max"])]
    return sim.pivot_table(index=["dist", "s", "compressor"], columns="metric", values="value")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedef_qa_sim",)
CLAIMS = vd.claims(
    vd.Claim("E12", "Fed-EF", "simulated q_A^2 < 1 for TopK-0.1 and Sign, Gaussian and Laplace "
             "gradients, s in {2, 10, 100}", "every", "Fig. 18, App. C.1; spec 5 E12"),
    vd.Claim("E13x", "Fed-EF", "E13 beyond the paper's CNN: in Fed-EF-SGD training of the MLP "
             "and a quadratic, q_A^2 stays well below 1 (read: <= 0.5 in every round)", "every",
             "Fig. 19, App. C.2; spec 5 E13 (fedef_qa_train decides E13 itself)"),
)
PAPER_M = 100            # Fig. 19: about 100 clients a round (spec 4.11)


def check(df, cfg):
    df, lines = common.usable(sys.modules[__name__], cfg, df)
    from . import regime as rg
    out = []
    if "part" in df and (df.part == "sim").any():
        tab = table(df)
        parts = []
        for (dist, s, comp), row in tab.iterrows():
            lines.append(f"{dist:8s} s={s:<5g} {comp:9s} q_A^2 = {row.qA2:.4f} +/- "
                         f"{2 * row.qA2_se:.4f} (q_C^2 = {row.qC2:.3f}; largest single draw "
                         f"{row.qA2_max:.3f})")
            est = vd.Estimate.summary(row.qA2, row.qA2_se * math.sqrt(cfg.draws), cfg.draws)
            parts.append(vd.exceeds(CLAIMS["E12"], est, 1.0, direction=-1,
                                    what=f"{dist} s={s:g} {comp}: mean q_A^2 over draws below 1"))
        card = rg.RegimeCard([rg.value("draws per cell", cfg.draws, 100_000, rg.info(),
                                       "App. C.1: 10^5")])
        out.append(vd.every(CLAIMS["E12"], parts, what=f"q_A^2 < 1 in all {len(tab)} cells",
                            card=card, protocol="none: Monte-Carlo draws"))
    elif common.flag_values(cfg, "dists"):
        out.append(vd.missing(CLAIMS["E12"], "q_A^2 < 1 in every cell", "simulation runs missing"))
    if "part" in df and (df.part == "train").any():
        train = common.healthy(df[(df.part == "train") & (df.metric == "qA2")])
        parts = []
        for (which, comp), grp in train.groupby(["train_problem", "compressor"]):
            per_round = grp.groupby("round").value.mean()
            finite = per_round.dropna()
            if len(finite):
                lines.append(f"training ({_problem_label(cfg, which)}) {comp}: q_A^2 over "
                             f"{len(finite)} rounds mean {finite.mean():.3f}, first "
                             f"{finite.iloc[0]:.3f}, last {finite.iloc[-1]:.3f}, max "
                             f"{finite.max():.3f}")
            parts.append(vd.holds(CLAIMS["E13x"], per_round.to_numpy(float), qa.WELL_BELOW,
                                  what=f"{_problem_label(cfg, which)} {comp}: per-round q_A^2 "
                                       f"<= {qa.WELL_BELOW:g}"))
        card = rg.RegimeCard([rg.clients_per_round(cfg.train_m, PAPER_M,
                                                   source="Fig. 19 (spec 4.11)"),
                              rg.horizon(cfg.rounds, 100, source="100 rounds")])
        out.append(vd.every(CLAIMS["E13x"], parts, what="q_A^2 well below 1 during training",
                            card=card, protocol="none: Fed-EF-SGD at the entry's rates"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
