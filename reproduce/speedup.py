"""Fed-EF speedup in n (full participation, Corollary 1) and in m (partial participation
with n fixed, Theorem 4.4) on a quadratic with known constants, measured where the
corollary's noise term dominates; fitted log-log slopes with seed intervals beside the
theory's.

Problem: ``d = 20`` coordinates with curvatures from ``mu = 0.5`` to ``L = 1``,
homogeneous clients by default (``--heterogeneity 0``: every client's centre is the
optimum, so ``sigma_g^2 = 0`` and the corollary's condition ``T >= K n sigma_g^2/sigma^2``
holds), Gaussian gradient noise with ``E||xi||^2 = sigma^2 = 1``, ``K = 2`` local steps,
started at the optimum (``--x0 0``: ``f(theta_1) - f* = 0``). The bound then keeps only
its noise terms, and the measured ``||grad f||^2`` is a noise floor that separates by
``n``: at the corollary's learning rates the stationary level of SGD with effective step
``eta eta_l K ~ sqrt(K n / T)`` on an average of ``n`` noisy clients is ``~ eta eta_l sigma^2
/ n ~ 1/sqrt(T K n)``. (Started far away, ``--x0 3``, the mean is the transient
``(f(theta_1) - f*)/(eta eta_l T K)``, which also scales like ``n^(-1/2)`` while every
``n`` ends at the same floor; the earlier default measured that.)

Fed-EF-SGD with TopK-0.25 and the learning rates the rates prescribe
(:func:`sims.experiments.synthetic.speedup.learning_rates`): ``eta = sqrt(K n)``, ``eta_l = 0.4 / (K
sqrt(T))`` (full) and ``eta = sqrt(K m)``, ``eta_l = 0.4 sqrt(m) / (K sqrt(T n))`` (partial).
Measured: the theorem's left side ``(1/T) sum_t ||grad f(theta_t)||^2`` and the late floor
(mean over the second half of the rounds), per seed; the slope of each against ``n`` (or
``m``) is fitted per seed and given with its 95% Student-t interval over seeds.

Theory: slope ``-1/2`` in ``n`` (``O(1/sqrt(TKn))``). In ``m`` at fixed ``n`` Theorem 4.4's
noise terms are ``[eta eta_l L/m + 8 eta eta_l C_1 L n/m^2] sigma^2``: at its learning rates
the first is ``~ 1/sqrt(TKn)``, flat in ``m``, and only the stale-error term gives the
headline slope ``-1`` (``O(sqrt(n/m)/sqrt(TKm))``); the check says which one is seen.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import make_compressor
from sims.core.participation import Participation
from sims.problems.quadratic import NoiseLaw, QuadraticProblem
from sims.experiments.synthetic import speedup, stats

from . import common, plotting
from . import verdicts as vd

PAPER, TARGET = "Fed-EF", "Corollary 1 and Theorem 4.4 (speedup in n and m)"
TITLE = "speedup in n (full) and m (partial) on a quadratic: fitted log-log slopes vs theory"
DEFAULT_COST = "about 1 min on one core (n, m in {4, 8, 16, 32}, 150 rounds, 20 seeds)"
DEVICES = ("cpu",)       # quadratics on the CPU: another --device is refused


@dataclass
class Config(common.EntryConfig):
    seeds: int = 20      # Fig. 8's 20 seeds (5 left T1 underpowered: about 9 needed)
    rounds: int = 150
    ns: str = "4,8,16,32"
    ms: str = "4,8,16,32"
    n_partial: int = 32
    d: int = 20
    compressor: str = "topk-0.25"
    local_steps: int = 2
    sigma: float = 1.0
    heterogeneity: float = 0.0
    x0: float = 0.0
    c_eta: float = 1.0
    c_l: float = 0.4
    target: float = 1e-3

    def scale(self):
        if self.full:
            self.rounds = 300
            self.ns, self.ms, self.n_partial = "4,8,16,32,64", "4,8,16,32,64", 64
        if self.tiny:
            self.seeds, self.rounds, self.ns, self.ms, self.n_partial = 2, 10, "2,8", "2,8", 8


def problem(cfg, n: int) -> QuadraticProblem:
    n_max = max(common.flag_values(cfg, "ns", int) + [cfg.n_partial])
    centers = cfg.heterogeneity * np.random.default_rng(0).standard_normal((n_max, cfg.d))
    curvature = np.geomspace(0.5, 1.0, cfg.d)
    noise = NoiseLaw("gaussian", cfg.sigma / math.sqrt(cfg.d))
    return QuadraticProblem(curvature, centers[:n], noise, local_steps=cfg.local_steps,
                            x0=np.full(cfg.d, cfg.x0))


def runs(cfg):
    if cfg.n_partial < max(common.flag_values(cfg, "ms", int)):
        raise common.EntryError(f"--ms must not exceed --n-partial={cfg.n_partial}")
    out = []
    todo = [("full", n, n) for n in common.flag_values(cfg, "ns", int)] + \
           [("partial", cfg.n_partial, m) for m in common.flag_values(cfg, "ms", int)]
    for setting, n, m in todo:
        name = f"{setting}_n{n}" if setting == "full" else f"{setting}_m{m}"
        eta, eta_l = speedup.learning_rates(setting, cfg.local_steps, cfg.rounds, n,
                                            m if setting == "partial" else None,
                                            cfg.c_eta, cfg.c_l)
        params = {"setting": setting, "n": n, "m": m, "eta": eta, "eta_l": eta_l}

        def build(cfg, n=n, m=m, setting=setting, params=params):
            part = Participation("full") if setting == "full" else Participation("fixed", m=m)
            return (problem(cfg, n), FedEF(eta=params["eta"], eta_l=params["eta_l"],
                                           compressor=make_compressor(cfg.compressor)), part)
        out.append(common.Run(name, params, execute=common.one_engine_run(build, name, params)))
    return out


MEASURES = {"avg_grad_norm2": "(1/T) sum_t ||grad f||^2",
            "late_grad_norm2": "late floor (second half)"}


def per_seed(df, cfg) -> pd.DataFrame:
    """Per (setting, n, m, seed): the corollary's left side (mean over rounds 1..T of
    ``||grad f||^2``) and the late floor (mean over rounds > T/2); ``x`` is ``n`` (full)
    or ``m`` (partial)."""
    rows = []
    for (setting, n, m, seed), grp in df[df.metric == "grad_norm2"].groupby(
            ["setting", "n", "m", "seed"]):
        curve = grp.set_index("round")["value"]
        rows.append({"setting": setting, "n": n, "m": m, "seed": seed,
                     "x": n if setting == "full" else m,
                     "avg_grad_norm2": float(curve[curve.index >= 1].mean()),
                     "late_grad_norm2": float(curve[curve.index > cfg.rounds / 2].mean())})
    return pd.DataFrame(rows, columns=["setting", "n", "m", "seed", "x", *MEASURES])


def summary(df, cfg) -> pd.DataFrame:
    """Per run: the seed means of :func:`per_seed`'s measures and the theory's rate."""
    tab = per_seed(df, cfg)
    out = tab.groupby(["setting", "n", "m", "x"], as_index=False)[list(MEASURES)].mean()
    out["theory"] = [speedup.theory_rate(r.setting, cfg.local_steps, cfg.rounds, r.n, r.m)
                     for r in out.itertuples()]
    return out


def seed_slopes(df, cfg) -> dict:
    """``{setting: {measure: {seed: log-log slope against n or m}}}``."""
    tab = per_seed(df, cfg)
    out = {}
    for setting, grp in tab.groupby("setting"):
        out[setting] = {meas: {seed: stats.loglog_slope(g.x, g[meas])[0]
                               for seed, g in grp.groupby("seed") if g.x.nunique() >= 2}
                        for meas in MEASURES}
    return out


def slopes(df, cfg) -> dict:
    """``{setting: {measure: (mean, low, high)}, "theory": ..., "points": ...}``."""
    out = {}
    for setting, by in seed_slopes(df, cfg).items():
        out[setting] = {meas: stats.seed_interval(list(v.values())) for meas, v in by.items()}
        out[setting]["theory"] = speedup.THEORY_SLOPE[setting]
        out[setting]["seeds"] = len(by["avg_grad_norm2"])
    return out


def plot(df, cfg):
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    full, part = df[df.setting == "full"], df[df.setting == "partial"]
    for ax, sub, hue, title in ((axes[0], full, "n", "full participation"),
                                (axes[1], part, "m", f"partial participation, n={cfg.n_partial}")):
        if len(sub):
            plotting.band_plot(ax, sub, "grad_norm2", hue, logy=True,
                               label=lambda v, h=hue: f"{h}={v}")
        ax.set(ylabel="||grad f(theta_t)||^2", title=f"Fed-EF-SGD {cfg.compressor}, {title}")
        ax.legend(fontsize=8)
    ax = axes[2]
    tab, sl = per_seed(df, cfg), slopes(df, cfg)
    for (setting, grp), color in zip(tab.groupby("setting"), sns.color_palette("deep")):
        xlab = "n" if setting == "full" else "m"
        for meas, marker, ls in (("avg_grad_norm2", "o", "-"), ("late_grad_norm2", "s", "--")):
            g = grp.groupby("x")[meas]
            mean, lo, hi = g.mean(), g.min(), g.max()
            iv = sl[setting][meas]
            ax.errorbar(mean.index, mean.values, yerr=[mean - lo, hi - mean], color=color,
                        marker=marker, ls=ls, capsize=2, ms=4,
                        label=f"{setting}: {MEASURES[meas]} vs {xlab}, slope "
                              f"{stats.fmt_interval(iv)} (theory {sl[setting]['theory']:g})")
        x0 = grp.x.min()
        y0 = grp[grp.x == x0]["avg_grad_norm2"].mean()
        xs = np.array(sorted(grp.x.unique()), dtype=float)
        ax.plot(xs, y0 * (xs / x0) ** sl[setting]["theory"], ":", color="k", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="n (full) or m (partial)",
           title=f"after T={cfg.rounds} rounds (bars: seed range; dotted: theory slopes)")
    ax.legend(fontsize=6)
    fig.suptitle(f"Fed-EF speedup on a quadratic in its noise-dominated regime (d={cfg.d}, "
                 f"K={cfg.local_steps}, sigma^2={cfg.sigma ** 2:g}, heterogeneity "
                 f"{cfg.heterogeneity:g}, x0={cfg.x0:g}, {cfg.seeds} seeds)", y=1.02)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedef_speedup")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedef_speedup",)
CLAIMS = vd.claims(
    vd.Claim("T1", "Fed-EF", "Fed-EF achieves O(1/sqrt(TKn)) once T >= K n sigma_g^2 / "
             "sigma^2: the averaged squared gradient norm falls like n^-1/2 (linear speedup)",
             "slope", "Cor. 1, Thm 4.2; spec 5 T1"),
    vd.Claim("T2", "Fed-EF", "under partial participation O(sqrt(n/m) / sqrt(TKm)): the headline "
             "slope -1 in m at fixed n", "slope", "Thm 4.4; spec 5 T2"),
)
SLOPE_MARGIN = 0.15      # a slope "is" the predicted one within +-0.15


def check(df, cfg):
    df, lines = common.usable(sys.modules[__name__], cfg, df)
    df = common.without_nonfinite(df, "grad_norm2", lines)
    if not len(df):
        return lines + [vd.missing(c, c.statement, "no healthy results") for c in CLAIMS.values()]
    prob = problem(cfg, max(common.flag_values(cfg, "ns", int) + [cfg.n_partial]))
    const = prob.constants()
    lines.append(f"regime: sigma^2 = {const['sigma2']:.3g}, sigma_g^2 = {const['sigma_g2']:.3g}, "
                 f"f(theta_1) - f* = {const['f0_minus_fstar']:.3g} (the bound's noise terms "
                 "are what is left when the last two are 0); slopes: mean [95% t-interval] "
                 "over seeds")
    from . import regime as rg
    card = rg.RegimeCard([
        rg.value("sigma_g^2 / sigma^2", float(const["sigma_g2"] / const["sigma2"]), 0.0,
                 rg.at_most(0.05), "Cor. 1's condition T >= K n sigma_g^2 / sigma^2"),
        rg.value("f(theta_1) - f* (noise-dominated)", float(const["f0_minus_fstar"]), 0.0,
                 rg.at_most(0.05), "the bound's noise terms dominate"),
        rg.seeds(cfg.seeds, 20, "Fig. 8: 20 seeds")])
    tab = summary(df, cfg)
    for _, row in tab.sort_values(["setting", "x"]).iterrows():
        lines.append(f"{row.setting:7s} n={row.n:<3g} m={row.m:<3g}: mean ||grad f||^2 "
                     f"{row.avg_grad_norm2:.4g}, late floor {row.late_grad_norm2:.4g}")
    out = []
    for setting, by in seed_slopes(df, cfg).items():
        xlab = "n" if setting == "full" else "m"
        c = CLAIMS["T1" if setting == "full" else "T2"]
        theory = speedup.THEORY_SLOPE[setting]
        for meas in MEASURES:
            out.append(vd.slope(c, pd.Series(by[meas], dtype=float), theory, SLOPE_MARGIN,
                                card=card, scope=MEASURES[meas],
                                protocol="none: the theorem's learning rates",
                                what=f"log-log slope in {xlab} (theory {theory:g} +- "
                                     f"{SLOPE_MARGIN:g})"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
