"""FedLADA's exact identities (spec 4 T1-T3) measured on engine runs, and the symbolic audit
of Sec. 2.6 (T4) read as one verdict.

* **T1** (Lemma B.8, App. B.1): ``z^t = x^t / alpha - (1 - alpha) / alpha x^{t-1}`` moves as
  ``z^{t+1} = z^t - eta eta_l D_t`` with ``eta = K eta_g``, ``D_t`` the mean over the round's
  participants and local steps of ``m / sqrt(vhat)``. The lemma is stated at constant rates;
  under a learning-rate decay (the paper's experiments decay 0.998 a round) one more term
  appears, ``-(1 - alpha) / alpha (c_t - c_{t-1}) g_a^t`` with ``c_t`` the round's effective
  rate. Checked: the printed form on constant-rate runs, the form with the decay's term on
  decayed runs (the printed form's miss there is printed beside it).
* **T2** (Eq. 4, Alg. 3 line 18): ``g_a^{t+1} = alpha D_t + (1 - alpha) g_a^t`` on every run
  (with decoupled weight decay the decay term joins ``D_t``).
* **T3**: ``vhat`` non-decreasing within a round, ``v^{t+1} >= v^t``, ``vartheta = 1/sqrt(v) <=
  1/eps_v``, ``||m||_inf <= max |g|`` of the round's gradients.
* **T4**: "all Sec. 2.6 sympy identities and inequalities hold, with the noted corrections":
  every FedLADA check of ``python -m theory`` verifies as printed or with its recorded
  correction (``Check.corrected``); the checks refuted with no correction are named.

Runs (:mod:`sims.experiments.fedlada_invariants` records them): a heterogeneous quadratic, 8
clients, ``d = 10``, ``K = 3`` local steps, gradient noise 0.3, FedLADA with ``alpha = 0.3``,
``eta_g = 0.8``, ``eta_l = 0.05``, ``eps_v = 1e-3``, 20 rounds, 5 seeds as replicas, in five
settings: the lemma's own (full participation, constant rates, no weight decay), then 3 of 8
clients a round with coupled weight decay, with decoupled weight decay, with a local rate
decay of 0.9 a round, and with the decay on the server rate too. Float64; an identity "holds"
when its relative residual is at most :data:`TOL` in every round and replica.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sims.algorithms.fedlada import FedLADA
from sims.core.participation import Participation
from sims.experiments.fedlada_invariants import measure
from sims.experiments.synthetic import torch_threads
from sims.problems.quadratic import heterogeneous_quadratic

from . import common, plotting
from . import regime as rg
from . import verdicts as vd

PAPER, TARGET = "FedLADA", "T1-T4: Lemma B.8, Eq. 4, the moment invariants, the Sec. 2.6 audit"
TITLE = "FedLADA's identities on engine runs (quadratic) and the symbolic audit"
DEFAULT_COST = "about 30 s on one core (5 settings x 20 rounds x 5 seeds; the sympy audit)"
DEVICES = ("cpu",)

#: an identity holds when its relative residual is at most this in every round and replica
#: (float64 rounding over a few dozen operations is ~1e-15)
TOL = 1e-10

#: name -> (participants a round, weight decay, its mode, local rate decay, decay the server rate)
SETTINGS = {
    "lemma": (8, 0.0, "coupled", 1.0, False),
    "partial_coupled_wd": (3, 0.05, "coupled", 1.0, False),
    "partial_decoupled_wd": (3, 0.05, "decoupled", 1.0, False),
    "local_decay": (3, 0.05, "coupled", 0.9, False),
    "global_decay": (3, 0.05, "coupled", 0.9, True),
}


@dataclass
class Config(common.EntryConfig):
    seeds: int = 5
    rounds: int = 20
    n_clients: int = 8
    d: int = 10
    local_steps: int = 3
    alpha: float = 0.3

    def scale(self):
        if self.tiny:
            self.seeds, self.rounds = 2, 4


def _build(cfg, name):
    m, wd, mode, decay, glob = SETTINGS[name]
    problem = heterogeneous_quadratic(cfg.n_clients, cfg.d, local_steps=cfg.local_steps, seed=5,
                                      sigma=0.3, x0=1.0)
    alg = FedLADA(eta=0.8, eta_l=0.05, alpha=cfg.alpha, eps_v=1e-3, weight_decay=wd,
                  wd_mode=mode, lr_decay=decay, decay_global=glob)
    return problem, alg, Participation("fixed", m=min(m, cfg.n_clients))


def _execute(name, params):
    def execute(cfg, seeds, progress):
        problem, alg, part = _build(cfg, name)
        with torch_threads(1):
            res = measure(problem, alg, part, cfg.rounds, seeds)
        progress(cfg.rounds)
        frames = [pd.DataFrame({"run": name, "seed": seed, "round": np.arange(1, cfg.rounds + 1),
                                "metric": metric, "value": values[r], "diverged_at": np.nan})
                  for metric, values in res.items() for r, seed in enumerate(seeds)]
        df = pd.concat(frames, ignore_index=True)
        for k, v in params.items():
            df[k] = v
        return df, {"algorithm": alg.describe(), "participation": part.describe(),
                    "problem": common.describe_problem(problem)}
    return execute


def runs(cfg):
    out = []
    for name, (m, wd, mode, decay, glob) in SETTINGS.items():
        params = {"setting": name, "m": m, "weight_decay": wd, "wd_mode": mode,
                  "lr_decay": decay, "decay_global": glob, "alpha": cfg.alpha}
        out.append(common.Run(name, params, execute=_execute(name, params)))
    return out


def _values(df, metric, settings=None):
    sub = df[df.metric == metric]
    if settings is not None:
        sub = sub[sub["run"].isin(settings)]
    return sub["value"].astype(float).to_numpy()


#: the settings at constant rates (the printed lemma's) and with a rate decay
CONSTANT = tuple(name for name, s in SETTINGS.items() if s[3] == 1.0)
DECAYED = tuple(name for name in SETTINGS if name not in CONSTANT)


def plot(df, cfg):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6))
    styles = {"eq4": "-", "lemma_b8": "--", "lemma_b8_printed": ":"}
    for name in SETTINGS:
        for metric, ls in styles.items():
            g = df[(df["run"] == name) & (df.metric == metric)].groupby("round")["value"].max()
            if len(g):
                axes[0].plot(g.index, np.maximum(g.values, 1e-18), ls,
                             label=f"{metric} ({name})")
    axes[0].axhline(TOL, color="k", lw=0.8)
    axes[0].set(yscale="log", xlabel="round", ylabel="relative residual (max over seeds)",
                title="T1 / T2: Lemma B.8 and Eq. 4 (dotted: the printed lemma)")
    axes[0].legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    for metric in ("vhat_fell", "v_fell", "theta_excess", "m_excess"):
        g = df[df.metric == metric].groupby("round")["value"].max()
        axes[1].plot(g.index, g.values, marker="o", ms=3, label=metric)
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].set(xlabel="round", ylabel="margin (<= 0: the invariant holds)",
                title="T3: moment invariants (max over settings and seeds)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"FedLADA's identities on engine runs: quadratic, {cfg.n_clients} clients, "
                 f"d = {cfg.d}, K = {cfg.local_steps}, alpha = {cfg.alpha:g}, {cfg.seeds} seeds; "
                 "five settings (participation, weight decay, rate decay)", fontsize=9)
    return plotting.save(fig, cfg.figures, "fedlada_theory")


FIGURES = ("fedlada_theory",)
CLAIMS = vd.claims(
    vd.Claim("T1", "FedLADA", "Lemma B.8: z^t = x^t/alpha - (1-alpha)/alpha x^{t-1} moves by "
             "eta eta_l D_t exactly, eta = K eta_g", "every", "Lemma B.8; spec 2.6 item 2, 4 T1"),
    vd.Claim("T2", "FedLADA", "Eq. 4: g_a^{t+1} = alpha D_t + (1-alpha) g_a^t exactly",
             "holds", "Eq. 4, Alg. 3 line 18; spec 4 T2"),
    vd.Claim("T3", "FedLADA", "vhat non-decreasing within and across rounds, theta <= 1/eps_v, "
             "||m||_inf <= max ||g||_inf", "every", "Alg. 3 lines 9-11, Eq. 6; spec 4 T3"),
    vd.Claim("T4", "FedLADA", "all Sec. 2.6 identities and inequalities hold, with the noted "
             "corrections", "holds", "spec 2.6, 4 T4; python -m theory --paper fedlada"),
)


def audit_sources() -> str:
    """The first 12 hex digits of the sha256 of ``theory/``'s sources: T4 runs the audit in
    :func:`check` on every call (the code digest of saved runs hashes ``theory/bounds.py``
    alone), so its line names the audit it ran."""
    import hashlib
    from pathlib import Path
    h = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parents[1] / "theory").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def audit() -> tuple[int, int, list[str]]:
    """``(checks, verified with a correction, names refuted with none)`` of the FedLADA audit
    (run here, not saved: see :func:`audit_sources`)."""
    from theory.core import run_all
    rows = run_all("fedlada")
    fixed, broken = 0, []
    for c, r in rows:
        if r.status == "verified":
            continue
        if c.corrected is not None and c.run(**c.corrected).status == "verified":
            fixed += 1
        else:
            broken.append(f"{c.name} ({r.status}; {c.severity or c.kind})")
    return len(rows), fixed, broken


def check(df, cfg):
    df, lines = common.usable(sys.modules[__name__], cfg, df)
    proto = "none: exact identities on seeded runs"
    card = rg.RegimeCard([
        rg.value("precision", "float64", "exact arithmetic", rg.info(),
                 "identities hold to rounding; tolerance " f"{TOL:g}"),
        rg.seeds(cfg.seeds, 5, "the repository's synthetic checks")])
    out = []
    for name in SETTINGS:
        sub = df[df["run"] == name]
        if len(sub):
            worst = {m: sub[sub.metric == m]["value"].astype(float).max()
                     for m in ("eq4", "lemma_b8", "lemma_b8_printed")}
            lines.append(f"{name:21s}: Eq. 4 {worst['eq4']:.1e}, Lemma B.8 (with the decay's "
                         f"term) {worst['lemma_b8']:.1e}, printed {worst['lemma_b8_printed']:.1e}")
    if not len(df):
        out += [vd.missing(c, c.statement, "no results") for c in list(CLAIMS.values())[:3]]
    else:
        C1 = CLAIMS["T1"]
        out.append(vd.every(C1, [
            vd.holds(C1, _values(df, "lemma_b8_printed", CONSTANT), TOL,
                     what="printed lemma, constant rates (relative residual)"),
            vd.holds(C1, _values(df, "lemma_b8", DECAYED), TOL,
                     what="with the decay's term, decayed rates (relative residual)")],
            what="Lemma B.8 on every round and seed", card=card, protocol=proto))
        miss = _values(df, "lemma_b8_printed", DECAYED)
        if len(miss):
            lines.append(f"T1: under a rate decay the printed lemma misses by up to "
                         f"{np.nanmax(miss):.3g} (relative): the decay's term is needed")
        out.append(vd.holds(CLAIMS["T2"], _values(df, "eq4"), TOL,
                            what="Eq. 4 on every run (relative residual)", card=card,
                            protocol=proto))
        C3 = CLAIMS["T3"]
        out.append(vd.every(C3, [
            vd.holds(C3, _values(df, "vhat_fell"), 0.0, what="largest fall of vhat in a round"),
            vd.holds(C3, _values(df, "v_fell"), 0.0, what="largest coordinate of v^t - v^{t+1}"),
            vd.holds(C3, _values(df, "theta_excess"), 1e-12,
                     what="eps_v max 1/sqrt(v) - 1"),
            vd.holds(C3, _values(df, "m_excess"), 1e-12,
                     what="||m||_inf / max|g| - 1 per participant")],
            what="moment invariants", card=card, protocol=proto))
    n, fixed, broken = audit()
    lines.append(f"T4: {n} FedLADA audit checks (theory/ sources {audit_sources()}): "
                 f"{n - fixed - len(broken)} verify as printed, "
                 f"{fixed} with their recorded correction, {len(broken)} refuted with none"
                 + (": " + "; ".join(broken) if broken else ""))
    out.append(vd.holds(CLAIMS["T4"], [len(broken)], 0,
                        what="audit checks refuted with no correction",
                        protocol="the symbolic audit (theory.fedlada)"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
