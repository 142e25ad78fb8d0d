"""Fed-LAMB theory on a synthetic layered quadratic: SUPP Theorem 5's bound against the
measured average (T1), its rate in R (T2) and the linear speedup in n (T3), with fitted
log-log slopes and seed intervals, as :mod:`reproduce.speedup` does for Fed-EF.

Spec: ``shared/specs/fed-lamb.md`` sections 2.5-2.6 (Theorem 5 and the rate derived from its
statement) and 4 (T1-T3).

Problem: ``d = p = 20`` coordinates in ``h = 4`` layers of 5 (Fed-LAMB's trust ratio is taken
per layer), curvatures from 0.5 to ``L = 1``, homogeneous clients whose centres sit at 2 in
every coordinate (so ``||theta_l||`` is about 4.5 and the trust ratio's ``phi = clip(||theta_l||,
1e-3, 10)`` is neither clipped nor near 0; at a centre at the origin ``phi`` collapses to
1e-3 and the steps with it), Rademacher gradient noise of scale ``sigma`` per coordinate
(bounded: Assumption H2's ``||g|| <= M`` holds, with ``||xi|| = sigma sqrt(p)`` exactly; H3's
per-coordinate variance is ``sigma^2``), ``T = 2`` local steps, started at the optimum
(``--x0 0``: ``Delta = f(theta_1) - f* = 0``), the noise-dominated regime where the
statement's ``C_1 / sqrt(nR)`` term leads (spec 2.6: ``R >= n (C_2/C_1)^2``).

Fed-LAMB as Theorem 5 assumes it: ``lambda = 0``, a constant ``alpha = kappa / sqrt(R)`` with
``kappa`` independent of ``n`` and ``R`` (spec 2.6: the choice that gives linear speedup), no
bias correction (the theorem's ``hat v <= max(eps, M^2)``), ``eps = 1e-8``, beta1 = 0.9,
beta2 = 0.999, full participation.

Measured per run and seed: the theorem's left side ``(1/R) sum_{r=1}^R ||grad f(theta_r) /
hat v_r^(1/4)||^2`` (``theta_1`` the initial model, ``hat v_r`` the server's ``vhat`` when
``theta_r`` is broadcast), the plain ``(1/R) sum ||grad f(theta_r)||^2`` beside it, and the
constants the bound needs: ``M`` from the run (the largest client gradient at a server model,
plus ``L`` times the largest local drift Theorem 5's Lemma allows, ``alpha T phi_M sqrt(h)``,
plus ``sigma sqrt(p)``), ``phi_M = 10`` (the clip's ceiling, H4), ``L``, ``sigma``, ``Delta``.

Claims (each a bound, so "at least as fast" is the claim; the fitted slopes of the left side
and of the plain average are printed beside it as information on the bound's tightness,
never as a verdict):

* T1: the measured left side is at most Theorem 5's right side (the statement's form; the
  proof's final display as a second scope), every run and seed;
* T2: with ``alpha = kappa / sqrt(R)`` the left side decays at least like ``R^-1/2`` (fitted
  slope below ``-0.5 + 0.15``);
* T3: at fixed ``R``, with ``alpha`` independent of ``n``, it falls at least like ``n^-1/2``
  (linear speedup).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from sims.algorithms.fed_lamb import FedLAMB
from sims.core.params import ParamLayout
from sims.core.participation import Participation
from sims.problems.quadratic import NoiseLaw, QuadraticProblem
from sims.experiments.synthetic import stats
from theory import bounds as tb

from . import common, plotting
from . import regime as rg
from . import verdicts as vd

PAPER, TARGET = "Fed-LAMB", "SUPP Theorem 5 (T1), its rate in R (T2) and in n (T3)"
TITLE = "Fed-LAMB on a layered quadratic: Theorem 5's bound, slopes in R and n vs theory"
DEFAULT_COST = "about 1 min on one core (R in {50..800} at n=8, n in {4..32} at R=400, 5 seeds)"
DEVICES = ("cpu",)       # quadratics on the CPU: another --device is refused

CENTRE = 2.0             # every coordinate's optimum: phi(||theta_l||) ~ 4.5, unclipped
PHI_M = 10.0             # the clip's ceiling: Assumption H4's phi_M for phi = "clip"


@dataclass
class Config(common.EntryConfig):
    seeds: int = 5
    rounds: int = 400            # the horizon of the n-sweep (T3)
    rs: str = "50,100,200,400,800"
    ns: str = "4,8,16,32"
    n_rates: int = 8             # n of the R-sweep (T2)
    d: int = 20
    layers: int = 4
    local_steps: int = 2
    sigma: float = 1.0
    x0: float = 0.0              # offset of the start from the optimum (0: Delta = 0)
    kappa: float = 1.0
    eps: float = 1e-8

    def scale(self):
        if self.full:
            self.seeds, self.rs, self.ns, self.rounds = 10, "50,100,200,400,800,1600", \
                "4,8,16,32,64", 800
        if self.tiny:
            self.seeds, self.rs, self.ns, self.rounds = 2, "20,40", "2,4", 20


def problem(cfg, n: int) -> QuadraticProblem:
    if cfg.d % cfg.layers:
        raise common.EntryError(f"--d={cfg.d} must split into --layers={cfg.layers} equal layers")
    prob = QuadraticProblem(np.geomspace(0.5, 1.0, cfg.d), np.full((n, cfg.d), CENTRE),
                            NoiseLaw("rademacher", cfg.sigma), local_steps=cfg.local_steps,
                            x0=np.full(cfg.d, CENTRE + cfg.x0))
    w = cfg.d // cfg.layers
    prob.layout = ParamLayout(tuple(f"layer{i}" for i in range(cfg.layers)),
                              tuple((w,) for _ in range(cfg.layers)))
    return prob


def alpha(cfg, R: int) -> float:
    """Theorem 5's constant rate at the spec's choice ``alpha = kappa / sqrt(R)``."""
    return cfg.kappa / math.sqrt(R)


def theorem_metric(view) -> dict:
    """Observer: ``||grad f(theta) / vhat^(1/4)||^2`` at the server model and ``vhat`` it
    broadcasts, and the largest client gradient norm there (for ``M``)."""
    prob, th, vhat = view.problem, view.server["theta"], view.server["vhat"]
    per_client = prob.a * (th.unsqueeze(1) - prob.b)            # [R, n, d]
    g = per_client.mean(1)
    return {"precond_grad_norm2": ((g * g) / vhat.sqrt()).sum(-1),
            "max_client_grad": per_client.norm(dim=-1).amax(-1)}


theorem_metric.at_start = True


def runs(cfg):
    todo = [("R", cfg.n_rates, R) for R in common.flag_values(cfg, "rs", int)] + \
           [("n", n, cfg.rounds) for n in common.flag_values(cfg, "ns", int)]
    out = []
    for sweep, n, R in todo:
        name = f"R{R}_n{n}"
        if any(r.name == name for r in out):       # shared by both sweeps: run once
            continue
        params = {"n": n, "R": R, "alpha": alpha(cfg, R)}

        def build(cfg, n=n, params=params):
            return (problem(cfg, n),
                    FedLAMB(eta_l=params["alpha"], lam=0.0, bias_correction="none",
                            eps=cfg.eps),
                    Participation("full"))
        out.append(common.Run(name, params, execute=common.one_engine_run(
            build, name, params, rounds=R, observers=[theorem_metric])))
    return out


MEASURES = {"lhs": "(1/R) sum ||grad f / vhat^(1/4)||^2 (Thm 5's left side)",
            "plain": "(1/R) sum ||grad f||^2"}


def per_seed(df, cfg) -> pd.DataFrame:
    """Per (n, R, seed): the theorem's left side over rounds 1..R (the models broadcast at
    rounds 0..R-1), the plain average beside it, and the run's ``M``."""
    rows = []
    for (n, R, a, seed), grp in df.groupby(["n", "R", "alpha", "seed"]):
        def curve(metric):
            c = grp[grp.metric == metric].set_index("round")["value"].astype(float)
            return c[c.index < R]
        grad_max = float(grp[grp.metric == "max_client_grad"]["value"].astype(float).max())
        rows.append({"n": n, "R": R, "alpha": a, "seed": seed,
                     "lhs": float(curve("precond_grad_norm2").mean()),
                     "plain": float(curve("grad_norm2").mean()),
                     "M": grad_max + 1.0 * a * cfg.local_steps * PHI_M * math.sqrt(cfg.layers)
                          + cfg.sigma * math.sqrt(cfg.d)})
    return pd.DataFrame(rows, columns=["n", "R", "alpha", "seed", *MEASURES, "M"])


