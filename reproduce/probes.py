"""Assumption probes: the theorems' constants measured on real runs, and the bounds held to them.

:class:`sims.experiments.probes.Probe` rides along four runs (``docs/probes.md`` says what each constant
is, how it is estimated and how well):

* ``quadratic`` -- a heterogeneous quadratic with known constants (``n = 10``, ``d = 50``,
  curvatures ``0.1..1``, Gaussian noise ``E||xi||^2 = 1``, ``K = 5``), Fed-EF-SGD with
  TopK-0.5, full participation, ``eta = 1`` and ``eta_l = 0.002``, small enough for Thm 4.2's
  condition at the measured ``L`` and ``q``: the bound with measured constants must lie above
  the measured ``(1/T) sum ||grad f||^2``, and the probe must recover the known ``L``,
  ``sigma^2`` and ``sigma_g^2``;
* ``quadratic_fast`` -- the same problem with ``eta_l = 0.05`` and ``m = 5`` of 10 clients
  (Thm 4.4): the learning-rate conditions fail at the measured ``L``, while Assumption 3
  holds throughout: the per-round ``q_A^2`` of the messages stays far from 1 (measured
  0.1-0.2, at most 0.36 over 300 rounds; the check prints the largest);
* ``fig8_full_n20`` and ``fig8_partial_m20`` -- the Fed-EF Figure 8 setting (MLP 784-200-10
  on the MNIST subset, label shards, Fed-EF-SGD with layer-wise TopK-0.01, ``eta_l = 0.1``,
  ``eta = 0.1 sqrt(m)``, one local epoch of batch 32) with ``n = 20`` (full) and ``m = 20``
  of ``n = 200``.

A figure per run (``figures/probes_<run>.png``): the measured running-average squared
gradient norm against the theorem's bound with the measured constants, and every constant
over the rounds. The check prints, per run, which theorem's premise fails and from which
round, the recovered-vs-known constants of the quadratic, and the probe's cost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.ticker import MaxNLocator, NullFormatter

from sims.core import engine
from sims.algorithms.fed_ef import FedEF
from sims.rules.compress import TopK
from sims.core.participation import Participation
from sims.experiments.probes import (Probe, bounds_from_probe, premise_violations, setting_from_df,
                         setting_params, summary, theory_setting, violations_records)
from sims.problems.quadratic import heterogeneous_quadratic
from sims.store.results import tidy
from sims.experiments.synthetic import torch_threads

from . import common, plotting
from . import verdicts as vd

PAPER, TARGET = "Fed-EF", "Thms 4.1-4.4 with measured constants (assumption probes)"
TITLE = "measured L, sigma^2, sigma_g^2, G, q_C, q_A, staleness, tail index; bounds with them"
DEFAULT_COST = "about 2 min (two quadratics, 100 rounds; Fig. 8 setting, 30 rounds; 2 seeds)"


@dataclass
class Config(common.EntryConfig):
    seeds: int = 2
    rounds: int = 30                 # rounds of the Fig. 8 runs
    quad_rounds: int = 100
    quad_every: int = 5
    fig8_every: int = 5
    quad_n: int = 10
    quad_d: int = 50
    quad_k: float = 0.5              # TopK fraction on the quadratic
    quad_eta_l: float = 0.002
    fast_eta_l: float = 0.05
    fast_m: int = 5
    minibatches: int = 8             # probe draws per client (Fig. 8 runs; quadratic: 64)
    probe_clients: int = 16          # clients per replica the Fig. 8 probe samples
    hvp_iters: int = 10              # Lanczos steps, Fig. 8 runs (converged there: docs)
    quads: str = "quadratic,quadratic_fast"   # which quadratic runs ("" for none)
    fig8: str = "full_n20,partial_m20"        # which Fig. 8 runs ("" for none)
    threads: int = 1                 # torch threads (0: leave torch's default)

    def scale(self):
        if self.full:
            self.seeds, self.rounds, self.quad_rounds = 5, 100, 300
        if self.tiny:
            self.seeds, self.rounds, self.quad_rounds = 1, 2, 10
            self.quad_every, self.fig8_every = 2, 2
            self.minibatches, self.probe_clients, self.hvp_iters = 4, 4, 5
            self.quads, self.fig8 = "quadratic", "full_n20"


QUAD_SIGMA, QUAD_HET, QUAD_K_STEPS, QUAD_DRAWS = 1.0, 1.0, 5, 64


def quadratic(cfg):
    return heterogeneous_quadratic(cfg.quad_n, cfg.quad_d, L=1.0, mu=0.1, sigma=QUAD_SIGMA,
                                   heterogeneity=QUAD_HET, local_steps=QUAD_K_STEPS, x0=3.0)


def known_constants(problem) -> dict:
    """The quadratic's exact constants, with the mean form of sigma_g^2 (Fed-EF A2 iii)."""
    c = dict(problem.constants())
    a, b = problem.a_np, problem.b_np
    c["sigma_g2_mean"] = float(((a * (b - b.mean(0))) ** 2).sum(1).mean())
    c["sigma_g2_max"] = c.pop("sigma_g2")
    return c


