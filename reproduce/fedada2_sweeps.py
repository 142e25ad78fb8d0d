"""FedAda2 Figure 3 (bottom): every run of the DP StackOverflow sweeps, ranked by final test
loss.

Five panels, FedAvg, FedAdaGrad, Direct Joint Adap., Joint Adap. w/o Precond. Commu., FedAda2
(AdaGrad everywhere, spec 4.1), each the App. H.1 sweep under user-level DP (noise multiplier
1, the clip ``c`` swept): ``c in {0.1, 0.5, 1}``, ``eta_l, eta_s in {0.001, 0.01, 0.1, 0.5,
1}``, ``tau_l, tau_s in {1e-7, 1e-5, 1e-3}`` (FedAvg: ``eta_l`` also ``5 .. 160``; irrelevant
terms dropped for single adaptivity), 400 clients, 40 a round, "with fixed client subsampling
random seed" (``--full``: the paper's grid, one seed, 500 rounds). Every run's test-accuracy
curve is drawn, lighter = lower final test loss.

Claim (spec 5, claim 18; Sec. 6.2 "Sensitivity to Hyperparameters"): server-only adaptivity
stabilises FedAvg, DJA stabilises further; zero initialisation without transmission (Joint w/o
precond) widens the spread of the worst runs relative to DJA but keeps the best; SM3
(FedAda2) narrows it again. Measured per panel and seed over the panel's runs: the worst
quarter's mean final test accuracy (a diverged run counts 0), the median and the best run;
comparisons paired by seed with 95 % intervals (:mod:`reproduce.fedada2_ranked`).

Stand-in (CPU default): the DP text stand-in of :mod:`reproduce.fedada2_dp` (the multi-label
linear model on a synthetic sparse bag-of-words task, 5,000 words x 63 tags, 10 of 100 clients
a round: the paper's DP noise per round relative to the clip), the same DP mechanism
(:mod:`reproduce.fedada2_common`); a sub-grid, 2 seeds and 40 rounds, so the regime card's
horizon item (40 of the paper's 500 rounds) fails: the sweep's picture, not a decision.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import common
from . import fedada2_common as fc
from . import fedada2_ranked as rk
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Figure 3 (bottom)"
TITLE = "DP StackOverflow sweeps: every run ranked by final test loss"
DEFAULT_COST = ("564 CPU-s measured with --threads 1 (66 DP runs in 5 panels x 2 seeds x 40 "
                "rounds, DP StackOverflow text stand-in; 18 min of wall time on two shared cores)")

PAPER_GRID = {"clip": "0.1,0.5,1", "eta_l": "0.001,0.01,0.1,0.5,1",
              "eta_s": "0.001,0.01,0.1,0.5,1", "tau_l": "1e-7,1e-5,1e-3",
              "tau_s": "1e-7,1e-5,1e-3", "fedavg_eta_l": "0.001,0.01,0.1,0.5,1,5,20,40,80,160"}
PANELS = (("fedavg", "fedavg"), ("fedadagrad", "fedadagrad"), ("dja", "dja"),
          ("joint-no-precond", "joint-adaptive"), ("fedada2", "fedada2"))


@dataclass
class Config(rk.Config):
    settings: str = "stackoverflow"
    seeds: int = 2
    rounds: int = 40
    eval_every: int = 4
    clip: str = "0.1,1"
    eta_l: str = "0.1,1"
    eta_s: str = "0.1,1"
    tau_l: str = "1e-7,1e-3"      # the grid's ends: a zero-initialised client with eps 1e-7
    tau_s: str = "1e-3"           # takes sign-like first steps (where zero init destabilises)
    fedavg_eta_l: str = "0.1,1,5,20,80"

    def scale(self):
        rk.Config.scale(self)
        if self.full:
            self.seeds, self.rounds = 1, 500
            for k, v in PAPER_GRID.items():
                setattr(self, k, v)
        if self.tiny:
            self.clip, self.eta_l, self.eta_s, self.fedavg_eta_l = "1", "0.1,1", "1", "1,20"
            self.tau_l = "1e-3"

    def validate(self):
        rk.Config.validate(self)
        if fc.items(self.settings) != ["stackoverflow"]:
            raise common.EntryError("--settings: Figure 3 (bottom) is DP StackOverflow only "
                                    "(stackoverflow)")
        panels(self)


def panels(cfg) -> list[rk.Panel]:
    v = {k: rk.values(getattr(cfg, k), k) for k in ("clip", "eta_l", "eta_s", "tau_l",
                                                      "tau_s", "fedavg_eta_l")}
    keys = {"fedavg": (("eta_l", v["fedavg_eta_l"]),),
            "fedadagrad": (("eta_l", v["eta_l"]), ("eta", v["eta_s"]), ("tau", v["tau_s"]))}
    joint = (("eta_l", v["eta_l"]), ("eta", v["eta_s"]), ("eps", v["tau_l"]),
             ("tau", v["tau_s"]))
    return [rk.Panel(f"so_{m}", fc.label(m), fc.COLORS[m], alg, {}, keys.get(m, joint),
                     v["clip"]) for m, alg in PANELS]


def runs(cfg):
    return rk.panel_runs(cfg, "stackoverflow", panels(cfg))


def plot(df, cfg):
    ps = panels(cfg)
    return rk.ranked_plot(df, cfg, ps, len(ps), "fedada2_fig3_bottom",
                          f"FedAda2 Fig. 3 (bottom): {fc.setting_title('stackoverflow', cfg)}, "
                          f"DP sigma = {cfg.noise_multiplier:g}, every sweep run "
                          f"({rk.axes_text(ps[-1])}); lighter = lower final test loss")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_fig3_bottom",)
CLAIMS = vd.claims(
    vd.Claim("18a", "FedAda2", "DP StackOverflow sweeps: server-only adaptivity stabilises "
             "FedAvg's worst runs, direct joint adaptivity further", "ordering",
             "Figure 3 bottom, Sec. 6.1"),
    vd.Claim("18b", "FedAda2", "zero-initialised client preconditioners widen the spread of the "
             "worst-case runs relative to DJA; SM3 narrows it again", "every",
             "Figure 3 bottom; spec 5 claim 18"),
    vd.Claim("18c", "FedAda2", "zero initialisation keeps the best runs (\"did not underperform "
             "direct joint adaptivity after optimal tuning\")", "above", "Sec. 6.1"),
)
PAPER_EXTREMES = {"clip": (0.1, 1.0), "eta_l": (1e-3, 1.0), "eta": (1e-3, 1.0),
                  "eps": (1e-7, 1e-3), "tau": (1e-7, 1e-3)}


def check(df, cfg):
    ps = panels(cfg)
    lines, stats = rk.check_preamble(
        sys.modules[__name__], cfg, df, "stackoverflow", ps,
        f"DP sigma = {cfg.noise_multiplier:g}, {cfg.rounds} rounds, {cfg.seeds} seed(s); "
        "grids: " + "; ".join(f"{p.title}: {rk.axes_text(p)}" for p in ps))
    seeds = lambda m, col="worst_q": rk.panel_seeds(stats, f"so_{m}", col)  # noqa: E731
    card = fc.card("stackoverflow", cfg, points=False).plus(
        rk.extremes_item([p for p in ps if p.key != "so_fedavg"], PAPER_EXTREMES))
    proto = rk.sweep_protocol()
    kw = dict(unit="pp", scale=100, margin=fc.MARGIN)
    C = CLAIMS
    out = [vd.ordering(C["18a"], [(fc.label(m, True), seeds(m))
                                  for m in ("dja", "fedadagrad", "fedavg")],
                       what="worst-quarter final accuracy DJA > FedAdaGrad > FedAvg", card=card,
                       protocol=proto, **kw),
           vd.every(C["18b"], [
               vd.above(C["18b"], seeds("dja"), seeds("joint-no-precond"),
                        what="DJA - Joint w/o precond, worst quarter (zero init widens)", **kw),
               vd.above(C["18b"], seeds("fedada2"), seeds("joint-no-precond"),
                        what="FedAda2 - Joint w/o precond, worst quarter (SM3 narrows)", **kw)],
               what="zero init widens the worst runs' spread, SM3 narrows it", card=card,
               protocol=proto),
           vd.not_below(C["18c"], seeds("joint-no-precond", "best"), seeds("dja", "best"),
                        rk.TOLERANCE, unit="pp", scale=100, card=card, protocol=proto,
                        what="Joint w/o precond - DJA, best run (not below by more than "
                             f"{100 * rk.TOLERANCE:g} points)")]
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