def bound(cfg, const, n, R, a, M, form="statement") -> float:
    """Theorem 5's right side at the run's constants (:func:`theory.bounds.fed_lamb_thm5_bound`;
    ``const``: the problem's :meth:`~sims.problems.quadratic.QuadraticProblem.constants`)."""
    return tb.fed_lamb_thm5_bound(L=const["L"], M=M, sigma=cfg.sigma, n=n, h=cfg.layers,
                                  p=cfg.d, T=cfg.local_steps, R=R, alpha=a, phi_M=PHI_M,
                                  beta2=0.999, epsilon=cfg.eps,
                                  f0_minus_fstar=const["f0_minus_fstar"], form=form)


def with_bounds(tab, cfg) -> pd.DataFrame:
    """``tab`` with Theorem 5's right side per row, both forms. ``L`` and ``f(theta_1) - f*``
    do not depend on ``n`` (every client has the same centre), so they are read once."""
    const = problem(cfg, 1).constants()
    tab = tab.copy()
    for form in ("statement", "proof"):
        tab[f"rhs_{form}"] = [bound(cfg, const, r.n, r.R, r.alpha, r.M, form)
                              for r in tab.itertuples()]
    return tab


def seed_slopes(tab, cfg) -> dict:
    """``{"R": {measure: {seed: slope}}, "n": {...}}``: log-log slopes against R at
    ``n = n_rates`` and against n at ``R = rounds``."""
    sweeps = {"R": (tab[tab.n == cfg.n_rates], "R"), "n": (tab[tab.R == cfg.rounds], "n")}
    out = {}
    for key, (sub, x) in sweeps.items():
        out[key] = {meas: {seed: stats.loglog_slope(g[x], g[meas])[0]
                           for seed, g in sub.groupby("seed") if g[x].nunique() >= 2}
                    for meas in MEASURES}
    return out


