"""FedAda2 Figure 6: heterogeneous server-client optimizer pairs on GLD-23K, every sweep run
drawn and ranked by its final test loss.

Rows: Direct Joint Adap. (green; the server preconditioner is sent and used as the client's
initial one, also when the optimizers differ: a server Adam ``v`` becomes a client AdaGrad
accumulator, the authors' raw copy, spec 6.4), Joint Adap. w/o Precond. Commu. (magenta; zero
initialisation), FedAda2 (red; zero initialisation and SM3). Columns: the server-client pairs
AdaGrad-AdaGrad, AdaGrad-Adam, Adam-AdaGrad, Adam-Adam ("title ordering indicates server- and
client-side optimizers"). Each panel is the sweep (22) of App. I.1: ``eta_l, eta_s in {1e-4,
1e-3, 1e-2, 1e-1}``, ``tau_l, tau_s in {1e-7, 1e-5, 1e-3, 1e-1, 1}`` (400 runs a panel; the
CPU default sweeps a sub-grid, ``--full`` the paper's), GLD-23K with 5 local epochs, one
curve per run (mean over seeds), lighter = lower final test loss.

Claim (spec 5, claim 19; App. I.1): unbalanced (heterogeneous) preconditioners "do not
significantly impact performance across a sweep", and DJA with mismatched optimizers still
performs well. Measured per panel and seed: the best run's, the median run's and the worst
quarter's final test accuracy; a heterogeneous pair is compared with the same row's
homogeneous pair of the same client optimizer, paired by seed. "Does not significantly
degrade" is :func:`reproduce.verdicts.not_below`: the paired difference's 95 % interval above
minus half a point (:data:`reproduce.fedada2_ranked.TOLERANCE`, the FedAda2 entries' one margin
:data:`reproduce.fedada2_common.MARGIN`), for the best and for the median run.

Stand-in (CPU default): GLD-23K's client structure on a 200-class composite task of
Fashion-MNIST triples (:mod:`reproduce.fedada2_common`).

CPU default (about 10 CPU-minutes, :data:`DEFAULT_COST`): a documented slice, 9 runs a panel,
``eta_l, eta_s in {1e-3, 1e-2, 1e-1}`` at ``tau_l = 1e-1``, ``tau_s = 1e-5`` (the slice holding
most panels' best run in the former 36-point sweep), 2 seeds, 60 rounds. It leaves out the
paper's extreme cells (the card's "grid reaches the paper's extreme cells" item fails:
``premise absent``). Committed profile (the ledger's run, :data:`COMMITTED_FLAGS`): ``eta_l in
{1e-4, 1e-1}``, ``eta_s in {1e-4, ..., 1e-1}``, ``tau_l in {1e-7, 1e-1, 1}``, ``tau_s in {1e-7,
1e-5, 1}``, 72 runs a panel, 3 seeds: every axis's smallest and largest value of sweep (22) and the
values holding the best runs of the former 36-point sweep, the largest sub-grid with the
extreme cells the CPU budget allowed (docs/fedada2_results.md). The two share the cells where
they overlap (keyed by the point: the default's 3 at ``eta_l = 1e-1``). ``--full`` sweeps the
paper's grid.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import common
from . import fedada2_common as fc
from . import fedada2_ranked as rk
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Figure 6"
TITLE = "Heterogeneous server-client optimizer pairs on GLD-23K: every sweep run ranked"
DEFAULT_COST = ("531 CPU-s measured with --threads 1 from scratch (12 panels x 9 grid points x "
                "2 seeds x 60 rounds, batched, on the 200-class composite stand-in; 12 min of "
                "wall time on two cores shared with other jobs); the committed profile "
                "(COMMITTED_FLAGS, the ledger's run: 72 points a panel, 3 seeds) about 3 CPU-h "
                "from scratch (4.2 s a cell, 70 ms a cell-round, on two Ray workers)")

#: The committed profile (the ledger's run, from 2026-11-30): every axis's extremes of sweep
#: (22) with the server rates and taus that hold the best runs of the former 36-point sweep
#: (eta_s in {1e-3, 1e-2, 1e-1}, tau_l = 0.1, tau_s = 1e-5; its best runs are at eta_l = 0.1
#: in 11 of 12 panels), 72 runs a panel, 3 seeds x 60 rounds; ``eta_l in {1e-3, 1e-2}`` are
#: left out for time (one panel's best run, DJA AdaGrad-Adam's at 1e-2, 0.1 points above its
#: best at 0.1).
COMMITTED = {"eta_l": "1e-4,1e-1", "eta_s": "1e-4,1e-3,1e-2,1e-1",
             "tau_l": "1e-7,1e-1,1", "tau_s": "1e-7,1e-5,1", "seeds": "3"}


def as_flags(values: dict) -> str:
    """``{"tau_l": "1e-3,1e-1"}`` as the command line's ``--tau-l 1e-3,1e-1``."""
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items())