def _fig8_problem(cfg, n):
    return common.cached_problem(dataset="mnist", model="mlp", n_clients=n,
                                 subset_of=200 if n < 200 else None, data_dir=cfg.data_dir,
                                 device=cfg.device)


def _specs(cfg):
    """name -> (params, build, probe, rounds)"""
    def quad_probe():
        return Probe(every=cfg.quad_every, n_clients_sampled=None, minibatches=QUAD_DRAWS,
                     hvp_iters=max(cfg.hvp_iters, cfg.quad_d), hvp_clients=None)
    out = {
        "quadratic": ({"problem": "quadratic", "eta_l": cfg.quad_eta_l, "m": cfg.quad_n},
                      lambda: (quadratic(cfg), FedEF(eta=1.0, eta_l=cfg.quad_eta_l,
                                                     compressor=TopK(cfg.quad_k)),
                               Participation("full")), quad_probe(), cfg.quad_rounds),
        "quadratic_fast": ({"problem": "quadratic", "eta_l": cfg.fast_eta_l, "m": cfg.fast_m},
                           lambda: (quadratic(cfg), FedEF(eta=1.0, eta_l=cfg.fast_eta_l,
                                                          compressor=TopK(cfg.quad_k)),
                                    Participation("fixed", m=cfg.fast_m)),
                           quad_probe(), cfg.quad_rounds),
    }
    wanted = [v.strip() for v in str(cfg.quads).split(",") if v.strip()]
    unknown = set(wanted) - set(out)
    if unknown:
        raise common.EntryError(f"--quads takes {', '.join(out)}; got {sorted(unknown)}")
    out = {k: v for k, v in out.items() if k in wanted}
    for name in [v.strip() for v in str(cfg.fig8).split(",") if v.strip()]:
        kind, _, size = name.partition("_")
        if kind not in ("full", "partial") or not size[1:].isdigit():
            raise common.EntryError(f"--fig8 takes full_nN and partial_mM, got {name!r}")
        k = int(size[1:])
        n, m = (k, k) if kind == "full" else (200, k)

        def build(n=n, m=m):
            alg = FedEF(eta=0.1 * math.sqrt(m), eta_l=0.1, compressor=TopK(0.01))
            part = Participation("full") if m == n else Participation("fixed", m=m)
            return _fig8_problem(cfg, n), alg, part
        probe = Probe(every=cfg.fig8_every, n_clients_sampled=cfg.probe_clients,
                      minibatches=cfg.minibatches, hvp_iters=cfg.hvp_iters)
        out[f"fig8_{name}"] = ({"problem": "mnist_mlp", "eta_l": 0.1, "m": m}, build, probe,
                               cfg.rounds)
    return out


def runs(cfg):
    out = []
    for name, (params, build, probe, rounds) in _specs(cfg).items():
        def execute(cfg, seeds, progress, name=name, params=params, build=build, probe=probe,
                    rounds=rounds):
            problem, alg, part = build()
            setting = theory_setting(problem, alg, part)
            kw = {"eval_every": 1, "eval_test": False, "observers": probe.observers(),
                  "progress": lambda t: progress(1)}
            with torch_threads(cfg.threads if cfg.threads > 0 else torch.get_num_threads()):
                res = engine.run(problem, alg, part, rounds, seeds, **kw)
            progress(rounds - len(res.participants[0]))
            all_params = {"run_name": name, **params, **setting_params(setting)}
            df = tidy(res, name, all_params)
            b = bounds_from_probe(df, setting)
            for key, val in all_params.items():
                b[key] = val
            df = pd.concat([df, b], ignore_index=True)
            extra = {"algorithm": alg.describe(), "participation": part.describe(),
                     "problem": common.describe_problem(problem), "probe": probe.describe(),
                     "theory_setting": setting, "diverged_at_round": res.diverged_at,
                     "premise_violations": violations_records(premise_violations(df, setting))}
            if "quadratic" in name:
                extra["known_constants"] = known_constants(problem)
            return df, extra
        out.append(common.Run(name, params, execute=execute, rounds=rounds))
    return out


