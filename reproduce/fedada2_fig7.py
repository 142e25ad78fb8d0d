"""FedAda2 Figure 7: delayed (frozen) client preconditioner updates on GLD-23K, every sweep run
drawn and ranked by its final test loss.

"After updating preconditioners per every local backpropagation step for the first client
epoch, preconditioners are periodically frozen for the next 1 (middle), 3 (bottom) epochs,
respectively, for each communication round" (App. I.2): FedAda2 (zero initialisation, SM3
client preconditioner) with ``freeze_epochs`` 0 / 1 / 3
(:class:`sims.algorithms.fedada2.JointAdaptive`; the paper's delay unit is the local epoch,
spec 6.3), columns the server-client pairs of Figure 6, GLD-23K with 5 local epochs. The top
row is Figure 6's FedAda2 row (sweep (22); its cells are shared with ``fedada2_fig6`` when both
run on the same grid), the delayed rows sweep ``eta_l, eta_s in {1e-4, 1e-3, 1e-2, 1e-1}``,
``tau_l in {1e-3, 1e-1, 1}``, ``tau_s in {1e-5, 1e-3, 1e-1}`` at paper scale (``--full``); the
CPU default sweeps one sub-grid for all three rows.

Claim (spec 5, claim 19; App. I.2): "delaying the computation of the preconditioners does not
significantly degrade the performance". Measured per panel and seed: the best, median and
worst-quarter final test accuracy over the panel's runs; each frozen panel against the same
column's panel without freezing, paired by seed; "does not significantly degrade" is
:func:`reproduce.verdicts.not_below`: the paired difference's 95 % interval above minus half a
point (the FedAda2 entries' one margin, :data:`reproduce.fedada2_common.MARGIN`), for the best
and for the median run.

Stand-in (CPU default): GLD-23K's client structure on a 200-class composite task of
Fashion-MNIST triples (:mod:`reproduce.fedada2_common`).

CPU default (about 10 CPU-minutes, :data:`DEFAULT_COST`): Figure 6's default subset for all
three rows (9 runs a panel: ``eta_l, eta_s in {1e-3, 1e-2, 1e-1}`` at ``tau_l = 1e-1``,
``tau_s = 1e-5``; 2 seeds, 60 rounds; it leaves out the paper's extreme cells, ``premise
absent`` on the card). Committed profile (the ledger's run, :data:`COMMITTED_FLAGS`): Figure 6's
former 36-point grid (``tau_l in {1e-3, 1e-1}``, ``tau_s in {1e-5, 1e-1}``) with App. I.2's
extreme cells added (``eta_l, eta_s in {1e-4, ..., 1e-1}``, ``tau_l in {1e-3, 1e-1, 1}``,
``tau_s in {1e-5, 1e-1}``, 96 runs a panel), which reaches them; its top row shares the
32 points ``tau_l in {1e-1, 1}``, ``tau_s = 1e-5`` with Figure 6's committed grid.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import common
from . import fedada2_common as fc
from . import fedada2_fig6 as fig6
from . import fedada2_ranked as rk
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Figure 7"
TITLE = "Delayed client preconditioner updates (1 and 3 frozen epochs): every sweep run ranked"
DEFAULT_COST = ("361 CPU-s measured with --threads 1 with fedada2_fig6's default FedAda2 row "
                "reused (8 new panels x 9 grid points x 2 seeds x 60 rounds on the 200-class "
                "composite stand-in); about 510 CPU-s from scratch (that row about 150 CPU-s "
                "of fedada2_fig6's run); the committed profile (COMMITTED_FLAGS, the ledger's "
                "run: 96 points a panel) 52 CPU-min measured for its 60 new points a panel with "
                "the 36-point grid's cells reused (36 ms a cell-round), about 85 from scratch")

#: The committed profile (the ledger's run, from 2026-11-29): fedada2_fig6's former 36-point
#: grid (:data:`SWEEP36`) with App. I.2's extreme cells added, the largest sub-grid with them
#: the CPU budget allows (docs/fedada2_results.md's estimates): ``eta_l, eta_s in {1e-4, ...,
#: 1e-1}``, ``tau_l in {1e-3, 1e-1, 1}``, ``tau_s in {1e-5, 1e-1}`` for all three rows, 96
#: runs a panel.
SWEEP36 = {"tau_l": "1e-3,1e-1", "tau_s": "1e-5,1e-1"}
COMMITTED = {"eta_l": "1e-4,1e-3,1e-2,1e-1", "eta_s": "1e-4,1e-3,1e-2,1e-1",
             "tau_l": "1e-3,1e-1,1", "tau_s": "1e-5,1e-1"}
COMMITTED_FLAGS = fig6.as_flags(COMMITTED)

PAPER_DELAYED = {"eta_l": "1e-4,1e-3,1e-2,1e-1", "eta_s": "1e-4,1e-3,1e-2,1e-1",
                 "tau_l": "1e-3,1e-1,1", "tau_s": "1e-5,1e-3,1e-1"}
FREEZES = (0, 1, 3)


@dataclass
class Config(fig6.Config):
    #: the delayed rows' grid at paper scale (``--full``); the default uses the top row's
    delayed_grid: str = "same"          # same | paper

    def scale(self):
        fig6.Config.scale(self)
        if self.full:
            self.delayed_grid = "paper"

    def validate(self):
        fig6.Config.validate(self)
        if self.delayed_grid not in ("same", "paper"):
            raise common.EntryError(f"--delayed-grid must be same or paper, got "
                                    f"{self.delayed_grid!r}")


def panels(cfg) -> list[rk.Panel]:
    top = rk.grid_axes(cfg)
    delayed = top
    if cfg.delayed_grid == "paper":
        delayed = tuple((rk.SYMBOL[k], rk.values(v, k)) for k, v in PAPER_DELAYED.items())
    return [rk.pair_panel("fedada2", s, c, top if f == 0 else delayed, freeze=f)
            for f in FREEZES for s, c in rk.PAIRS]


def runs(cfg):
    return rk.panel_runs(cfg, "gld23k", panels(cfg))


def plot(df, cfg):
    ps = panels(cfg)
    return rk.ranked_plot(df, cfg, ps, len(rk.PAIRS), "fedada2_fig7",
                          f"FedAda2 Fig. 7: {fc.setting_title('gld23k', cfg)}, FedAda2 with "
                          f"the client preconditioner frozen 0 / 1 / 3 epochs after each "
                          f"updated one (rows), {ps[-1].size()} runs a delayed panel "
                          f"({rk.axes_text(ps[-1])}); lighter = lower final test loss")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_fig7",)
CLAIMS = vd.claims(
    vd.Claim("19c", "FedAda2", "delayed client-preconditioner updates (1 or 3 frozen epochs) do "
             "not significantly degrade FedAda2 across a sweep (GLD-23K)", "every",
             "App. I.2, Figure 7; spec 5 claim 19"),
)
PAPER_EXTREMES = {"eta_l": (1e-4, 1e-1), "eta": (1e-4, 1e-1), "eps": (1e-3, 1.0),
                  "tau": (1e-5, 1e-1)}


def check(df, cfg):
    ps = panels(cfg)
    lines, stats = rk.check_preamble(
        sys.modules[__name__], cfg, df, "gld23k", ps,
        f"5 local epochs, {cfg.rounds} rounds, {cfg.seeds} seed(s); top row grid "
        f"{rk.axes_text(ps[0])}, delayed rows {rk.axes_text(ps[-1])}")
    by = {p.key: p for p in ps}
    card = fc.card("gld23k", cfg, rk.per_point(df), points=False).plus(rk.extremes_item(ps[len(rk.PAIRS):], PAPER_EXTREMES))
    c = CLAIMS["19c"]
    parts = [rk.not_degraded(c, stats, by[f"gld23k_fedada2_{s}-{cl}_f{f}"],
                             by[f"gld23k_fedada2_{s}-{cl}"], col)
             for col in ("best", "median") for f in FREEZES[1:] for s, cl in rk.PAIRS]
    return lines + [vd.every(c, parts, what=f"every frozen panel's best and median run not below "
                             f"the same pair without freezing by more than "
                             f"{100 * rk.TOLERANCE:g} points", card=card,
                             protocol=rk.sweep_protocol())]


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