COMMITTED_FLAGS = as_flags(COMMITTED)

PAPER_GRID = {"eta_l": "1e-4,1e-3,1e-2,1e-1", "eta_s": "1e-4,1e-3,1e-2,1e-1",
              "tau_l": "1e-7,1e-5,1e-3,1e-1,1", "tau_s": "1e-7,1e-5,1e-3,1e-1,1"}


@dataclass
class Config(rk.Config):
    settings: str = "gld23k"
    seeds: int = 2
    rounds: int = 60
    eval_every: int = 5
    # the CPU default's subset (module docstring); COMMITTED_FLAGS add the extreme cells
    eta_l: str = "1e-3,1e-2,1e-1"
    eta_s: str = "1e-3,1e-2,1e-1"
    tau_l: str = "1e-1"
    tau_s: str = "1e-5"

    def scale(self):
        rk.Config.scale(self)
        if self.full:
            self.seeds, self.rounds = 1, 500      # "fixed client subsampling seed"
            for k, v in PAPER_GRID.items():
                setattr(self, k, v)
        if self.tiny:
            self.eta_l, self.eta_s, self.tau_l, self.tau_s = "1e-2,1e-1", "1e-2", "1e-1", "1e-5"

    def validate(self):
        rk.Config.validate(self)
        if fc.items(self.settings) != ["gld23k"]:
            raise common.EntryError("--settings: Figure 6 is GLD-23K only (gld23k)")
        rk.grid_axes(self)


def panels(cfg) -> list[rk.Panel]:
    axes = rk.grid_axes(cfg)
    return [rk.pair_panel(v, s, c, axes) for v in rk.VARIANTS for s, c in rk.PAIRS]


def runs(cfg):
    return rk.panel_runs(cfg, "gld23k", panels(cfg))


def plot(df, cfg):
    ps = panels(cfg)
    return rk.ranked_plot(df, cfg, ps, len(rk.PAIRS), "fedada2_fig6",
                          f"FedAda2 Fig. 6: {fc.setting_title('gld23k', cfg)}, 5 local epochs, "
                          f"{ps[0].size()} runs a panel ({rk.axes_text(ps[0])}); lighter = "
                          "lower final test loss")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_fig6",)
CLAIMS = vd.claims(
    vd.Claim("19a", "FedAda2", "heterogeneous server-client optimizer pairs do not significantly "
             "degrade performance across a sweep (GLD-23K)", "every",
             "App. I.1, Figure 6; spec 5 claim 19"),
    vd.Claim("19b", "FedAda2", "DJA with mismatched optimizers performs considerably well",
             "every", "App. I.1, Figure 6"),
)
PAPER_EXTREMES = {"eta_l": (1e-4, 1e-1), "eta": (1e-4, 1e-1), "eps": (1e-7, 1.0),
                  "tau": (1e-7, 1.0)}
CLOSE = 0.05        # 19b's "considerably well": within 5 points of the best panel


def check(df, cfg):
    ps = panels(cfg)
    lines, stats = rk.check_preamble(
        sys.modules[__name__], cfg, df, "gld23k", ps,
        f"{cfg.rounds} rounds, {cfg.seeds} seed(s); grid per panel: {rk.axes_text(ps[0])} "
        f"({ps[0].size()} runs)")
    by = {p.key: p for p in ps}
    card = fc.card("gld23k", cfg, rk.per_point(df), points=False).plus(rk.extremes_item(ps, PAPER_EXTREMES))
    proto = rk.sweep_protocol()
    C = CLAIMS
    parts = [rk.not_degraded(C["19a"], stats, by[f"gld23k_{v}_{s}-{c}"],
                             by[f"gld23k_{v}_{c}-{c}"], col)
             for col in ("best", "median") for v in rk.VARIANTS for s, c in rk.PAIRS if s != c]
    out = [vd.every(C["19a"], parts, what=f"each heterogeneous pair's best and median run not "
                    f"below the homogeneous pair's by more than {100 * rk.TOLERANCE:g} points",
                    card=card, protocol=proto)]
    best = {p.key: rk.panel_seeds(stats, p.key, "best") for p in ps}
    means = {k: v.mean() for k, v in best.items() if len(v)}
    if means:
        top = max(means, key=means.get)
        dja_het = [by[f"gld23k_dja_{s}-{c}"] for s, c in rk.PAIRS if s != c]
        out.append(vd.every(C["19b"], [
            vd.not_below(C["19b"], best[p.key], best[top], CLOSE, unit="pp", scale=100,
                         what=f"{p.title} - best panel ({by[top].title}), best run")
            for p in dja_het], what=f"DJA's mismatched pairs within {100 * CLOSE:g} points of "
            "the best panel", card=card, protocol=proto))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
