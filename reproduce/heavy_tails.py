"""FedAda2 heavy-tailed noise on quadratics (Props. 2/9, 10, 5/14; Thm 4/13; spec section 2).

``F_i(x) = x^2/2 + xi_i x``: ``student_t`` with ``xi_i ~ t_{i+1}`` (only client 1 has an
infinite variance) and ``cauchy`` with one ``Cauchy(0, 0.2)`` client among ``N(0, 1)`` ones;
``N = 10`` clients, ``s = 3`` per round with client 1 always among them (spec 2.8 (b)), one
local step, ``x_0 = 1``. FedAvg, client AdaGrad (Prop. 9 (ii)'s ``1/(t+2)`` and (iv)'s
``1/t^2`` schedules, ``eps = 0.5``), clipped SGD and server-only AdaGrad, all on the same
noise draws, over ``--paths`` independent Monte-Carlo paths (vectorised,
:mod:`sims.experiments.montecarlo`; reproducible from ``--seed0``). See
:mod:`sims.experiments.synthetic.heavy_tails` for every constant.

The claims: FedAvg's ``E|grad f(x_T)|^2`` is infinite (``t_2``; also ``E|grad f|`` for
Cauchy), so its estimates keep growing with the number of paths, its sample maximum grows
without bound, its tail index is about 2 (1 for Cauchy) and the largest path keeps a share
of order one of the total; client AdaGrad (and the clipped and server-adaptive controls)
stay under a deterministic bound: flat estimates, vanishing largest-path share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from sims.experiments.synthetic import heavy_tails as ht
from sims.experiments.synthetic import torch_threads

from . import common, plotting
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Props. 2/9, 10, 5/14, Thm 4/13"
TITLE = "heavy-tailed client noise on quadratics: FedAvg vs client AdaGrad (Monte Carlo)"
DEFAULT_COST = "about 40 s (200,000 paths, 10 rounds, both noises, 5 methods)"
DEVICES = ("cpu",)       # vectorised numpy/torch Monte Carlo on the CPU

LABELS = {"fedavg": "FedAvg", "client_adagrad": "client AdaGrad, 1/(t+2)",
          "client_adagrad_iv": "client AdaGrad, 1/t^2", "clipped_sgd": "clipped SGD",
          "server_adagrad": "server-only AdaGrad"}
COLORS = dict(zip(ht.METHODS, sns.color_palette("deep", len(ht.METHODS))))


@dataclass
class Config(common.EntryConfig):
    seeds: int = 1
    rounds: int = 10
    paths: int = 200_000
    noises: str = "student_t,cauchy"
    methods: str = ",".join(ht.METHODS)
    local_steps: int = 1
    s: int = 3
    n_clients: int = 10
    sampler: str = "include_first"

    def scale(self):
        if self.full:
            self.paths, self.rounds = 1_000_000, 20
        if self.tiny:
            self.paths, self.rounds = 4_000, 3


def setup(cfg, noise) -> ht.HeavyTailSetup:
    return ht.HeavyTailSetup(noise, n_clients=cfg.n_clients, s=cfg.s, sampler=cfg.sampler,
                             local_steps=cfg.local_steps)


def runs(cfg):
    if cfg.paths < 100:
        raise common.EntryError(f"--paths must be >= 100, got {cfg.paths}")
    methods = common.flag_values(cfg, "methods")
    if not methods or set(methods) - set(ht.METHODS):
        raise common.EntryError(f"--methods must name one or more of {', '.join(ht.METHODS)}, "
                                f"got {cfg.methods!r}")
    out = []
    for noise in common.flag_values(cfg, "noises"):
        if noise not in ht.NOISES:
            raise common.EntryError(f"unknown noise {noise!r}; use {', '.join(ht.NOISES)}")

        def execute(cfg, seeds, progress, noise=noise):
            st = setup(cfg, noise)
            methods = common.flag_values(cfg, "methods")
            frames = []
            for seed in seeds:
                with torch_threads(1):
                    res = ht.run(st, cfg.paths, cfg.rounds, seed, methods, progress=progress)
                df = pd.DataFrame(ht.summarize(res, st))
                df.insert(0, "seed", seed)
                frames.append(df)
            df = pd.concat(frames, ignore_index=True)
            df.insert(0, "run", noise)
            df["noise"] = noise
            record = {"setup": st.__dict__, "paths": cfg.paths,
                      "methods": [m.describe() for m in st.methods(methods)],
                      "hill_k": ht.hill_k(cfg.paths),
                      "randomness": "numpy default_rng([seed, round, chunk]) per 2^20 paths"}
            return df, record
        out.append(common.Run(noise, {"noise": noise}, execute=execute,
                              rounds=cfg.rounds * cfg.seeds))
    return out


def _curve(df, method, metric):
    sub = df[(df.method == method) & (df.metric == metric)]
    table = sub.pivot_table(index="x", columns="seed", values="value")
    return table.index.to_numpy(), table.mean(axis=1).to_numpy()


def plot(df, cfg):
    noises = [n for n in common.flag_values(cfg, "noises") if n in set(df.noise)]
    if not noises:
        raise common.EntryError("heavy_tails: no results to draw")
    methods = [m for m in common.flag_values(cfg, "methods") if m in set(df.method)]
    fig, axes = plt.subplots(len(noises), 5, figsize=(24, 4.3 * len(noises)), squeeze=False)
    for row, noise in zip(axes, noises):
        sub = df[df.noise == noise]
        heavy = "t_2 client" if noise == "student_t" else "Cauchy(0, 0.2) client"
        for m in methods:
            kw = dict(color=COLORS[m], lw=1.6, label=LABELS.get(m, m))
            x, y = _curve(sub, m, "running_m2")
            row[0].plot(x, y, **kw)
            x, y = _curve(sub, m, "block_median_m2" if noise == "student_t" else "block_median_m1")
            row[1].plot(x, y, marker="o", ms=3, **kw)
            x, y = _curve(sub, m, "running_max")
            row[2].plot(x, y, **kw)
            bound = sub[(sub.method == m) & (sub.metric == "step_bound")].value
            if len(bound) and np.isfinite(bound.iloc[0]):
                row[2].axhline(bound.iloc[0], color=COLORS[m], ls=":", lw=1)
            x, y = _curve(sub, m, "survival")
            hill = sub[(sub.method == m) & (sub.metric == "hill")].value.mean()
            row[3].plot(x, np.where(y > 0, y, np.nan), color=COLORS[m], lw=1.6,
                        label=f"{LABELS.get(m, m)}: Hill {hill:.2f}")
            x, y = _curve(sub, m, "largest_share")
            row[4].plot(x, y, **kw)
        x, _ = _curve(sub, methods[0], "running_max")
        slope = 0.5 if noise == "student_t" else 1.0
        y0 = _curve(sub, "fedavg", "running_max")[1] if "fedavg" in methods else None
        if y0 is not None:
            row[2].plot(x, y0[-1] * (x / x[-1]) ** slope, "k--", lw=1,
                        label=f"slope {slope:g} (M^{slope:g})")
            xs, ys = _curve(sub, "fedavg", "survival")
            ok = ys > 0
            if ok.any():
                alpha = 2.0 if noise == "student_t" else 1.0
                ref = xs[ok][len(xs[ok]) // 2]
                yref = ys[ok][len(xs[ok]) // 2]
                row[3].plot(xs[ok], yref * (xs[ok] / ref) ** -alpha, "k--", lw=1,
                            label=f"slope -{alpha:g}")
        row[4].plot(x, 1.0 / x, "k:", lw=1, label="1/M")
        row[0].set(xscale="log", yscale="log", xlabel="paths M",
                   ylabel="mean of |grad f(x_T)|^2 over first M paths",
                   title=f"{heavy}: running 2nd-moment estimate")
        row[1].set(xscale="log", yscale="log", xlabel="block size M",
                   ylabel=("median over blocks of mean |grad f|^2" if noise == "student_t"
                           else "median over blocks of mean |grad f|"),
                   title="typical estimate with M paths")
        row[2].set(xscale="log", yscale="log", xlabel="paths M", ylabel="max |grad f(x_T)|",
                   title="sample maximum (dotted: a.s. bounds)")
        row[3].set(xscale="log", yscale="log", xlabel="a", ylabel="P(|grad f(x_T)| > a)",
                   title="survival function, Hill tail index")
        row[4].set(xscale="log", yscale="log", xlabel="paths M",
                   ylabel="max / sum of |grad f|^2", title="share of the largest path")
        for ax in row:
            ax.legend(fontsize=7)
    fig.suptitle(f"FedAda2 heavy-tailed quadratics: N={cfg.n_clients}, s={cfg.s} "
                 f"({cfg.sampler}), K={cfg.local_steps}, T={cfg.rounds} rounds, "
                 f"{cfg.paths:,} paths x {cfg.seeds} seed(s)", y=1.01)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedada2_heavy_tails")


def _value(df, noise, method, metric, x=None):
    sub = df[(df.noise == noise) & (df.method == method) & (df.metric == metric)]
    if x is not None:
        sub = sub[np.isclose(sub.x, x)]
    return float(sub.value.mean()) if len(sub) else math.nan


def _growth(df, noise, method, metric):
    sub = df[(df.noise == noise) & (df.method == method) & (df.metric == metric)].dropna()
    sub = sub.groupby("x").value.mean()
    sub = sub[sub.index >= 10]
    if len(sub) < 2:
        return math.nan, math.nan, math.nan
    return sub.iloc[-1] / sub.iloc[0], sub.index[0], sub.index[-1]


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_heavy_tails",)
CLAIMS = vd.claims(
    vd.Claim("1", "FedAda2", "with a heavy-tailed client, FedAvg's second-moment estimate grows "
             "without bound in the number of paths (Prop. 9 i, Cauchy: Prop. 10), while client "
             "AdaGrad's stays finite (Prop. 9 ii)", "every", "Props. 2/9-10; spec 5 claims 1, 2, 5"),
)
GROWS, FLAT = 1.15, 0.05     # "grows": x1.15 or more from small to large blocks; "flat": within 5 %


def check(df, cfg):
    """Per noise law, the claim's verdict from that noise's run; a noise whose run is missing
    (``--plot-only --available``) gets no verdict."""
    lines, out = [], []
    c = CLAIMS["1"]
    present = set(df.noise) if "noise" in df else set()
    for noise in [n for n in common.flag_values(cfg, "noises") if n not in present]:
        out.append(vd.missing(c, "FedAvg grows, client AdaGrad flat", "run missing", scope=noise))
    if not len(df):
        return lines + out
    from . import regime as rg
    card = rg.RegimeCard([rg.value("paths", cfg.paths, 200_000, rg.at_least(10_000),
                                   "spec 2.8: the growth shows over decades of paths")])
    methods = [m for m in common.flag_values(cfg, "methods") if m in set(df.method)]
    for noise in [n for n in common.flag_values(cfg, "noises") if n in present]:
        metric = "block_median_m2"
        lines.append(f"{noise}: typical E|grad f(x_T)|^2 estimate, growth from small to large "
                     f"blocks of paths; Hill tail index (k={ht.hill_k(cfg.paths)}); max; "
                     f"largest-path share at M={cfg.paths:,}")
        for m in methods:
            g, lo, hi = _growth(df, noise, m, metric)
            g1, _, _ = _growth(df, noise, m, "block_median_m1")
            lines.append(f"  {m:18s} m2 x{g:.3g} (M {lo:.0f}->{hi:.0f}), m1 x{g1:.3g}, "
                         f"Hill {_value(df, noise, m, 'hill'):.2f}, "
                         f"max {_value(df, noise, m, 'running_max', cfg.paths):.3g} "
                         f"(a.s. bound {_value(df, noise, m, 'step_bound'):.3g}), "
                         f"share {_value(df, noise, m, 'largest_share', cfg.paths):.2e}")
        if not ("fedavg" in methods and "client_adagrad" in methods):
            out.append(vd.missing(c, "FedAvg grows, client AdaGrad flat", "--methods leaves "
                                  "fedavg or client_adagrad out", scope=noise))
            continue
        g_avg, _, _ = _growth(df, noise, "fedavg", metric)
        g_ada, _, _ = _growth(df, noise, "client_adagrad", metric)
        out.append(vd.every(c, [
            vd.holds(c, [g_avg], GROWS, side=">=",
                     what=f"FedAvg's second-moment estimate grows (x{GROWS:g} or more)"),
            vd.exact(c, g_ada, 1.0, tol=FLAT,
                     what=f"client AdaGrad's stays flat (x1 within {100 * FLAT:g} %)")],
            what="FedAvg grows, client AdaGrad flat", card=card, scope=noise,
            protocol="none: the propositions' settings"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
