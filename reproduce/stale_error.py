"""Fed-EF stale error under partial participation, and error restarting (Sec. 4.3, Thm 4.4,
Remark 5, Sec. 5.4 / Fig. 9's heuristic), on a quadratic with known constants.

Problem: :func:`sims.problems.quadratic.heterogeneous_quadratic` with ``n = 50`` clients,
``d = 100`` (curvatures from ``mu = 0.1`` to ``L = 1``), client centres ``N(0, 0.3^2 I)``
(``sigma_g^2`` exact), Gaussian noise ``E||xi||^2 = 0.09``, ``K = 5`` local steps, ``x_0 = 3``.
Fed-EF-SGD with TopK-0.05 (``eta = 1``, ``eta_l = 0.05``) and, as the reference, full-precision
Fed-SGD with the same rates, for ``m`` of ``n`` clients per round (uniform without
replacement; ``m = n`` is full participation).

* Staleness: the rounds since a participant's error was last updated, from
  ``RunOutput.staleness``, against Geometric(``m/n``) (mean ``n/m``; with the finite-run
  correction of :func:`sims.experiments.synthetic.stats.staleness_pmf`).
* Slowdown: rounds to bring ``||grad f||^2`` to ``--target`` times its start, Fed-EF over
  full precision at the same ``m``, normalised by the same ratio at ``m = n``, against
  Theorem 4.4's extra ``sqrt(n/m)`` factor (the fitted log-log slope in ``n/m`` beside 1/2).
* Restarting: from round ``--restart-start`` on, a participant's error older than ``S``
  rounds is zeroed (``FedEF(restart_period=S)``); same seeds, so the runs coincide before.

Verdicts: the staleness law shows when the chi-square test does not reject Geometric(m/n)
(p >= 0.01); the slowdown shows when it grows with ``n/m`` (positive log-log slope over at
least two values of ``n/m`` whose runs reached the target); restarting shows when it lowers
the mean ``||grad f||^2`` after ``--restart-start`` in most seeds. Replicas that diverged
(:func:`reproduce.common.healthy`) and missing runs (``--plot-only --available``) are left
out and named, and a verdict that needs them is not given. Runs on the CPU only.
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
from sims.rules.compress import Identity, TopK
from sims.core.participation import Participation
from sims.problems.quadratic import heterogeneous_quadratic
from sims.store.results import tidy
from sims.experiments.synthetic import stats, torch_threads

from . import common, plotting
from . import verdicts as vd

PAPER, TARGET = "Fed-EF", "Sec. 4.3 / Thm 4.4 / Remark 5 (stale error), Fig. 9's restarting"
TITLE = "stale error under partial participation and error restarting on a quadratic"
DEFAULT_COST = "about 30 s (n=50, m in {5,10,25,50}, 250 rounds, 3 seeds)"
DEVICES = ("cpu",)


@dataclass
class Config(common.EntryConfig):
    seeds: int = 3
    rounds: int = 250
    n: int = 50
    ms: str = "5,10,25,50"
    d: int = 100
    topk: float = 0.05
    eta: float = 1.0
    eta_l: float = 0.05
    local_steps: int = 5
    sigma: float = 0.3
    heterogeneity: float = 0.3
    target: float = 0.01             # rounds to reach target * ||grad f(x_0)||^2
    restart_periods: str = "10,20"   # S values for the restarting runs (at the smallest m)
    restart_start: int = 100

    def scale(self):
        if self.full:
            self.seeds, self.rounds, self.n, self.ms = 20, 300, 100, "5,10,20,50,100"
            self.restart_start = 150
        if self.tiny:
            self.seeds, self.rounds, self.n, self.ms, self.d = 1, 12, 10, "2,10", 20
            self.restart_periods, self.restart_start = "5", 6


def problem(cfg):
    return heterogeneous_quadratic(cfg.n, cfg.d, L=1.0, mu=0.1, sigma=cfg.sigma,
                                   heterogeneity=cfg.heterogeneity,
                                   local_steps=cfg.local_steps, x0=3.0)


def _participation(cfg, m):
    return Participation("full") if m == cfg.n else Participation("fixed", m=m)


def _execute(name, params, make_alg, m):
    def execute(cfg, seeds, progress):
        prob, alg = problem(cfg), make_alg(cfg)
        with torch_threads(1):
            out = engine.run(prob, alg, _participation(cfg, m), cfg.rounds, seeds,
                             progress=lambda t: progress(1))
        df = tidy(out, name, params)
        rows = []
        for seed, st in zip(out.seeds, out.staleness):
            counts = np.bincount(st.astype(int))
            rows += [{"run": name, "seed": seed, "round": cfg.rounds, "metric": "staleness_count",
                      "value": float(c), "x": g} for g, c in enumerate(counts) if g >= 1 and c]
        extra = pd.DataFrame(rows)
        for key, val in params.items():
            extra[key] = val
        record = {"algorithm": alg.describe(), "participation": _participation(cfg, m).describe(),
                  "problem": common.describe_problem(prob), "diverged_at_round": out.diverged_at}
        return pd.concat([df, extra], ignore_index=True), record
    return execute


def runs(cfg):
    ms = common.flag_values(cfg, "ms", int)
    if not ms or min(ms) < 1 or max(ms) > cfg.n:
        raise common.EntryError(f"--ms must lie in [1, n={cfg.n}], got {cfg.ms}")
    out = []
    for m in ms:
        for kind, comp in (("ef", lambda cfg: TopK(cfg.topk)), ("fp", lambda cfg: Identity())):
            name = f"{kind}_m{m}"
            params = {"kind": kind, "m": m, "n": cfg.n, "S": 0}
            make = (lambda cfg, comp=comp: FedEF(eta=cfg.eta, eta_l=cfg.eta_l,
                                                 compressor=comp(cfg)))
            out.append(common.Run(name, params, execute=_execute(name, params, make, m)))
    m0 = min(ms)
    for S in common.flag_values(cfg, "restart_periods", int):
        name = f"restart_m{m0}_S{S}"
        params = {"kind": "restart", "m": m0, "n": cfg.n, "S": S}
        make = (lambda cfg, S=S: FedEF(eta=cfg.eta, eta_l=cfg.eta_l, compressor=TopK(cfg.topk),
                                       restart_period=S, restart_start=cfg.restart_start))
        out.append(common.Run(name, params, execute=_execute(name, params, make, m0)))
    return out


def _mean_curve(df, run, metric="grad_norm2"):
    sub = df[(df.run == run) & (df.metric == metric)]
    curve = sub.groupby("round").value.mean()
    return curve.index.to_numpy(), curve.to_numpy()


def slowdowns(df, cfg) -> pd.DataFrame:
    """Per ``m``: rounds to target for Fed-EF and full precision, their ratio and the ratio
    normalised by full participation (or the largest ``m``)."""
    rows = []
    for m in sorted(common.flag_values(cfg, "ms", int)):
        r_ef, c_ef = _mean_curve(df, f"ef_m{m}")
        r_fp, c_fp = _mean_curve(df, f"fp_m{m}")
        if not len(c_ef) or not len(c_fp):
            continue
        target = cfg.target * c_fp[0]
        t_ef = stats.rounds_to_target(r_ef, c_ef, target)
        t_fp = stats.rounds_to_target(r_fp, c_fp, target)
        rows.append({"m": m, "n_over_m": cfg.n / m, "rounds_ef": t_ef, "rounds_fp": t_fp,
                     "ratio": t_ef / t_fp if t_fp else math.nan,
                     "avg_ratio": float(np.mean(c_ef[1:]) / np.mean(c_fp[1:]))})
    tab = pd.DataFrame(rows)
    if len(tab):
        base = tab.loc[tab.m.idxmax()]
        tab["slowdown"] = tab.ratio / base.ratio
        tab["avg_slowdown"] = tab.avg_ratio / base.avg_ratio
        tab["theory"] = np.sqrt(tab.n_over_m / base.n_over_m)
    return tab


def staleness_fits(df, cfg) -> dict:
    out = {}
    for m in sorted(common.flag_values(cfg, "ms", int)):
        if m == cfg.n:
            continue
        sub = df[(df.run == f"ef_m{m}") & (df.metric == "staleness_count")]
        if not len(sub):
            continue
        samples = np.repeat(sub.x.to_numpy(dtype=int), sub.value.to_numpy(dtype=int))
        out[m] = stats.staleness_fit(samples, m / cfg.n, cfg.rounds)
    return out


def restart_effect(df, cfg) -> list[dict]:
    m0 = min(common.flag_values(cfg, "ms", int))
    base = df[(df.run == f"ef_m{m0}") & (df.metric == "grad_norm2")]
    after = lambda d: d[d["round"] > cfg.restart_start].groupby("seed").value.mean()  # noqa
    b = after(base)
    rows = []
    for S in common.flag_values(cfg, "restart_periods", int):
        r = after(df[(df.run == f"restart_m{m0}_S{S}") & (df.metric == "grad_norm2")])
        if not len(r) or not len(b):
            continue
        rows.append({"S": S, "m": m0, "avg_after_plain": float(b.mean()),
                     "avg_after_restart": float(r.mean()), "ratio": float(r.mean() / b.mean()),
                     "seeds_lower": int((r < b.reindex(r.index)).sum()), "seeds": len(r)})
    return rows


def _finish(ax, logx=False, logy=False, **legend) -> None:
    """Log scales and legend where the panel has data; else say it has none."""
    lines = [ln for ln in ax.get_lines()          # the data (guide lines have no label)
             if len(ln.get_xdata()) and not ln.get_label().startswith("_")]
    if not lines:
        ax.text(0.5, 0.5, "no results for this panel\n(runs missing or diverged)",
                ha="center", va="center", transform=ax.transAxes, color="0.4")
        return
    if logx and any((np.asarray(ln.get_xdata(), float) > 0).any() for ln in lines):
        ax.set_xscale("log")
    if logy and any((np.asarray(ln.get_ydata(), float) > 0).any() for ln in lines):
        ax.set_yscale("log")
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=legend.pop("fontsize", 7), **legend)


def plot(df, cfg):
    df = common.healthy(df)
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.6))
    ms = sorted(common.flag_values(cfg, "ms", int))
    colors = dict(zip(ms, sns.color_palette("viridis", len(ms))))
    fits = staleness_fits(df, cfg)
    ax = axes[0]
    for m, fit in fits.items():
        sub = df[(df.run == f"ef_m{m}") & (df.metric == "staleness_count")]
        counts = sub.groupby("x").value.sum()
        ax.plot(counts.index, counts.values / counts.sum(), "o", ms=3, color=colors[m],
                label=f"m={m}: mean {fit['mean']:.2f} (n/m={cfg.n / m:g}), "
                      f"chi2 p={fit['p_value']:.2f}")
        g = np.arange(1, int(counts.index.max()) + 1)
        ax.plot(g, stats.staleness_pmf(m / cfg.n, cfg.rounds, len(g)), "-", color=colors[m], lw=1)
    ax.set(xlabel="staleness s (rounds since the error was last updated)",
           ylabel="frequency", title="staleness vs Geometric(m/n) (lines)")
    _finish(ax, logy=True)
    ax = axes[1]
    for m in ms:
        for kind, ls in (("ef", "-"), ("fp", "--")):
            r, c = _mean_curve(df, f"{kind}_m{m}")
            if len(c):
                ax.plot(r, c, ls, color=colors[m], lw=1.4,
                        label=f"m={m} {'Fed-EF TopK' if kind == 'ef' else 'full precision'}")
    r, c = _mean_curve(df, f"fp_m{ms[-1]}")
    if len(c):
        ax.axhline(cfg.target * c[0], color="k", lw=0.8, ls=":")
    ax.set(xlabel="round", ylabel="||grad f||^2 (mean over seeds)",
           title=f"n={cfg.n}: Fed-EF-SGD TopK-{cfg.topk:g} (solid) vs full precision (dashed)")
    _finish(ax, logy=True, fontsize=6, ncol=2)
    ax = axes[2]
    tab = slowdowns(df, cfg)
    if len(tab):
        ok = tab.slowdown.notna()
        ax.plot(tab.n_over_m, tab.slowdown, "o-", label="rounds to target, Fed-EF / full prec.")
        ax.plot(tab.n_over_m, tab.avg_slowdown, "s-",
                label="mean ||grad f||^2, Fed-EF / full prec.")
        ax.plot(tab.n_over_m, tab.theory, "k--", label="theory: sqrt(n/m)")
        slope, _ = stats.loglog_slope(tab.n_over_m[ok], tab.slowdown[ok])
        ax.set_title(f"slowdown vs n/m (normalised at m=n): slope {slope:.2f} vs 0.5")
    ax.set(xlabel="n/m", ylabel="slowdown")
    _finish(ax, logx=True, logy=True)
    ax = axes[3]
    m0 = ms[0]
    r, c = _mean_curve(df, f"ef_m{m0}")
    if len(c):
        ax.plot(r, c, color="k", lw=1.6, label="Fed-EF (no restart)")
    for S, color in zip(common.flag_values(cfg, "restart_periods", int), sns.color_palette("deep")):
        r, c = _mean_curve(df, f"restart_m{m0}_S{S}")
        if len(c):
            ax.plot(r, c, color=color, lw=1.4,
                    label=f"restart S={S} from round {cfg.restart_start}")
    ax.axvline(cfg.restart_start, color="grey", ls=":")
    ax.set(xlabel="round", ylabel="||grad f||^2 (mean over seeds)",
           title=f"error restarting, m={m0} of n={cfg.n}")
    _finish(ax, logy=True)
    fig.suptitle(f"Fed-EF stale error on a quadratic (d={cfg.d}, K={cfg.local_steps}, "
                 f"{cfg.seeds} seeds)", y=1.02)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedef_stale_error")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedef_stale_error",)
CLAIMS = vd.claims(
    vd.Claim("S1", "Fed-EF", "under partial participation a client's error is stale by a "
             "Geometric(m/n) number of rounds (mean n/m)", "holds", "Sec. 4.3"),
    vd.Claim("S2", "Fed-EF", "the stale error slows Fed-EF down against full precision by a "
             "factor growing with n/m (the extra sqrt(n/m) of Thm 4.4)", "exceeds",
             "Thm 4.4, Remark 5; spec 5 T2"),
    vd.Claim("S3", "Fed-EF", "error restarting lowers the squared gradient norm", "exceeds",
             "Sec. 5.4, Fig. 9; spec 5 E11"),
)


def seed_slowdown_slopes(df, cfg) -> pd.Series:
    """Per seed: the log-log slope against ``n/m`` of the slowdown (Fed-EF's rounds to the
    target over full precision's, each m normalised by the largest m) on that seed's curves;
    NaN where fewer than two ``n/m`` reach the target."""
    out = {}
    for seed in sorted(set(df["seed"])):
        xs, ys = [], []
        for m in sorted(common.flag_values(cfg, "ms", int)):
            curves = {}
            for kind in ("ef", "fp"):
                sub = df[(df.run == f"{kind}_m{m}") & (df.metric == "grad_norm2")
                         & (df.seed == seed)].sort_values("round")
                curves[kind] = (sub["round"].to_numpy(), sub["value"].to_numpy(float))
            if not len(curves["ef"][1]) or not len(curves["fp"][1]):
                continue
            target = cfg.target * curves["fp"][1][0]
            t_ef = stats.rounds_to_target(*curves["ef"], target)
            t_fp = stats.rounds_to_target(*curves["fp"], target)
            if np.isfinite(t_ef) and np.isfinite(t_fp) and t_fp > 0:
                xs.append(cfg.n / m)
                ys.append(t_ef / t_fp)
        out[seed] = stats.loglog_slope(xs, ys)[0] if len(set(xs)) >= 2 else math.nan
    return pd.Series(out, dtype=float)


def check(df, cfg):
    df, lines = common.usable(sys.modules[__name__], cfg, df)
    from . import regime as rg
    card = rg.RegimeCard([rg.seeds(cfg.seeds, 20, "Fig. 8: 20 seeds")])
    slope_card = card.plus(rg.value("n/m values", len(set(common.flag_values(cfg, "ms", int))), 2,
                                    rg.at_least(2), "a slope needs two participation levels"))
    proto = "none: the theorem's setting on a quadratic"
    out = []
    fits = staleness_fits(df, cfg)
    parts = []
    for m, fit in fits.items():
        z = (fit["mean"] - fit["mean_window"]) / fit["se"] if fit["se"] else math.nan
        lines.append(f"staleness m={m}: mean {fit['mean']:.3f} over {fit['n_samples']} samples vs "
                     f"n/m = {fit['mean_theory']:.3g} (finite-run {fit['mean_window']:.3f}, "
                     f"z = {z:.2f}); chi-square {fit['chi2']:.1f} on {fit['dof']} dof; max |pmf "
                     f"diff| {fit['max_abs_pmf_diff']:.4f}")
        parts.append(vd.holds(CLAIMS["S1"], [fit["p_value"]], 0.01, side=">=",
                              what=f"m={m}: chi-square p-value against Geometric(m/n) "
                                   "(not rejected at 1 %)"))
    out.append(vd.every(CLAIMS["S1"], parts, what="staleness is Geometric(m/n)", card=card,
                        protocol=proto) if parts else
               vd.missing(CLAIMS["S1"], "staleness law", "no partial-participation runs"))
    tab = slowdowns(df, cfg)
    for _, row in tab.iterrows():
        lines.append(f"m={row.m:g} (n/m={row.n_over_m:g}): rounds to target Fed-EF "
                     f"{row.rounds_ef:g}, full precision {row.rounds_fp:g}; slowdown "
                     f"{row.slowdown:.2f} (mean-grad-norm ratio {row.avg_slowdown:.2f}) vs "
                     f"sqrt(n/m) {row.theory:.2f}")
    missing = [m for m in common.flag_values(cfg, "ms", int) if not (df.run == f"ef_m{m}").any()
               or not (df.run == f"fp_m{m}").any()]
    if missing:
        out.append(vd.missing(CLAIMS["S2"], "slowdown grows with n/m",
                              f"runs of m = {', '.join(map(str, missing))} missing"))
    else:
        slopes = seed_slowdown_slopes(df, cfg).dropna()
        what = "per-seed log-log slope of the slowdown in n/m (above 0; theory 0.5)"
        out.append(vd.exceeds(CLAIMS["S2"], slopes, 0.0, card=slope_card, protocol=proto,
                              what=what) if len(slopes) else
                   vd.undecided(CLAIMS["S2"], what, "in no seed do two n/m reach the target "
                                f"({cfg.target:g} x the start; more --rounds)",
                                card=slope_card, protocol=proto))
    m0 = min(common.flag_values(cfg, "ms", int))
    base = df[(df.run == f"ef_m{m0}") & (df.metric == "grad_norm2")]
    after = lambda d: d[d["round"] > cfg.restart_start].groupby("seed").value.mean()  # noqa
    effects = restart_effect(df, cfg)
    if not effects:
        out.append(vd.missing(CLAIMS["S3"], "restarting lowers the gradient norm",
                              f"the runs at m = {m0} (plain and restarting) missing"))
    for row in effects:
        r = after(df[(df.run == f"restart_m{m0}_S{row['S']}") & (df.metric == "grad_norm2")])
        out.append(vd.exceeds(CLAIMS["S3"], np.log(r) - np.log(after(base)).reindex(r.index),
                              0.0, direction=-1, card=card, protocol=proto,
                              scope=f"S={row['S']}, m={m0}",
                              what=f"log-ratio of the mean ||grad f||^2 after round "
                                   f"{cfg.restart_start}, restarting / plain (below 0)"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