# ------------------------------------------------------------------------------ plotting
def _line(ax, df, metric, label, color, ls="-", lw=1.6):
    data = plotting.curves(df, metric, "run")
    for _, (xs, mean, lo, hi) in data.items():
        ok = np.isfinite(mean)
        if not ok.any():
            return False
        ax.plot(xs[ok], mean[ok], color=color, ls=ls, lw=lw, label=label,
                marker="o" if ok.sum() < 12 else None, ms=3)
        if np.isfinite(lo).any() and (hi[ok] > lo[ok]).any():
            ax.fill_between(xs[ok], lo[ok], hi[ok], color=color, alpha=0.15, lw=0)
        return True
    return False


def _hline(ax, y, label, color, ls=":"):
    if y is not None and np.isfinite(y):
        ax.axhline(y, color=color, ls=ls, lw=1.2, label=label)


def _logy(ax):
    """Log y where the curves span more than a decade (major labels only: minor tick labels
    on a log axis cost most of the drawing time)."""
    ys = np.array([v for line in ax.get_lines() for v in np.asarray(line.get_ydata(), float)
                   if np.isfinite(v)])
    if len(ys) and ys.min() > 0 and ys.max() / ys.min() > 10:
        ax.set_yscale("log")       # plotting.no_minor_labels drops minor labels (>= 100x)


