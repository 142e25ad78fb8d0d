"""FedAda2's reference choices, one at a time: which of claim 15's verdicts each one moves.

The FedAda2 entries default to the authors' reference choices (Tables 3-6 were tuned with
them; :data:`reproduce.fedada2_common.REFERENCE`, sources in ``docs/fedada2_results.md``): no
client warm-up on SGD clients, SM3-I, client Adam without bias correction, sample-weighted
aggregation for adaptive servers without DP. This panel turns each one, alone, to its other
value (:data:`FLIPS`) on CIFAR-100 (its stand-in on CPU), reruns only the methods the choice
touches (the others' runs are the default's, shared), and decides claim 15 (15a every
adaptive method above FedAvg, 15b joint adaptivity faster than FedAdam, 15c FedAda2 about
DJA; :func:`reproduce.fedada2_common.ordering_claims`, the definitions :mod:`reproduce.fedada2_fig5`
uses) on each variant. The printed table says, per claim, the label and statistic under the
default and under each flip, and which flips move the label.

The ablation decides no claim of the paper: its verdicts are what-ifs of claim 15, filed as
their own claims R15a-R15c (:data:`CLAIMS`: claim 15's statement under the reference choices,
scoped by the flip, e.g. ``R15c [sm3=sm3-ii]``), and claim 15 itself is
:mod:`reproduce.fedada2_fig5`'s, at its own seeds and horizon (one entry decides each claim).
The regime card is claim 15's; the table also shows the labels the data would give with the
card set aside, marked ``card aside``.

Tuning (``--tuning``): ``paper`` (the default) runs Tables 4-5's points, tuned by the paper on
the real task, so every variant's card fails on the stand-in ("tuned on the task run") and
reads ``premise absent``; ``two-step`` runs every method at its pick of App. H.2's two-step
tuning on the stand-in (:func:`reproduce.fedada2_common.two_step_tuning`), under the reference
choices: the one CIFAR-100 tuning of the FedAda2 entries (``fedada2_fig5``'s at its 150 rounds,
shared: ``--tuning two-step --rounds 150`` reuses its 43 cells). One tuning per table: a flip
is not re-tuned, the methods it touches run at their default pick with the choice flipped
(e.g. FedAda2 at its SM3-I pick with SM3-II; the Adam clients at their picks without bias
correction, with it), which every flipped variant's card states (an information item) and the
check prints.

CPU default: CIFAR-100 stand-in, 3 seeds x 100 rounds (fewer than Figure 5's 5 x 150: a
cheap screen of which choices matter), 6 default runs and 12 flipped ones. The filed run:
``--tuning two-step --rounds 150 --seeds 33`` (cost in :data:`DEFAULT_COST`).
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import pandas as pd

from . import common, plotting
from . import fedada2_common as fc
from . import verdicts as vd
from .fedada2_fig5 import CLAIMS as CLAIMS15
from .plotting import plt

PAPER, TARGET = "FedAda2", "reference-choice ablation (claim 15, CIFAR-100)"
TITLE = "the authors' reference choices turned one at a time: which of claim 15's verdicts move"
DEFAULT_COST = ("191 CPU-s measured with --threads 1 (6 default + 12 flipped runs x 3 seeds "
                "x 100 rounds, CIFAR-100's composite stand-in; 3 min 14 s of wall time); the "
                "filed run, --tuning two-step --rounds 150 --seeds 33: about 145 min of run wall "
                "time on the shared 2 cores, two processes (632 CPU-s at 5 seeds; the "
                "CIFAR-100 tuning's 43 cells fedada2_fig5's, reused)")

SETTING = "cifar100"
#: The choices flipped, each alone: (Config field, its name in the table).
FLIPS = (("sgd_warmup", "warm-up on SGD clients"), ("sm3", "SM3 cover"),
         ("adam_bias_correction", "client Adam bias correction"),
         ("aggregation", "server aggregation"))
IDS = ("15a", "15b", "15c")


@dataclass
class Config(fc.Config):
    settings: str = "cifar100"
    seeds: int = 3
    rounds: int = 100
    tuning: str = "paper"          # paper (Tables 4-5's points) | two-step (App. H.2 here)
    tune_seeds: int = 1            # selection seeds of the two-step tuning

    def validate(self):
        fc.Config.validate(self)
        if fc.items(self.settings) != [SETTING]:
            raise common.EntryError("--settings: the ablation runs on CIFAR-100 only (cifar100)")
        fc.validate_tuning(self)


#: The one CIFAR-100 tuning of the FedAda2 entries (its cells: ``OUT/sweeps/NAME_METHOD-step*``).
TUNING_NAME = fc.TUNING_NAMES["cifar100"]
TUNING_TEXT = ("two-step tuning on the stand-in (App. H.2) under the reference choices; a "
               "flip runs at the default's pick")


def picks(cfg) -> dict:
    """``{method: {key: value}}``: each method's two-step pick under ``cfg``'s (the default's)
    choices with ``--tuning two-step`` (:func:`reproduce.fedada2_common.tuned_picks`), else
    empty (Tables 4-5's points). Every variant runs its methods at these points."""
    return fc.tuned_picks(SETTING, cfg, TUNING_NAME, fc.image_grids(SETTING, cfg))


def flipped(cfg, key: str):
    """``cfg`` with choice ``key`` turned to its other value (:data:`fc.CHOICES`)."""
    other = [v for v in fc.CHOICES[key] if v != getattr(cfg, key)][0]
    return dataclasses.replace(cfg, **{key: other}), other


def variants(cfg) -> list[tuple[str, object]]:
    """``[(label, cfg)]``: the default, then each flip (``"key=value"``)."""
    out = [("default", cfg)]
    for key, _ in FLIPS:
        vcfg, value = flipped(cfg, key)
        out.append((f"{key}={value}", vcfg))
    return out


def touched(cfg, vcfg, method: str) -> bool:
    """Whether ``method``'s run differs between ``cfg`` and ``vcfg`` (its reference overrides
    or its aggregation)."""
    return (fc.reference(SETTING, method, cfg) != fc.reference(SETTING, method, vcfg)
            or fc.aggregation(SETTING, method, cfg) != fc.aggregation(SETTING, method, vcfg))


def run_name(variant: str, method: str) -> str:
    return fc.run_name(SETTING, method) if variant == "default" else \
        f"{variant}_{fc.run_name(SETTING, method)}"


def runs(cfg):
    fc.load_problems(cfg)
    methods = fc.SETTINGS[SETTING].methods
    chosen = picks(cfg)
    out = []
    for variant, vcfg in variants(cfg):
        for m in methods:
            if variant != "default" and not touched(cfg, vcfg, m):
                continue
            r = fc.method_run(vcfg, SETTING, m, **chosen[m])
            r.name = run_name(variant, m)
            r.params = {**r.params, "variant": variant}
            if fc.tuned_here(SETTING, cfg):
                r.extra = {**r.extra, "tuning": TUNING_TEXT, "picked": chosen[m]}
            out.append(r)
    return out


def flip_item(cfg, variant: str):
    """The card's information item of a flipped variant under ``--tuning two-step``: its
    methods run at the default's picks with the choice flipped (one tuning per table), not
    re-tuned under the flip; None for the default or the table's points."""
    if variant == "default" or not fc.tuned_here(SETTING, cfg):
        return None
    from . import regime as rg
    return rg.value("points tuned under this variant's choices",
                    "no: the default's picks, choice flipped", "(an ablation)", rg.info(),
                    "one tuning per table: the reference choices' (App. H.2 on the stand-in)")


def variant_frame(df: pd.DataFrame, cfg, variant: str) -> pd.DataFrame:
    """The default runs with the methods ``variant`` touches replaced by its runs, under the
    default names (what claim 15's check reads)."""
    if variant == "default":
        return df[df.run.isin([run_name("default", m) for m in fc.SETTINGS[SETTING].methods])]
    parts = []
    for m in fc.SETTINGS[SETTING].methods:
        mine = df[df.run == run_name(variant, m)]
        if len(mine):
            parts.append(mine.assign(run=run_name("default", m)))
        else:
            parts.append(df[df.run == run_name("default", m)])
    return pd.concat(parts, ignore_index=True)


def claim_verdicts(df, cfg, variant: str, vcfg, *, card_aside: bool = False) -> list:
    """Claim 15's verdicts on ``variant``'s runs (scoped by the variant), as this entry's
    claims R15a-R15c (:data:`CLAIMS`)."""
    sub = variant_frame(df, cfg, variant)
    name = lambda m: fc.run_name(SETTING, m)  # noqa: E731
    mine = {cid: CLAIMS["R" + cid] for cid in IDS}
    extra = tuple(i for i in (flip_item(cfg, variant),) if i is not None)
    if not card_aside:
        got = fc.ordering_claims(mine, IDS, sub, name, vcfg, SETTING, scope=variant,
                                 card_items=extra)
    else:
        from .regime import RegimeCard
        real = fc.card
        try:
            fc.card = lambda *a, **k: RegimeCard([])
            got = fc.ordering_claims(mine, IDS, sub, name, vcfg, SETTING, scope=variant)
        finally:
            fc.card = real
    return got


def _short(v) -> str:
    stat = v.statistic()
    return v.label + (f" ({stat})" if stat and v.definition != "every" else "")


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    tuned = fc.tuned_here(SETTING, cfg)
    points = ("each method at its two-step pick on the stand-in (App. H.2, the reference "
              "choices)" if tuned else "Tables 4-5's points")
    lines = [f"setting: {fc.data_note(cfg)}; m = {fc.participants(SETTING, cfg)} clients a "
             f"round, {cfg.rounds} rounds, {cfg.seeds} seeds, {points}; each "
             "choice flipped alone, the untouched methods' runs shared with the default"] + notes
    lines += fc.tuning_lines(SETTING, cfg, TUNING_NAME, entry=sys.modules[__name__])
    if tuned:
        lines.append("one tuning per table: a flip is not re-tuned; the methods it touches run "
                     "at their default pick with the choice flipped (each flipped variant's "
                     "card says so)")
    if fc.is_standin(SETTING, cfg):
        lines.append("STAND-IN: every number below is on CIFAR-100's stand-in, not the "
                     "paper's data")
    have = set(df.run.unique())
    out, table = [], {}
    for variant, vcfg in variants(cfg):
        mine = {run_name(variant, m) for m in fc.SETTINGS[SETTING].methods
                if variant == "default" or touched(cfg, vcfg, m)}
        if not mine <= have:
            lines.append(f"{variant}: runs missing ({', '.join(sorted(mine - have))})")
            continue
        got = claim_verdicts(df, cfg, variant, vcfg)
        aside = claim_verdicts(df, cfg, variant, vcfg, card_aside=True)
        touched_m = [fc.label(m, True) for m in fc.SETTINGS[SETTING].methods
                     if variant != "default" and touched(cfg, vcfg, m)]
        table[variant] = ({v.claim[1:]: v for v in got}, {v.claim[1:]: v for v in aside},
                          touched_m)
        out += got
    if "default" in table:
        lines.append("claim 15 on each variant (label with the card; with the card set aside; "
                     "'MOVES' where a flip changes the card-aside label from the default's):")
        base = table["default"][1]
        for variant, (with_card, aside, tm) in table.items():
            who = f" (reruns {', '.join(tm)})" if tm else ""
            lines.append(f"  {variant}{who}:")
            for cid in IDS:
                if cid not in aside:
                    continue
                moved = (variant != "default" and cid in base
                         and aside[cid].label != base[cid].label)
                lines.append(f"    {cid}: {with_card[cid].label}; card aside: "
                             f"{_short(aside[cid])}" + ("  MOVES" if moved else ""))
                for p in aside[cid].parts:
                    lines.append(f"        {p.what}: {p.label} ({p.statistic()})")
    return lines + out


def plot(df, cfg):
    """Final test accuracy of each method under each variant (mean and 95 % seed interval)."""
    df = common.healthy(df)
    methods = fc.SETTINGS[SETTING].methods
    vs = [v for v, _ in variants(cfg)]
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / len(vs)
    for i, variant in enumerate(vs):
        sub = variant_frame(df, cfg, variant)
        stats = fc.final_ci(sub, "test_acc") if len(sub) else pd.DataFrame()
        for j, m in enumerate(methods):
            r = fc.run_name(SETTING, m)
            if r not in stats.index:
                continue
            row = stats.loc[r]
            x = j + (i - (len(vs) - 1) / 2) * width
            ax.errorbar(x, 100 * row["mean"], yerr=[[100 * (row["mean"] - row["lo"])],
                                                    [100 * (row["hi"] - row["mean"])]],
                        color=f"C{i}", marker="o", ms=4, lw=1.2, capsize=2,
                        label=variant if j == 0 else None)
    ax.set_xticks(range(len(methods)))
    ax.set_xticklabels([fc.label(m, True) for m in methods])
    ax.set_ylabel(f"final test accuracy at round {cfg.rounds} (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=len(vs))
    points = ("points two-step tuned on the stand-in under the default, flips not re-tuned"
              if fc.tuned_here(SETTING, cfg) else "Tables 4-5's points")
    ax.set_title(f"FedAda2 reference choices, each flipped alone: "
                 f"{fc.setting_title(SETTING, cfg)}, {cfg.seeds} seeds x {cfg.rounds} rounds, "
                 f"{points} (default = the authors' choices)", fontsize=9)
    return plotting.save(fig, cfg.figures, "fedada2_choices")


FIGURES = ("fedada2_choices",)
#: This entry's claims: claim 15's parts under each reference choice (the what-ifs; claim 15
#: itself is fedada2_fig5's).
CLAIMS = vd.claims(*(
    vd.Claim("R" + cid, "FedAda2", f"reference-choice ablation: {CLAIMS15[cid].statement}, "
             "under each of the authors' reference choices flipped alone",
             CLAIMS15[cid].definition, "the authors' code (docs/fedada2_results.md); "
             + CLAIMS15[cid].source) for cid in IDS))


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