def plot(df, cfg):
    tab = with_bounds(per_seed(df, cfg), cfg)
    sl = seed_slopes(tab, cfg)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    colors = sns.color_palette("deep")
    for ax, key, sub, x in ((axes[0], "R", tab[tab.n == cfg.n_rates], "R"),
                            (axes[1], "n", tab[tab.R == cfg.rounds], "n")):
        for meas, color, marker in (("lhs", colors[0], "o"), ("plain", colors[1], "s")):
            g = sub.groupby(x)[meas]
            mean, lo, hi = g.mean(), g.min(), g.max()
            iv = stats.seed_interval(list(sl[key][meas].values()))
            ax.errorbar(mean.index, mean.values, yerr=[mean - lo, hi - mean], color=color,
                        marker=marker, capsize=2, ms=4,
                        label=f"{MEASURES[meas]}: slope {stats.fmt_interval(iv)}")
            if len(mean):
                xs = np.array(mean.index, dtype=float)
                ax.plot(xs, mean.values[0] * (xs / xs[0]) ** -0.5, ":", color=color, lw=1)
        ax.set(xscale="log", yscale="log", xlabel=x,
               title=(f"rate in R (n={cfg.n_rates}, alpha = {cfg.kappa:g}/sqrt(R))" if key == "R"
                      else f"speedup in n (R={cfg.rounds})"))
        ax.legend(fontsize=7)
    ax = axes[2]
    for form, color in (("statement", colors[2]), ("proof", colors[3])):
        ratio = tab["lhs"] / tab[f"rhs_{form}"]
        ax.scatter(tab["R"] * 0 + np.arange(len(tab)), ratio, s=10, color=color,
                   label=f"measured / Thm 5 RHS ({form} form), worst {ratio.max():.2g}")
    ax.axhline(1.0, color="k", lw=1)
    ax.set(yscale="log", xlabel="run x seed", ylabel="left side / right side",
           title="T1: the measured average against the bound (below 1 holds)")
    ax.legend(fontsize=7)
    fig.suptitle(f"Fed-LAMB (lambda=0, no bias correction, eps={cfg.eps:g}) on a layered quadratic "
                 f"(p={cfg.d}, h={cfg.layers}, T={cfg.local_steps}, Rademacher sigma={cfg.sigma:g}, "
                 f"x0-x*={cfg.x0:g}; {cfg.seeds} seeds; dotted: slope -1/2)", y=1.02)
    plotting.no_minor_labels(fig)
    return plotting.save(fig, cfg.figures, "fedlamb_theory")


