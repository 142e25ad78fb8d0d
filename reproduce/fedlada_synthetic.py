"""FedLADA's theory on a synthetic problem: T5 (speedup in S and K, with the predicted
crossover in K) and T6 (an interior alpha). Spec 4: T5, T6; Corollary 3.6, Remarks 3.8-3.9,
Sec. 4.3.

Problem: a federated quadratic with known constants (``sims.problems.quadratic``): ``d = 20``
coordinates, curvatures from ``mu = 0.5`` to ``L = 1``, ``n = 32`` clients whose centres are
``heterogeneity x N(0, I)`` (bounded heterogeneity ``sigma_g^2``), Gaussian gradient noise
with ``E||xi||^2 = sigma^2 = 1``, started at 0. It keeps the theorem's assumptions (smooth,
bounded gradient noise and heterogeneity) but is convex, where T5 asks for a non-convex one.

FedLADA (Alg. 3) at the corollary's learning rates: ``eta_l = c_l / sqrt(K T)`` and
``eta eta_l ~ sqrt(S K / T)`` with ``eta = K eta_g`` (Lemma B.8), i.e. ``eta_g = c_g sqrt(S)``.

* **T5**: the theorem's left side ``(1/T) sum_t ||grad F(x^t)||^2`` (the server model; the
  auxiliary ``z^t`` differs by ``(1 - alpha)/alpha`` times a step) per seed; its log-log slope
  against ``S`` at fixed ``K`` and against ``K`` at fixed ``S`` up to the predicted crossover
  ``K* = (T/S)^(1/3)`` (where the ``O(K/T)`` local-drift term overtakes ``1/sqrt(SKT)``;
  ``theory.fedlada`` check ``sec43_crossover_with_derived_orders``) should be ``-1/2``
  (+- :data:`SLOPE_MARGIN`), and from ``K*`` on the speedup in ``K`` should stop (slope above
  :data:`STOP_SLOPE`).
* **T6**: the suboptimality ``F(x) - F*`` averaged over the second half of the rounds at
  alpha in a grid: the best interior alpha below both ends (paired by seed) by at least
  :data:`ALPHA_GAIN` of the end's value.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sims.algorithms.registry import make_algorithm
from sims.core.participation import Participation
from sims.experiments.synthetic import stats
from sims.problems.quadratic import NoiseLaw, QuadraticProblem

from . import common, plotting
from . import regime as rg
from . import verdicts as vd

PAPER, TARGET = "FedLADA", "T5 / T6 (Cor. 3.6, Remarks 3.8-3.9): speedup in S and K, interior alpha"
TITLE = "FedLADA on a quadratic: slopes in S and K with the predicted crossover; alpha sweep"
DEFAULT_COST = ("about 1 min on one core (S in 2..16, K in 1..16, 6 alphas, 10 seeds, "
                "200 rounds; d = 20; 13 s of CPU measured at 3 seeds)")
DEVICES = ("cpu",)

SLOPE_MARGIN = 0.15     # a slope "is" -1/2 within +-0.15 (as the Fed-EF speedup entry)
STOP_SLOPE = -0.25      # past the crossover the speedup in K has stopped: slope above this
#: T6: the best interior alpha's loss must lie below each end's by at least this fraction of
#: the end's (a difference of a fraction of a percent is no trade-off)
ALPHA_GAIN = 0.02


@dataclass
class Config(common.EntryConfig):
    seeds: int = 10
    rounds: int = 200
    n_clients: int = 32
    d: int = 20
    sigma: float = 1.0
    heterogeneity: float = 1.0
    ss: str = "2,4,8,16"         # T5: participants S at K = k_fixed
    k_fixed: int = 2
    ks: str = "1,2,4,8,16"       # T5: local steps K at S = s_fixed
    s_fixed: int = 2
    alphas: str = "0.01,0.05,0.1,0.3,0.6,1"    # T6, at S = 8, K = 4
    alpha: float = 0.1            # T5's alpha (the paper's CIFAR-10 value)
    c_l: float = 0.5
    c_g: float = 1.0

    def scale(self):
        if self.tiny:
            self.seeds, self.rounds = 2, 10
            self.ss, self.ks, self.alphas = "2,4", "1,2,4", "0.1,0.5,1"


def problem(cfg, K: int) -> QuadraticProblem:
    centres = cfg.heterogeneity * np.random.default_rng(0).standard_normal((cfg.n_clients, cfg.d))
    return QuadraticProblem(np.geomspace(0.5, 1.0, cfg.d), centres,
                            NoiseLaw("gaussian", cfg.sigma / math.sqrt(cfg.d)), local_steps=K)


def learning_rates(cfg, S: int, K: int) -> tuple[float, float]:
    """``(eta_g, eta_l)``: ``eta_l = c_l / sqrt(K T)``, ``eta_g = c_g sqrt(S)`` so that
    ``eta eta_l = K eta_g eta_l = c_g c_l sqrt(S K / T)`` (Cor. 3.6)."""
    return cfg.c_g * math.sqrt(S), cfg.c_l / math.sqrt(K * cfg.rounds)


def crossover(cfg) -> float:
    """The predicted ``K* = (T / S)^(1/3)`` at ``S = s_fixed``."""
    return (cfg.rounds / cfg.s_fixed) ** (1 / 3)


def _settings(cfg):
    out = [("S", S, cfg.k_fixed, cfg.alpha) for S in common.flag_values(cfg, "ss", int)]
    out += [("K", cfg.s_fixed, K, cfg.alpha) for K in common.flag_values(cfg, "ks", int)]
    out += [("alpha", 8, 4, a) for a in common.flag_values(cfg, "alphas", float)]
    return out


def runs(cfg):
    out = []
    for sweep, S, K, a in _settings(cfg):
        eta_g, eta_l = learning_rates(cfg, S, K)
        name = f"{sweep}_S{S}_K{K}_a{a:g}"
        params = {"sweep": sweep, "S": S, "K": K, "alpha": a, "eta": eta_g, "eta_l": eta_l}

        def build(cfg, S=S, K=K, params=params):
            return (problem(cfg, K),
                    make_algorithm("fedlada", eta=params["eta"], eta_l=params["eta_l"],
                                   alpha=params["alpha"]),
                    Participation("fixed", m=S))
        out.append(common.Run(name, params, execute=common.one_engine_run(build, name, params)))
    return out


def per_seed(df, cfg) -> pd.DataFrame:
    """Per (sweep, S, K, alpha, seed): the mean of ``||grad F||^2`` over rounds 1..T and the
    suboptimality averaged over the second half of the rounds."""
    rows = []
    keys = ["sweep", "S", "K", "alpha", "seed"]
    g2 = df[df.metric == "grad_norm2"]
    sub = df[df.metric == "suboptimality"]
    for key, grp in g2.groupby(keys):
        curve = grp.set_index("round")["value"]
        late = sub
        for k, v in zip(keys, key):
            late = late[late[k] == v]
        late = late[late["round"] > cfg.rounds / 2]["value"]
        rows.append({**dict(zip(keys, key)),
                     "avg_grad_norm2": float(curve[curve.index >= 1].mean()),
                     "late_subopt": float(late.mean()) if len(late) else math.nan})
    return pd.DataFrame(rows, columns=keys + ["avg_grad_norm2", "late_subopt"])


def seed_slopes(tab, sweep: str, x: str, lo=None, hi=None) -> pd.Series:
    """Per seed: the log-log slope of the averaged gradient norm against ``x`` (``S`` or
    ``K``) within ``[lo, hi]``."""
    sub = tab[tab.sweep == sweep]
    if lo is not None:
        sub = sub[sub[x] >= lo]
    if hi is not None:
        sub = sub[sub[x] <= hi]
    out = {seed: stats.loglog_slope(g[x], g["avg_grad_norm2"])[0]
           for seed, g in sub.groupby("seed") if g[x].nunique() >= 2}
    return pd.Series(out, dtype=float)


def plot(df, cfg):
    tab = per_seed(df, cfg)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    for ax, sweep, x in ((axes[0], "S", "S"), (axes[1], "K", "K")):
        g = tab[tab.sweep == sweep].groupby(x)["avg_grad_norm2"]
        mean, lo, hi = g.mean(), g.min(), g.max()
        ax.errorbar(mean.index, mean.values, yerr=[mean - lo, hi - mean], marker="o",
                    capsize=2, label="(1/T) sum ||grad F||^2, seed range")
        if len(mean):
            x0, y0 = mean.index[0], mean.iloc[0]
            xs = np.array(mean.index, dtype=float)
            ax.plot(xs, y0 * (xs / x0) ** -0.5, "k:", lw=1, label="slope -1/2 (theory)")
        if sweep == "K":
            ax.axvline(crossover(cfg), color="r", ls="--", lw=1,
                       label=f"predicted crossover K* = (T/S)^(1/3) = {crossover(cfg):.1f}")
        ax.set(xscale="log", yscale="log", xlabel=x,
               title=f"T5: speedup in {x} ({'K' if x == 'S' else 'S'} = "
                     f"{cfg.k_fixed if x == 'S' else cfg.s_fixed}, T = {cfg.rounds})")
        ax.legend(fontsize=7)
    g = tab[tab.sweep == "alpha"].groupby("alpha")["late_subopt"]
    mean, lo, hi = g.mean(), g.min(), g.max()
    axes[2].errorbar(mean.index, mean.values, yerr=[mean - lo, hi - mean], marker="o", capsize=2)
    axes[2].set(xscale="log", yscale="log", xlabel="alpha",
                ylabel="F(x) - F*, second half of the rounds",
                title="T6: FedLADA's alpha (S = 8, K = 4)")
    fig.suptitle(f"FedLADA on a quadratic (d = {cfg.d}, n = {cfg.n_clients}, sigma^2 = "
                 f"{cfg.sigma ** 2:g}, heterogeneity {cfg.heterogeneity:g}, eta_l = "
                 f"{cfg.c_l:g}/sqrt(KT), eta_g = {cfg.c_g:g} sqrt(S), {cfg.seeds} seeds)",
                 fontsize=9, y=1.02)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedlada_synthetic")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_synthetic",)
CLAIMS = vd.claims(
    vd.Claim("T5", "FedLADA", "linear speedup: at the corollary's rates (1/T) sum ||grad||^2 "
             "falls like 1/sqrt(SKT) in S and in K until the O(K/T) term takes over near "
             "K = (T/S)^(1/3)", "slope", "Cor. 3.6, Remark 3.8, Sec. 4.3; spec 4 T5"),
    vd.Claim("T6", "FedLADA", "alpha trades off: an interior alpha minimises the final loss",
             "every", "Remark 3.9; spec 4 T6"),
)


def check(df, cfg):
    df, lines = common.usable(sys.modules[__name__], cfg, df)
    if not len(df):
        return lines + [vd.missing(c, c.statement, "no healthy results") for c in CLAIMS.values()]
    const = problem(cfg, 1).constants()
    tab = per_seed(df, cfg)
    kstar = crossover(cfg)
    lines.append(f"problem: sigma^2 = {const['sigma2']:.3g}, sigma_g^2 = {const['sigma_g2']:.3g}, "
                 f"F(x0) - F* = {const['f0_minus_fstar']:.3g}; predicted crossover K* = "
                 f"(T/S)^(1/3) = {kstar:.2f} at S = {cfg.s_fixed}, T = {cfg.rounds}")
    for (sweep, S, K, a), g in tab.groupby(["sweep", "S", "K", "alpha"]):
        lines.append(f"{sweep:5s} S={S:<3g} K={K:<3g} alpha={a:<5g}: (1/T) sum ||grad||^2 "
                     f"{g.avg_grad_norm2.mean():.4g}, late F - F* {g.late_subopt.mean():.4g}")
    card = rg.RegimeCard([
        rg.value("problem", "quadratic (convex)", "smooth non-convex", rg.info(),
                 "spec 4 T5: a non-convex problem; a quadratic keeps L, sigma, sigma_g known"),
        rg.value("sigma_g^2", float(const["sigma_g2"]), "bounded", rg.info(), "A3.4"),
        rg.seeds(cfg.seeds, 5, "the repository's synthetic checks")])
    proto = "none: the corollary's learning rates"
    out = []
    C5 = CLAIMS["T5"]
    parts = [vd.slope(C5, seed_slopes(tab, "S", "S"), -0.5, SLOPE_MARGIN,
                      what=f"slope in S at K = {cfg.k_fixed} (theory -1/2 +- {SLOPE_MARGIN:g})"),
             vd.slope(C5, seed_slopes(tab, "K", "K", hi=kstar), -0.5, SLOPE_MARGIN,
                      what=f"slope in K <= K* = {kstar:.2f} at S = {cfg.s_fixed} (theory -1/2 "
                           f"+- {SLOPE_MARGIN:g})")]
    beyond = seed_slopes(tab, "K", "K", lo=kstar / 2 ** 0.5)
    if len(beyond):
        parts.append(vd.exceeds(C5, beyond, STOP_SLOPE, direction=1,
                                what=f"slope in K from K*/sqrt(2) = {kstar / 2 ** 0.5:.2f} on "
                                     f"above {STOP_SLOPE:g} (the speedup stops)"))
    out.append(vd.every(C5, parts, what="speedup in S and K, crossover at K*", card=card,
                        protocol=proto))
    C6 = CLAIMS["T6"]
    al = tab[tab.sweep == "alpha"]
    alphas = sorted(al["alpha"].unique())
    if len(alphas) >= 3:
        by = {a: al[al.alpha == a].set_index("seed")["late_subopt"] for a in alphas}
        interior = alphas[1:-1]
        best = min(interior, key=lambda a: by[a].mean())
        parts = [vd.above(C6, by[best], by[end], lower_is_better=True,
                          by=ALPHA_GAIN * float(by[end].mean()),
                          what=f"alpha {best:g} (best interior) below alpha {end:g} by at least "
                               f"{100 * ALPHA_GAIN:g} % of its late F - F*")
                 for end in (alphas[0], alphas[-1])]
        out.append(vd.every(C6, parts, what="an interior alpha minimises the loss", card=card,
                            protocol=proto))
    else:
        out.append(vd.missing(C6, "alpha sweep", "fewer than 3 alphas"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