def plot_run(df: pd.DataFrame, cfg, name: str):
    setting = setting_from_df(df)
    known = known_constants(quadratic(cfg)) if name.startswith("quadratic") else {}
    viol = premise_violations(df, setting)
    fig, axes = plt.subplots(2, 4, figsize=(20, 8.2))
    ax = axes[0, 0]
    _line(ax, df, "avg_grad_norm2", "measured (1/T) sum ||grad f||^2", "C0", lw=2)
    _line(ax, df, "grad_norm2", "||grad f(theta_t)||^2", "C0", lw=0.8, ls="--")
    for i, thm in enumerate(setting["theorems"]):
        label = f"Thm {thm[-2]}.{thm[-1]}" if thm.startswith("fed_ef_thm") else thm
        _line(ax, df, f"bound_{thm}", f"{label} bound, measured constants", f"C{3 + i}", lw=2)
    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(NullFormatter())
    shown = set()
    for v in viol:
        if v.round in shown or len(shown) >= 3:
            continue
        shown.add(v.round)
        ax.axvline(v.round, color="C3", ls=":", lw=1)
        ax.text(v.round, 0.03, f"fails: {v.premise[:34]}", rotation=90, fontsize=7,
                color="C3", ha="right", va="bottom", clip_on=True,
                transform=ax.get_xaxis_transform())
    ax.set_title("measured metric vs bound (log)")
    ax.set_ylabel("squared gradient norm")

    ax = axes[0, 1]
    _line(ax, df, "probe_L_hvp", "Lanczos ||hess f_i|| (max over sampled i)", "C0", lw=3)
    _line(ax, df, "probe_L_secant_client", "secant, f_i (max)", "C1")
    _line(ax, df, "probe_L_secant", "secant, f", "C2")
    _hline(ax, known.get("L"), "known L", "k")
    if setting["K"] and np.isfinite(setting["eta_l"]):
        _hline(ax, 1 / (8 * setting["K"] * setting["eta_l"]), "L at which eta_l = 1/(8KL)",
               "C3", "--")
    _logy(ax)
    ax.set_title("smoothness L")

    ax = axes[0, 2]
    _line(ax, df, "probe_sigma2_max", "sigma^2 (max over clients)", "C0")
    _line(ax, df, "probe_sigma2_mean", "sigma^2 (mean over clients)", "C0", ls="--")
    _line(ax, df, "probe_sigma_g2_mean", "sigma_g^2 = mean_i ||grad f_i - grad f||^2", "C1")
    _line(ax, df, "probe_sigma_g2_max", "max_i ||grad f_i - grad f||^2", "C1", ls="--")
    _hline(ax, known.get("sigma2"), "known sigma^2", "C0")
    _hline(ax, known.get("sigma_g2_mean"), "known sigma_g^2 (mean)", "C1")
    _logy(ax)
    ax.set_title("variance sigma^2, heterogeneity sigma_g^2")

    ax = axes[0, 3]
    _line(ax, df, "probe_G", "G = max ||g|| (stochastic and full)", "C0")
    _line(ax, df, "probe_G_full", "max_i ||grad f_i||", "C0", ls="--")
    _line(ax, df, "probe_G_inf", "G_g = max |g_j|", "C1")
    _logy(ax)
    ax.set_title("gradient bounds")

    ax = axes[1, 0]
    _line(ax, df, "qA2", "q_A^2, the round's messages (engine)", "C0", lw=1)
    _line(ax, df, "probe_qA2", "q_A^2, probe dry run", "C0", ls="--")
    _line(ax, df, "probe_qC2_max", "q_C^2 = max_i ||C(x_i)-x_i||^2/||x_i||^2", "C1")
    _line(ax, df, "probe_qC2_mean", "q_C^2, mean over i", "C1", ls="--")
    _hline(ax, setting.get("q2_worst"), "worst case q_C^2 (Def. 1)", "C1")
    ax.axhline(1.0, color="C3", ls="--", lw=1, label="1 (A3 needs q_A < 1)")
    ax.set_title("compression q_C^2, q_A^2")

    ax = axes[1, 1]
    _line(ax, df, "probe_staleness_max", "max staleness of a participant's error", "C0")
    _line(ax, df, "staleness_mean", "mean staleness (engine)", "C1")
    if setting["m"] < setting["n"]:
        _hline(ax, setting["n"] / setting["m"], "n/m (geometric mean)", "C1")
    ax.set_title("staleness (rounds)")

    ax = axes[1, 2]
    if not _line(ax, df, "probe_tail_index", "Hill tail index of noise coordinates", "C0"):
        ax.text(0.5, 0.5, "no gradient noise measured\n(minibatch = client's whole data)",
                ha="center", va="center", transform=ax.transAxes)
    ax.axhline(2.0, color="C3", ls="--", lw=1, label="2 (infinite variance below)")
    ax.set_title("tail index")

    ax = axes[1, 3]
    _line(ax, df, "probe_time", "probe call (s)", "C0")
    wall = df[df.metric == "wall_time"].groupby("round").value.mean()
    if len(wall) > 1:      # wall_time is taken before the round's observers run
        calls = df[df.metric == "probe_time"].groupby("round").value.mean()
        per = wall.diff().dropna() - calls.reindex(wall.index - 1).fillna(0).to_numpy()[1:]
        ax.plot(per.index, per.values, color="C1", lw=1, label="training round (s)")
    _logy(ax)
    ax.set_title("probe cost")
    for a in axes.flat:
        a.set_xlabel("round")
        a.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    desc = (f"{setting['algorithm']} ({setting['compressor']}), n={setting['n']}, "
            f"m={setting['m']:g}, K={setting['K']}, eta={setting['eta']:.3g}, "
            f"eta_l={setting['eta_l']:g}")
    fig.suptitle(f"assumption probes, {name}: {desc} ({df.seed.nunique()} seeds)", y=1.0)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, f"probes_{name}")


def plot(df, cfg):
    paths = []
    for name, sub in df.groupby("run", sort=False):
        paths += plot_run(sub, cfg, name)
    return paths


# ------------------------------------------------------------------------------ check
def _pooled(df, metric, how="mean"):
    vals = df[df.metric == metric].value.dropna()
    return float(getattr(vals, how)()) if len(vals) else math.nan


