"""FedAda2 Figures 1-2 and Table 2: the six methods' test accuracy and loss against rounds
(Figure 1), test accuracy against transmitted bits normalised to FedAvg (Figure 2, from the
same runs), and communication and client memory per method (Table 2, measured).

Settings, stand-ins, hyperparameters and statistics: :mod:`reproduce.fedada2_common`
(DP StackOverflow with AdaGrad everywhere, Table 3; CIFAR-100 and GLD-23K ViT-S linear heads
with Adam everywhere except FedAdaGrad, Tables 4-5; each method at its table's best point).

**Figure 1**: per setting, test accuracy (top) and test loss (bottom) against rounds, the seed
mean with its 95 % Student-t interval shaded (paper: 20 seeds).
**Figure 2**: per setting, test accuracy against the cumulative bits sent and received (the
engine's ``bits_up + bits_down``) divided by FedAvg's bits per round, so FedAvg's x is its
round count and direct joint adaptivity's is 1.5x its rounds (spec 1.14).
**Table 2**: per method, communication per participant and round measured twice, from the
runs' bit counts and from the algorithm's own broadcast and messages
(:func:`sims.experiments.footprint.measure_footprint`), and client memory measured as the
model plus the optimizer state the client carries between local steps, beside the paper's
Table 2 (AdaGrad instantiation, in units of ``d``).

Claims (spec 5) printed with measured numbers: 11 (epsilon recorded; the paper's 13.1 at 500
rounds), 12 and 13 (Table 2), 14 (DP StackOverflow ordering), 15 (CIFAR-100), 16 (GLD-23K at
5 epochs: the same ordering as 15), 17 (per bit: Joint w/o precond and FedAda2 before DJA),
and Figure 1's caption remark that on StackOverflow the best-accuracy and best-loss methods
differ. "Faster" is measured as rounds (or normalised bits) to a target accuracy: 0.95 x
the lowest final seed-mean accuracy among the methods compared, so that each of them gets
there on average; comparisons of two methods use the paired seed differences (the same seed
draws the same participants for every method) and their 95 % interval.

CPU default: the three stand-ins, 3 seeds, 200 rounds, evaluated every 5 (cost in
:data:`DEFAULT_COST`). ``--full``: the paper's scale from ``--data-dir`` (real data only),
500 rounds, 20 seeds. ``--tiny``: seconds, for tests.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sims.experiments.footprint import measure_footprint
from sims.privacy import dp_epsilon

from . import common, plotting
from . import fedada2_common as fc
from .plotting import plt

PAPER, TARGET = "FedAda2", "Figures 1-2, Table 2"
TITLE = "six methods: accuracy and loss against rounds and against normalised bits; Table 2"
DEFAULT_COST = ("3 min 44 s measured on one free core with --threads 1 (the StackOverflow "
                "stand-in's 5 methods x 3 seeds x 200 rounds about 3 min, the two image "
                "stand-ins 35 s; 6.5 min when the other core was busy)")

#: The paper's Table 2 (spec 1.14, AdaGrad instantiations), per method:
#: (joint adaptivity, communication, gradient calls, client memory), units of d.
PAPER_TABLE2 = {"fedavg": ("N", "2d", "1", "d"), "fedadagrad": ("N", "2d", "1", "d"),
                "dja": ("Y", "3d", "1", "2d"), "joint-no-precond": ("Y", "2d", "1", "-"),
                "fedada2": ("Y", "2d", "1", "2d"), "fedadam": ("N", "-", "-", "-")}
EQUAL_MARGIN = 0.01           # "FedAda2 ~ DJA": the difference within +-1 accuracy point
PAPER_EPSILON = 13.1          # Sec. 6.1: (13.1, 0.0025) at q = 0.1, sigma = 1, T = 500


@dataclass
class Config(fc.Config):
    pass


def runs(cfg):
    return fc.figure1_runs(cfg)


# ------------------------------------------------------------------------------ bits
def normalised_bits(df: pd.DataFrame, cfg) -> pd.DataFrame:
    """``(run, seed, round, setting, method, bits)``: cumulative bits sent and received up
    to each round divided by FedAvg's bits per round in the same setting (FedAvg's run when
    present, else its 2d per participant)."""
    sub = df[df.metric.isin(["bits_up", "bits_down"])]
    tot = (sub.groupby(["run", "seed", "round", "setting", "method"])["value"].sum()
           .reset_index().rename(columns={"value": "total"}))
    out = []
    for setting, grp in tot.groupby("setting"):
        fedavg = grp[grp.method == "fedavg"]
        if len(fedavg):
            last = fedavg[fedavg["round"] == fedavg["round"].max()]
            per_round = float((last["total"] / last["round"]).mean())
        else:
            prob = fc.problem(setting, cfg)[0]
            per_round = 2 * 32 * prob.d * fc.participants(setting, cfg) / prob.n_clients
        out.append(grp.assign(bits=grp["total"] / per_round))
    return pd.concat(out, ignore_index=True).drop(columns="total")


def with_bits(df, cfg, metric="test_acc") -> pd.DataFrame:
    """``metric`` rows with the normalised bits of their round in column ``bits``."""
    bits = normalised_bits(df, cfg)[["run", "seed", "round", "bits"]]
    return df[df.metric == metric].merge(bits, on=["run", "seed", "round"], how="left")


# ------------------------------------------------------------------------------ plots
def _present(df, s):
    have = set(df.loc[df.setting == s.key, "method"].unique())
    return [m for m in s.methods if m in have]


def plot(df, cfg):
    df = common.healthy(df)
    settings = [s for s in fc.setting_list(cfg) if (df.setting == s.key).any()]
    n = max(1, len(settings))
    fig, axes = plt.subplots(2, n, figsize=(5.2 * n, 7.4), squeeze=False)
    for j, s in enumerate(settings):
        sub = df[df.setting == s.key]
        for i, (metric, ylabel) in enumerate((("test_acc", "test accuracy"),
                                              ("test_loss", "test loss"))):
            ax = axes[i, j]
            fc.ci_plot(ax, sub, metric, _present(df, s))
            ax.set_ylabel(ylabel)
            ax.set_title(f"{fc.setting_title(s.key, cfg)} ({s.adaptivity})", fontsize=9)
            ax.legend(fontsize=7)
            _zoom(ax, sub, metric)
    fig.suptitle("FedAda2 Figure 1: test accuracy (top) and loss (bottom) against rounds; "
                 f"mean and 95 % interval over {cfg.seeds} seed(s)", fontsize=10, y=1.0)
    paths = plotting.save(fig, cfg.figures, "fedada2_fig1")
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 3.9), squeeze=False)
    for j, s in enumerate(settings):
        ax = axes[0, j]
        fc.ci_plot(ax, with_bits(df[df.setting == s.key], cfg), "test_acc", _present(df, s),
                   x="bits")
        ax.set_xlabel("transmitted bits / FedAvg's bits per round")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{fc.setting_title(s.key, cfg)} ({s.adaptivity})", fontsize=9)
        ax.legend(fontsize=7)
        _zoom(ax, df[df.setting == s.key], "test_acc")
    fig.suptitle("FedAda2 Figure 2: test accuracy against communication (bits normalised to "
                 f"FedAvg); mean and 95 % interval over {cfg.seeds} seed(s)", fontsize=10,
                 y=1.02)
    return paths + plotting.save(fig, cfg.figures, "fedada2_fig2")


def _zoom(ax, df, metric):
    """Leave out the first tenth of the rounds when setting the y range (early values of a
    slow method would flatten the others)."""
    late = df[(df.metric == metric) & (df["round"] >= df["round"].max() / 10)]
    vals = late["value"].to_numpy(float)
    vals = vals[np.isfinite(vals)]
    if len(vals):
        pad = 0.05 * (vals.max() - vals.min() + 1e-9)
        ax.set_ylim(vals.min() - pad, vals.max() + pad)


# ------------------------------------------------------------------------------ Table 2
def table2(df, cfg) -> list[str]:
    """Table 2 measured: communication per participant and round (from the runs' bit counts
    and from the hooks' payloads), client memory (model + carried optimizer state), in
    units of d and in floats, beside the paper's Table 2."""
    lines = []
    for s in fc.setting_list(cfg):
        present = [m for m in s.methods if (df.run == fc.run_name(s.key, m)).any()]
        if not present:
            continue
        prob = fc.problem(s.key, cfg)[0]
        d = prob.d
        lines += ["", f"Table 2, {fc.setting_title(s.key, cfg)} ({s.adaptivity}; d = {d:,}; "
                  "communication per participant and round, memory per client; paper: "
                  "AdaGrad instantiation):", "",
                  "| method | joint | comm. from runs | comm. from payloads | grad calls / "
                  "step | client memory | paper comm. | paper grad calls | paper memory |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for m in present:
            comm_run = run_comm(df, s.key, m, cfg) / d
            fp = measure_footprint(fc.algorithm(s.key, m, cfg), prob.layout)
            calls = 1 + int(getattr(fc.algorithm(s.key, m, cfg), "needs_anchor_grad", False))
            state = ", ".join(f"{k} {v:,}" for k, v in fp.state.items() if v)
            paper = PAPER_TABLE2.get(m, ("-",) * 4)
            lines.append(f"| {fc.label(m, True)} | {'Y' if m in JOINT else 'N'} | "
                         f"{comm_run:.3g}d | {fp.communication / d:.3g}d "
                         f"({fp.downlink:,} down + {fp.uplink:,} up) | {calls} | "
                         f"{fp.memory / d:.3g}d ({fp.memory:,} floats"
                         f"{': model + ' + state if state else ': model'}) | {paper[1]} | "
                         f"{paper[2]} | {paper[3]} |")
    return lines


JOINT = ("dja", "joint-no-precond", "fedada2")


def run_comm(df, setting: str, method: str, cfg) -> float:
    """Floats sent and received per participant and round in the run: the engine's
    cumulative ``bits_up + bits_down`` (means over the population) times ``N``, over the
    participants it counted, over 32 bits; mean over seeds."""
    sub = df[df.run == fc.run_name(setting, method)]
    n = fc.problem(setting, cfg)[0].n_clients
    vals = []
    for _, grp in sub.groupby("seed"):
        last = grp["round"].max()
        bits = grp[(grp["round"] == last) & grp.metric.isin(["bits_up", "bits_down"])]
        parts = grp[grp.metric == "participants"]["value"].sum()
        if parts > 0:
            vals.append(bits["value"].sum() * n / parts / 32)
    return float(np.mean(vals)) if vals else math.nan


# ------------------------------------------------------------------------------ checks
def _target(df, setting, methods, metric="test_acc", frac=0.95):
    fin = fc.final_ci(df[df.setting == setting], metric)
    vals = [fin.loc[fc.run_name(setting, m), "mean"] for m in methods
            if fc.run_name(setting, m) in fin.index]
    return frac * min(vals) if vals else math.nan


def _speed(df, setting, methods, target, x="round", cfg=None):
    """Per method: per-seed first ``x`` (``"round"``, or ``"bits"``: normalised bits) at
    which test accuracy is >= ``target`` (inf if never)."""
    sub = df[df.setting == setting]
    acc = with_bits(sub, cfg) if x == "bits" else sub[sub.metric == "test_acc"]
    out = {}
    for m in methods:
        per = {}
        for seed, grp in acc[acc.run == fc.run_name(setting, m)].groupby("seed"):
            hit = grp[grp["value"] >= target]
            per[seed] = float(hit[x].min()) if len(hit) else math.inf
        out[m] = pd.Series(per, dtype=float)
    return out


def _fmt_speed(vals: pd.Series) -> str:
    if not np.isfinite(vals).all():
        return f"never in {int((~np.isfinite(vals)).sum())} of {len(vals)} seeds"
    mean, lo, hi = fc.mean_ci(vals)
    return f"{mean:.0f} [{lo:.0f}, {hi:.0f}]"


def check(df, cfg):
    entry = sys.modules[__name__]
    df, notes = common.usable(entry, cfg, df)
    lines = [f"data: {fc.data_note(cfg)}",
             f"scale: {cfg.seeds} seed(s), {cfg.rounds} rounds, evaluated every "
             f"{cfg.eval_every}; intervals are 95 % Student-t over seeds"] + notes
    have = set(df["run"].unique())
    for s in fc.setting_list(cfg):
        if not any(fc.run_name(s.key, m) in have for m in s.methods):
            continue
        lines += ["", f"== {fc.setting_title(s.key, cfg)} ({s.adaptivity}, "
                      f"{fc.participants(s.key, cfg)} clients a round) =="]
        lines += final_table(df, s)
        if s.key == "stackoverflow":
            lines += claim_epsilon(df, cfg) + claim14(df, s)
        else:
            lines += claim15(df, s)
        lines += claim17(df, s, cfg)
    lines += table2(df, cfg)
    lines += claim12_13(df, cfg)
    if not cfg.full:
        cost = fc.paper_scale_cost(df, cfg.seeds, cfg.rounds)
        lines.append(f"paper scale (20 seeds, 500 rounds) on these problems: about "
                     f"{cost / 3600:.1f} h of one core here, extrapolated from this run's "
                     f"recorded wall times (linear in seeds and rounds)")
    return lines


def final_table(df, s) -> list[str]:
    acc = fc.final_ci(df[df.setting == s.key], "test_acc")
    loss = fc.final_ci(df[df.setting == s.key], "test_loss")
    out = ["final test accuracy / test loss (mean [95 % interval]):"]
    for m in s.methods:
        r = fc.run_name(s.key, m)
        if r in acc.index:
            out.append(f"  {fc.label(m):34s} acc {fc.fmt_ci(acc.loc[r], 100, 2)} %   loss "
                       f"{fc.fmt_ci(loss.loc[r], 1, 4)}")
    return out


def _have(df, s, methods):
    return all((df.run == fc.run_name(s.key, m)).any() for m in methods)


def _cmp(df, s, a, b, metric="test_acc", higher=True) -> tuple[str, str]:
    """``(text, verdict)`` for "a above b" (``higher``) or "a below b" on the final
    ``metric``: the paired seed difference and its interval."""
    mean, lo, hi = fc.paired_final(df, fc.run_name(s.key, a), fc.run_name(s.key, b), metric)
    v = fc.order_verdict(mean, lo, hi, higher)
    scale = 100 if metric == "test_acc" else 1
    unit = " points" if metric == "test_acc" else ""
    return (f"{fc.label(a, True)} - {fc.label(b, True)} = {scale * mean:+.2f}{unit} "
            f"[{scale * lo:+.2f}, {scale * hi:+.2f}]", v)


def claim_epsilon(df, cfg) -> list[str]:
    eps = df[df.metric == "dp_epsilon"]
    if not len(eps):
        return ["claim 11 (DP epsilon recorded): no dp_epsilon in the results -> does not show"]
    last = eps[eps["round"] == eps["round"].max()]
    vals = sorted(set(np.round(last["value"].to_numpy(float), 4)))
    n = fc.problem("stackoverflow", cfg)[0].n_clients
    q = fc.participants("stackoverflow", cfg) / n
    at500, order = dp_epsilon(q, cfg.noise_multiplier, 500, 1.0 / n)
    return [f"claim 11 (user-level DP; epsilon recorded per round by dp-accounting): epsilon "
            f"after {int(eps['round'].max())} rounds = {', '.join(f'{v:g}' for v in vals)} "
            f"(q = {q:g}, sigma = {cfg.noise_multiplier:g}, delta = 1/{n}); at the paper's 500 "
            f"rounds the same accountant gives {at500:.3f} (order {order:g}), paper "
            f"{PAPER_EPSILON} -> {fc.verdict(abs(at500 - PAPER_EPSILON) < 0.05)}"]


def claim14(df, s) -> list[str]:
    out = []
    if _have(df, s, ["joint-no-precond", "dja"]):
        text, v = _cmp(df, s, "joint-no-precond", "dja")
        out.append(f"claim 14a (DP: Joint w/o precond >= DJA in final test accuracy): {text} "
                   f"-> {v}")
    others = [m for m in ("fedavg", "fedadagrad", "dja") if _have(df, s, ["fedada2", m])]
    for m in others:
        text, v = _cmp(df, s, "fedada2", m)
        out.append(f"claim 14b (DP: FedAda2 above {fc.label(m, True)}): {text} -> {v}")
    if _have(df, s, ["joint-no-precond", "fedada2"]):
        text, v = _cmp(df, s, "joint-no-precond", "fedada2")
        out.append(f"claim 14c (DP: FedAda2 slightly below Joint w/o precond): {text} -> {v}")
    acc = fc.final_ci(df[df.setting == s.key], "test_acc")
    loss = fc.final_ci(df[df.setting == s.key], "test_loss")
    if len(acc) >= 2 and len(loss) >= 2:
        best_acc, best_loss = acc["mean"].idxmax(), loss["mean"].idxmin()
        out.append(f"Figure 1 caption (StackOverflow: best-accuracy and best-loss methods "
                   f"differ): best accuracy {_m(best_acc)}, lowest loss {_m(best_loss)} -> "
                   f"{fc.verdict(best_acc != best_loss)}")
    return out


def _m(run: str) -> str:
    return fc.label(run.split("_", 1)[1], True)


def claim15(df, s) -> list[str]:
    num = "15" if s.key == "cifar100" else "16 (5 local epochs)"
    out = []
    for m in ("fedadagrad", "fedadam", "dja", "joint-no-precond", "fedada2"):
        if _have(df, s, [m, "fedavg"]):
            text, v = _cmp(df, s, m, "fedavg")
            out.append(f"claim {num} (adaptive above FedAvg, final accuracy): {text} -> {v}")
    joint = [m for m in JOINT if _have(df, s, [m])]
    if joint and _have(df, s, ["fedadam"]):
        target = _target(df, s.key, joint + ["fedadam"])
        speed = _speed(df, s.key, joint + ["fedadam"], target)
        adam = speed["fedadam"]
        for m in joint:
            mean, lo, hi, v = _fewer(speed[m], adam)
            out.append(f"claim {num} (joint adaptive converges faster than FedAdam: rounds to "
                       f"{100 * target:.1f} % test accuracy): {fc.label(m, True)} "
                       f"{_fmt_speed(speed[m])} vs FedAdam {_fmt_speed(adam)}; difference "
                       f"{mean:+.0f} [{lo:+.0f}, {hi:+.0f}] -> {v}")
    if _have(df, s, ["fedada2", "dja"]):
        mean, lo, hi = fc.paired_final(df, fc.run_name(s.key, "fedada2"),
                                       fc.run_name(s.key, "dja"), "test_acc")
        ok = fc.equivalent(lo, hi, EQUAL_MARGIN)
        out.append(f"claim {num} (FedAda2 ~ DJA in final accuracy: the difference's 95 % "
                   f"interval inside +-{100 * EQUAL_MARGIN:g} point): {100 * mean:+.2f} points "
                   f"[{100 * lo:+.2f}, {100 * hi:+.2f}] -> {fc.verdict(ok)}")
    return out


def _fewer(cost, reference):
    """``(mean, lo, hi, verdict)`` of the per-seed difference ``cost - reference`` (rounds or
    bits to a target; a seed that never reaches it leaves the difference undefined), judged
    as "fewer is better"."""
    d = (cost - reference).to_numpy(float)
    mean, lo, hi = fc.mean_ci(d) if np.isfinite(d).all() else (math.nan,) * 3
    return mean, lo, hi, fc.order_verdict(mean, lo, hi, higher=False)


def claim17(df, s, cfg) -> list[str]:
    compared = [m for m in ("dja", "joint-no-precond", "fedada2") if _have(df, s, [m])]
    if "dja" not in compared or len(compared) < 2:
        return []
    target = _target(df, s.key, compared)
    speed = _speed(df, s.key, compared, target, x="bits", cfg=cfg)
    out = []
    for m in compared[1:]:
        mean, lo, hi, v = _fewer(speed[m], speed["dja"])
        out.append(f"claim 17 (per bit, Figure 2: {fc.label(m, True)} reaches "
                   f"{100 * target:.1f} % with fewer normalised bits than DJA): "
                   f"{_fmt_speed(speed[m])} vs DJA {_fmt_speed(speed['dja'])} FedAvg-rounds; "
                   f"difference {mean:+.0f} [{lo:+.0f}, {hi:+.0f}] -> {v}")
    return out


def claim12_13(df, cfg) -> list[str]:
    out = [""]
    for s in fc.setting_list(cfg):
        if not _have(df, s, ["fedavg", "dja", "fedada2"]):
            continue
        c = {m: run_comm(df, s.key, m, cfg) for m in ("fedavg", "dja", "fedada2")}
        r_dja, r_f2 = c["dja"] / c["fedavg"], c["fedada2"] / c["fedavg"]
        out.append(f"claim 12 ({fc.setting_title(s.key, cfg)}: DJA sends 1.5x FedAvg's bits a "
                   f"round, FedAda2 1x; from the runs): DJA {r_dja:.3f}x, FedAda2 {r_f2:.3f}x "
                   f"-> {fc.verdict(abs(r_dja - 1.5) < 1e-9 and abs(r_f2 - 1) < 1e-9)}")
        prob = fc.problem(s.key, cfg)[0]
        fp = measure_footprint(fc.algorithm(s.key, "fedada2", cfg), prob.layout)
        full = measure_footprint(fc.algorithm(s.key, "joint-no-precond", cfg), prob.layout)
        expect = sum(sum(shape) if len(shape) >= 2 else math.prod(shape)
                     for shape in prob.layout.shapes)
        pre = fp.state.get("mu", 0)
        out.append(f"claim 13 ({fc.setting_title(s.key, cfg)}: the SM3 preconditioner of an "
                   f"m x n layer takes m + n floats, not mn): FedAda2 carries {pre:,} "
                   f"preconditioner floats (rows + columns + biases = {expect:,}) against "
                   f"{full.state.get('mu', 0):,} for the full one (Joint w/o precond); client "
                   f"memory {fp.memory / prob.d:.3f}d vs {full.memory / prob.d:.3f}d -> "
                   f"{fc.verdict(pre == expect and pre < full.state.get('mu', 0))}")
    return out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
