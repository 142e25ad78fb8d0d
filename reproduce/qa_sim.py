"""Fed-EF compression discrepancy q_A (Assumption 3; App. C, Figures 16-18, and 19's quantity).

1. Simulation (Figs. 16-18, spec 4.10): ``n = 5`` heterogeneous clients, ``d = 1100``,
   Gaussian ``N(0, 0.01^2)`` or Laplace ``Lap(0, 0.01)`` coordinates with each client's
   strong block scaled by ``s in {2, 10, 100}``; TopK-0.1 and Sign; the mean over ``--draws``
   draws of the per-draw ``q_A^2`` against the "compression of the average" ``q_C^2``.
   ``--layout disjoint`` (default: 5 blocks of 220, every coordinate strong for one client)
   or ``partial`` (5 blocks of 100, 600 coordinates weak everywhere); see
   :mod:`sims.synthetic.qa`.
2. Training (Fig. 19's quantity): ``q_A^2`` of every round of a real Fed-EF-SGD run, read
   from the engine hook ``RunOutput.metrics["qA2"]`` (computed over the round's participants
   by :meth:`sims.algorithms.fed_ef.FedEF.server_step`). Default ``--train-problem
   quadratic``: a heterogeneous quadratic (``n = 20``, ``d = 200``, 5 local steps, ``m = 10``);
   ``mnist`` runs the MLP on the MNIST subset (the setting of the image benchmarks, slower).

The claim (Fig. 18): ``q_A^2 < 1`` for both compressors, both laws and every ``s``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from sims import engine
from sims.algorithms.fed_ef import FedEF
from sims.compress import make_compressor
from sims.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from sims.results import tidy
from sims.synthetic import qa, torch_threads

from . import common, plotting

PAPER, TARGET = "Fed-EF", "Figures 16-18 (and 19's quantity)"
TITLE = "compression discrepancy q_A on simulated heterogeneous gradients and in training"
DEFAULT_COST = "about 25 s (5,000 draws per cell; three 30-round Fed-EF runs on a quadratic)"

COMP_COLORS = {"topk-0.1": "C0", "sign": "C3", "topk-0.01": "C2"}


@dataclass
class Config(common.EntryConfig):
    seeds: int = 1
    rounds: int = 30                 # rounds of the training runs
    draws: int = 5_000
    dists: str = "gaussian,laplace"
    scales: str = "2,10,100"
    layout: str = "disjoint"         # or partial (spec 4.10)
    k: float = 0.1
    n_sim: int = 5
    d_sim: int = 1100
    train_problem: str = "quadratic"  # or mnist
    train_compressors: str = "sign,topk-0.01,topk-0.1"
    train_n: int = 20
    train_m: int = 10
    eta: float = 1.0
    eta_l: float = 0.1

    def scale(self):
        if self.full:
            self.draws, self.seeds, self.rounds, self.train_problem = 100_000, 2, 100, "mnist"
            self.eta_l = 0.01
        if self.tiny:
            self.draws, self.rounds = 200, 4


def _list(text, kind=str):
    return [kind(v.strip()) for v in str(text).split(",") if v.strip()]


def _train_problem(cfg):
    if cfg.train_problem == "quadratic":
        return heterogeneous_quadratic(cfg.train_n, 200, L=1.0, mu=0.1, sigma=0.5,
                                       heterogeneity=1.0, local_steps=5, x0=3.0)
    if cfg.train_problem == "mnist":
        return common.cached_problem(dataset="mnist", model="mlp", n_clients=cfg.train_n,
                                     data_dir=cfg.data_dir, device=cfg.device)
    raise common.EntryError(f"--train-problem must be quadratic or mnist, "
                            f"got {cfg.train_problem!r}")


def runs(cfg):
    if cfg.layout not in qa.LAYOUTS:
        raise common.EntryError(f"--layout must be one of {qa.LAYOUTS}, got {cfg.layout!r}")
    if cfg.draws < 1:
        raise common.EntryError(f"--draws must be >= 1, got {cfg.draws}")
    out = []
    scales = _list(cfg.scales, float)
    for dist in _list(cfg.dists):
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
            df.insert(0, "run", f"sim_{dist}")
            df["part"], df["dist"], df["layout"] = "sim", dist, cfg.layout
            return df, {"draws": cfg.draws, "n": cfg.n_sim, "d": cfg.d_sim,
                        "layout": cfg.layout, "scales": scales,
                        "randomness": "numpy default_rng([seed, chunk]) per 1000 draws"}
        out.append(common.Run(f"sim_{dist}_{cfg.layout}",
                              {"part": "sim", "dist": dist, "layout": cfg.layout},
                              execute=execute, rounds=1))
    for comp in _list(cfg.train_compressors):
        name = f"train_{cfg.train_problem}_{comp}"
        params = {"part": "train", "compressor": comp, "train_problem": cfg.train_problem}

        def execute(cfg, seeds, progress, comp=comp, name=name, params=params):
            prob = _train_problem(cfg)
            alg = FedEF(eta=cfg.eta, eta_l=cfg.eta_l, compressor=make_compressor(comp))
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


def plot(df, cfg):
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    scales = _list(cfg.scales, float)
    rng = np.random.default_rng([cfg.seed0, 10 ** 6])
    mask = qa.strong_mask(cfg.n_sim, cfg.d_sim, cfg.layout)
    base = qa.base_draws(rng, 1, cfg.n_sim, cfg.d_sim, "gaussian")[0]
    palette = sns.color_palette("tab10", cfg.n_sim)
    for ax, s in zip(axes[0], scales[:3]):
        x = qa.client_vectors(base, mask, s)
        for i in range(cfg.n_sim):
            ax.plot(np.arange(cfg.d_sim), x[i], ".", ms=1.5, color=palette[i],
                    label=f"client {i + 1}")
        ax.set(xlabel="dimension", ylabel="simulated gradient",
               title=f"Gaussian clients, strong block scaled by s={s:g} ({cfg.layout})")
        ax.legend(fontsize=7, markerscale=5)
    sim = df[df.part == "sim"] if "part" in df else df.iloc[:0]
    for ax, dist in zip(axes[1][:2], ["gaussian", "laplace"]):
        sub = sim[sim.dist == dist]
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
        ax.set(ylim=(0, 1.05), xlabel="scaling factor s",
               ylabel="mean over draws", title=f"{dist.capitalize()}: q_A^2 (solid) vs q_C^2 "
               f"(dashed), {cfg.draws:,} draws")
        ax.legend(fontsize=7)
    train = df[df.part == "train"] if "part" in df else df.iloc[:0]
    ax = axes[1][2]
    if len(train):
        plotting.band_plot(ax, train, "qA2", "compressor",
                           palette=[COMP_COLORS.get(c, "k") for c in sorted(set(train.compressor))])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set(ylim=(0, 1.1), ylabel="q_A^2 of the round",
               title=f"Fed-EF-SGD training ({cfg.train_problem}, n={cfg.train_n}, "
                     f"m={cfg.train_m}): q_A^2 per round")
        ax.legend(fontsize=7)
    fig.suptitle("Fed-EF compression discrepancy q_A (Assumption 3)", y=1.01)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedef_qa_sim")


def table(df) -> pd.DataFrame:
    sim = df[(df.part == "sim") & df.metric.isin(["qA2", "qC2", "qA2_se", "qA2_max"])]
    return sim.pivot_table(index=["dist", "s", "compressor"], columns="metric", values="value")


def check(df, cfg):
    lines = []
    if "part" in df and (df.part == "sim").any():
        tab = table(df)
        for (dist, s, comp), row in tab.iterrows():
            lines.append(f"{dist:8s} s={s:<5g} {comp:9s} q_A^2 = {row.qA2:.3f} +/- "
                         f"{2 * row.qA2_se:.3f} (q_C^2 = {row.qC2:.3f}; largest single draw "
                         f"{row.qA2_max:.3f})")
        ok = bool((tab.qA2 + 2 * tab.qA2_se < 1).all())
        lines.append(f"-> q_A^2 < 1 in all {len(tab)} cells (mean + 2 s.e.): "
                     f"{'shows' if ok else 'does NOT show'} Fig. 18's claim")
    if "part" in df and (df.part == "train").any():
        train = df[(df.part == "train") & (df.metric == "qA2")]
        for comp, grp in train.groupby("compressor"):
            per_round = grp.groupby("round").value.mean()
            lines.append(f"training ({cfg.train_problem}) {comp}: q_A^2 per round mean "
                         f"{per_round.mean():.3f}, first {per_round.iloc[0]:.3f}, last "
                         f"{per_round.iloc[-1]:.3f}, max {per_round.max():.3f} "
                         f"({'< 1' if per_round.max() < 1 else '>= 1 in some round'})")
    return lines


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
