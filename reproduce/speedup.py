"""Fed-EF speedup in n (full participation, Corollary 1) and in m (partial participation
with n fixed, Theorem 4.4) on a quadratic with known constants; fitted log-log slopes beside
the theory's.

Problem: ``d = 20`` coordinates with curvatures from ``mu = 0.5`` to ``L = 1``, client
centres drawn once for the largest population (``N(0, 0.3^2 I)``; the population of ``n``
clients is the first ``n`` of them), Gaussian noise with ``E||xi||^2 = 0.01``, ``K = 2``
local steps, ``x_0 = 3``. Fed-EF-SGD with TopK-0.25 and the learning rates the rates
prescribe (:func:`sims.synthetic.speedup.learning_rates`): ``eta = sqrt(K n)``,
``eta_l = 0.4 / (K sqrt(T))`` (full) and ``eta = sqrt(K m)``, ``eta_l = 0.4 sqrt(m) /
(K sqrt(T n))`` (partial). Measured: the theorem's left side ``(1/T) sum_t ||grad
f(theta_t)||^2`` and the rounds to reach ``--target`` times the initial value.

Theory: slope ``-1/2`` in ``n`` (``O(1/sqrt(TKn))``), slope ``-1`` in ``m`` at fixed ``n``
(``O(sqrt(n/m)/sqrt(TKm))``).

The slopes show while the step size, not the compressor, limits progress: with TopK-0.1
here (2 of 20 coordinates per message) the largest populations become compression-bound and
the fitted slope in ``n`` flattens to about -0.3 (``--compressor topk-0.1`` shows it).
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
from sims.problems.quadratic import NoiseLaw, QuadraticProblem
from sims.results import tidy
from sims.synthetic import speedup, stats, torch_threads

from . import common, plotting

PAPER, TARGET = "Fed-EF", "Corollary 1 and Theorem 4.4 (speedup in n and m)"
TITLE = "speedup in n (full) and m (partial) on a quadratic: fitted log-log slopes vs theory"
DEFAULT_COST = "about 15 s (n, m in {4, 8, 16, 32}, 150 rounds, 3 seeds)"


@dataclass
class Config(common.EntryConfig):
    seeds: int = 3
    rounds: int = 150
    ns: str = "4,8,16,32"
    ms: str = "4,8,16,32"
    n_partial: int = 32
    d: int = 20
    compressor: str = "topk-0.25"
    local_steps: int = 2
    sigma: float = 0.1
    heterogeneity: float = 0.3
    c_eta: float = 1.0
    c_l: float = 0.4
    target: float = 1e-3

    def scale(self):
        if self.full:
            self.seeds, self.rounds = 10, 300
            self.ns, self.ms, self.n_partial = "4,8,16,32,64", "4,8,16,32,64", 64
        if self.tiny:
            self.seeds, self.rounds, self.ns, self.ms, self.n_partial = 1, 10, "2,8", "2,8", 8


def _ints(text):
    return [int(v) for v in str(text).split(",") if v.strip()]


def problem(cfg, n: int) -> QuadraticProblem:
    n_max = max(_ints(cfg.ns) + [cfg.n_partial])
    centers = cfg.heterogeneity * np.random.default_rng(0).standard_normal((n_max, cfg.d))
    curvature = np.geomspace(0.5, 1.0, cfg.d)
    noise = NoiseLaw("gaussian", cfg.sigma / math.sqrt(cfg.d))
    return QuadraticProblem(curvature, centers[:n], noise, local_steps=cfg.local_steps,
                            x0=np.full(cfg.d, 3.0))


def runs(cfg):
    if cfg.n_partial < max(_ints(cfg.ms)):
        raise common.EntryError(f"--ms must not exceed --n-partial={cfg.n_partial}")
    out = []
    todo = [("full", n, n) for n in _ints(cfg.ns)] + \
           [("partial", cfg.n_partial, m) for m in _ints(cfg.ms)]
    for setting, n, m in todo:
        name = f"{setting}_n{n}" if setting == "full" else f"{setting}_m{m}"
        eta, eta_l = speedup.learning_rates(setting, cfg.local_steps, cfg.rounds, n,
                                            m if setting == "partial" else None,
                                            cfg.c_eta, cfg.c_l)
        params = {"setting": setting, "n": n, "m": m, "eta": eta, "eta_l": eta_l}

        def execute(cfg, seeds, progress, n=n, m=m, setting=setting, name=name,
                    params=params):
            prob = problem(cfg, n)
            alg = FedEF(eta=params["eta"], eta_l=params["eta_l"],
                        compressor=make_compressor(cfg.compressor))
            part = Participation("full") if setting == "full" else Participation("fixed", m=m)
            with torch_threads(1):
                res = engine.run(prob, alg, part, cfg.rounds, seeds,
                                 progress=lambda t: progress(1))
            return tidy(res, name, params), {"algorithm": alg.describe(),
                                             "participation": part.describe(),
                                             "problem": common.describe_problem(prob),
                                             "diverged_at_round": res.diverged_at}
        out.append(common.Run(name, params, execute=execute))
    return out


def summary(df, cfg) -> pd.DataFrame:
    """Per run: the mean over rounds 1..T of ``||grad f||^2`` (seed-mean) and rounds to
    target; the x variable is ``n`` (full) or ``m`` (partial)."""
    rows = []
    for (setting, n, m), grp in df[df.metric == "grad_norm2"].groupby(["setting", "n", "m"]):
        curve = grp.groupby("round").value.mean()
        rows.append({"setting": setting, "n": n, "m": m, "x": n if setting == "full" else m,
                     "avg_grad_norm2": float(curve[curve.index >= 1].mean()),
                     "final_grad_norm2": float(curve.iloc[-1]),
                     "rounds_to_target": stats.rounds_to_target(curve.index, curve.values,
                                                                cfg.target * curve.iloc[0]),
                     "theory": speedup.theory_rate(setting, cfg.local_steps, cfg.rounds, n, m)})
    return pd.DataFrame(rows)


def slopes(df, cfg) -> dict:
    tab = summary(df, cfg)
    out = {}
    for setting, grp in tab.groupby("setting"):
        out[setting] = {"avg_grad_norm2": stats.loglog_slope(grp.x, grp.avg_grad_norm2)[0],
                        "rounds_to_target": stats.loglog_slope(grp.x, grp.rounds_to_target)[0],
                        "theory": speedup.THEORY_SLOPE[setting], "points": len(grp)}
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
    tab, sl = summary(df, cfg), slopes(df, cfg)
    for (setting, grp), color in zip(tab.groupby("setting"), sns.color_palette("deep")):
        grp = grp.sort_values("x")
        s = sl[setting]
        xlab = "n" if setting == "full" else "m"
        ax.plot(grp.x, grp.avg_grad_norm2, "o-", color=color,
                label=f"{setting}: mean ||grad f||^2 vs {xlab}, slope {s['avg_grad_norm2']:.2f} "
                      f"(theory {s['theory']:g})")
        ax.plot(grp.x, grp.rounds_to_target, "s--", color=color, alpha=0.7,
                label=f"{setting}: rounds to target, slope {s['rounds_to_target']:.2f}")
        x0, y0 = grp.x.iloc[0], grp.avg_grad_norm2.iloc[0]
        ax.plot(grp.x, y0 * (grp.x / x0) ** s["theory"], ":", color="k", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="n (full) or m (partial)",
           title=f"speedup after T={cfg.rounds} rounds (dotted: theory slopes)")
    ax.legend(fontsize=7)
    fig.suptitle(f"Fed-EF speedup on a quadratic (d={cfg.d}, K={cfg.local_steps}, "
                 f"{cfg.seeds} seeds)", y=1.02)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedef_speedup")


def check(df, cfg):
    lines = []
    tab = summary(df, cfg)
    for _, row in tab.sort_values(["setting", "x"]).iterrows():
        lines.append(f"{row.setting:7s} n={row.n:<3g} m={row.m:<3g}: mean ||grad f||^2 "
                     f"{row.avg_grad_norm2:.4g}, final {row.final_grad_norm2:.3g}, rounds to "
                     f"target {row.rounds_to_target:g}")
    for setting, s in slopes(df, cfg).items():
        xlab = "n" if setting == "full" else "m"
        ok = abs(s["avg_grad_norm2"] - s["theory"]) <= 0.25
        lines.append(f"-> {setting}: fitted slope in {xlab} {s['avg_grad_norm2']:.3f} (mean grad "
                     f"norm^2), {s['rounds_to_target']:.3f} (rounds to target); theory "
                     f"{s['theory']:g}: {'shows' if ok else 'does NOT show'} the predicted speedup "
                     f"(tolerance 0.25)")
    return lines


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