def recovery_lines(df: pd.DataFrame, cfg) -> list[str]:
    """The quadratic's recovered constants against the known ones, with the tolerance."""
    known = known_constants(quadratic(cfg))
    N = QUAD_DRAWS
    calls = df[df.metric == "probe_sigma2_mean"]
    n_draws = len(calls) * cfg.quad_n * N                  # chi^2_d / d draws pooled
    tol_s2 = 4 * math.sqrt(2 / (n_draws * cfg.quad_d))
    rows = [("L (Lanczos, max)", _pooled(df, "probe_L_hvp", "max"), known["L"], 1e-6),
            ("sigma^2 (mean over clients and calls)", _pooled(df, "probe_sigma2_mean"),
             known["sigma2"], tol_s2),
            ("sigma_g^2 mean form", _pooled(df, "probe_sigma_g2_mean", "max"),
             known["sigma_g2_mean"], 1e-9),
            ("sigma_g^2 max form", _pooled(df, "probe_sigma_g2_max", "max"),
             known["sigma_g2_max"], 1e-9)]
    out = []
    for label, got, want, tol in rows:
        err = abs(got - want) / want
        out.append(f"  {label}: measured {got:.6g}, known {want:.6g}, relative error "
                   f"{err:.2e} (tolerance {tol:.1e}) -> "
                   f"{'recovered' if err <= tol else 'NOT recovered'}")
    sec = df[df.metric == "probe_L_secant"].value.dropna()
    if len(sec):
        out.append(f"  L (secant along the path): {sec.min():.3g}..{sec.max():.3g}, inside "
                   f"[mu, L] = [{known['mu']:g}, {known['L']:g}]: "
                   f"{bool((sec >= known['mu'] - 1e-9).all() and (sec <= known['L'] + 1e-9).all())}"
                   " (a directional estimate: a lower bound on L)")
    return out


def probe_cost(df: pd.DataFrame) -> dict:
    """The probe's time against the run's: ``wall_time`` is taken before a round's observers
    run, so the run's total is the last ``wall_time`` plus the last probe call."""
    calls = df[df.metric == "probe_time"].groupby("round").value.first()
    wall = df[df.metric == "wall_time"].groupby("round").value.max()
    total = float(wall.iloc[-1] + calls.get(wall.index[-1], 0.0))
    probe = float(calls.sum())
    return {"calls": len(calls), "probe_s": probe, "per_call_s": probe / max(1, len(calls)),
            "run_s": total, "without_probe_s": total - probe,
            "overhead": probe / max(total - probe, 1e-12)}


def cost_line(df: pd.DataFrame) -> str:
    c = probe_cost(df)
    return (f"probe cost: {c['probe_s']:.2f} s in {c['calls']} calls ({c['per_call_s']:.3f} s "
            f"each) = {100 * c['probe_s'] / c['run_s']:.0f}% of the run's {c['run_s']:.2f} s "
            f"(+{100 * c['overhead']:.0f}% over the {c['without_probe_s']:.2f} s without it)")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("probes_quadratic", "probes_fig8_full_n20")
CLAIMS = vd.claims(
    vd.Claim("B", "Fed-EF", "Theorems 4.1-4.4: the averaged squared gradient norm is at most the "
             "bound (evaluated with the constants measured on the run)", "holds",
             "Thms 4.1-4.4; docs/probes.md"),
    vd.Claim("A3", "Fed-EF", "Assumption 3: the compression discrepancy q_A^2 < 1 in every "
             "round", "holds", "Assumption 3, App. C"),
)


def check(df, cfg):
    lines, out = [], []
    for name, sub in df.groupby("run", sort=False):
        setting = setting_from_df(sub)
        lines.append(f"{name}: {setting['algorithm']} with {setting['compressor']}, "
                     f"n={setting['n']}, m={setting['m']:g}, K={setting['K']}; theorems: "
                     f"{', '.join(setting['theorems']) or 'none'}")
        lines += ["  " + s for s in summary(sub, setting)]
        last = sub[sub["round"] == sub[sub.metric == "avg_grad_norm2"]["round"].max()]
        meas = last[last.metric == "avg_grad_norm2"].value.mean()
        for thm in setting["theorems"]:
            bound = last[last.metric == f"bound_{thm}"].value.mean()
            out.append(vd.holds(CLAIMS["B"], [meas / bound if np.isfinite(bound) else math.nan],
                                1.0, scope=f"{name}, {thm}",
                                what=f"measured avg ||grad f||^2 {meas:.4g} / the bound with "
                                     f"measured constants {bound:.4g} at T="
                                     f"{int(last['round'].max())} (undefined where q >= 1)"))
        qa2 = sub[sub.metric == "qA2"].groupby("round").value.mean()
        if len(qa2):
            out.append(vd.holds(CLAIMS["A3"], qa2.to_numpy(float), 1.0, side="<", scope=name,
                                what="per-round q_A^2 of the messages (seed mean) below 1"))
        if name == "quadratic":
            lines.append("  recovered vs known constants:")
            lines += recovery_lines(sub, cfg)
        lines.append("  " + cost_line(sub))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