FIGURES = ("fedlamb_theory",)
CLAIMS = vd.claims(
    vd.Claim("T1", "Fed-LAMB", "under H1-H4 with lambda = 0 and a constant alpha, (1/R) sum_r "
             "E||grad f(theta_r)/vhat_r^(1/4)||^2 is at most Theorem 5's right side",
             "holds", "SUPP Thm 5; spec 4 T1"),
    vd.Claim("T2", "Fed-LAMB", "with alpha = kappa/sqrt(R) the averaged preconditioned squared "
             "gradient norm decays like R^-1/2", "slope", "SUPP Thm 5 with spec 2.6; spec 4 T2"),
    vd.Claim("T3", "Fed-LAMB", "linear speedup: at fixed R in the noise-dominated regime, with "
             "alpha independent of n, it falls like n^-1/2", "slope",
             "published abstract; spec 2.6 and 4 T3"),
)
SLOPE_MARGIN = 0.15      # a slope "is" the predicted one within +-0.15


def regime_card(cfg, tab, *, rates: bool) -> rg.RegimeCard:
    """What the theorem assumes, measured: phi within [phi_m, phi_M] (H4), bounded gradients
    (H2, from the run); for the rates (``rates``, T2 and T3) also Delta = 0, the
    noise-dominated regime where the statement's C_1/sqrt(nR) term leads (spec 2.6)."""
    prob = problem(cfg, max(common.flag_values(cfg, "ns", int) + [cfg.n_rates]))
    const = prob.constants()
    noise_led = [rg.value("f(theta_1) - f* (noise-dominated)", float(const["f0_minus_fstar"]),
                          0.0, rg.at_most(0.05), "spec 2.6: the C_1/sqrt(nR) term leads")]
    return rg.RegimeCard((noise_led if rates else []) + [
        rg.value("||theta_l|| at the optimum (phi unclipped)",
                 float(CENTRE * math.sqrt(cfg.d // cfg.layers)), math.nan,
                 rg.at_least(2e-3), "H4: phi_m <= phi <= phi_M, phi = clip(., 1e-3, 10)"),
        rg.value("largest M measured (H2)", float(tab["M"].max()) if len(tab) else math.nan,
                 math.nan, rg.info(), "H2: ||g|| <= M"),
        rg.seeds(cfg.seeds, 3, "spec 4: seeds for a slope")])


def check(df, cfg):
    df, lines = common.usable(sys.modules[__name__], cfg, df)
    df = common.without_nonfinite(df, "grad_norm2", lines)
    if not len(df):
        return lines + [vd.missing(c, c.statement, "no healthy results") for c in CLAIMS.values()]
    tab = with_bounds(per_seed(df, cfg), cfg)
    card, rate_card = regime_card(cfg, tab, rates=False), regime_card(cfg, tab, rates=True)
    lines.append("per run (seed means): theorem's left side, plain average, M, and the bound")
    for (n, R), g in tab.groupby(["n", "R"]):
        lines.append(f"n={n:<3g} R={R:<5g} alpha={g.alpha.iloc[0]:.3g}: lhs {g.lhs.mean():.4g}, "
                     f"plain {g.plain.mean():.4g}, M {g.M.mean():.3g}, RHS statement "
                     f"{g.rhs_statement.mean():.4g}, proof {g.rhs_proof.mean():.4g}")
    out = []
    for form in ("statement", "proof"):
        out.append(vd.holds(CLAIMS["T1"], tab["lhs"] / tab[f"rhs_{form}"], 1.0, side="<=",
                            what="measured left side / Theorem 5's right side, every run and seed",
                            card=card, scope=f"the theorem's {form} form",
                            protocol="none: the theorem's constant alpha = kappa/sqrt(R)"))
    sl = seed_slopes(tab, cfg)
    for key, claim_id in (("R", "T2"), ("n", "T3")):
        c = CLAIMS[claim_id]
        lhs = pd.Series(sl[key]["lhs"], dtype=float)
        out.append(vd.exceeds(c, lhs, -0.5 + SLOPE_MARGIN, direction=-1, card=rate_card,
                              scope="at least the bound's rate (the claim)",
                              protocol="none: the theorem's constant alpha = kappa/sqrt(R)",
                              what=f"log-log slope of Thm 5's left side in {key} "
                                   f"(the bound: -0.5; at least as fast: below "
                                   f"{-0.5 + SLOPE_MARGIN:g})"))
        for meas in MEASURES:        # how tight the bound's -1/2 is: information, not a verdict
            iv = stats.seed_interval(list(sl[key][meas].values()))
            lines.append(f"{claim_id} tightness (not the claim): fitted slope in {key} of "
                         f"{MEASURES[meas]}: {stats.fmt_interval(iv)} (the bound's: -0.5)")
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
