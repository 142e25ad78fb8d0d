"""FedLADA's FedAdam: which readings of its epsilon and initial second moment make it adaptive.

The paper gives FedAdam "the initial second-order momenta term as 1e-2" (Sec. 4.1) and no
epsilon; the first author's FL-Simulator adds ``epsilon = 0.01`` to ``sqrt(v)`` (spec 1.2
[ext]). Server Adam (FedLADA Alg. 1, Reddi et al.) steps ``x <- x - eta_g m / (sqrt(v) + eps)``
with ``v = b2 v + (1 - b2) U^2`` from ``v_0``: while the pseudo-gradient's squares stay far
below the decayed initial moment ``v_0 b2^t``, ``sqrt(v)`` is the same on every coordinate and
FedAdam is server-momentum FedAvg at the rate ``eta_g / (sqrt(v_0 b2^t) + eps)``; where
``eps`` dominates ``sqrt(v)`` it is the same at ``eta_g / eps``.

This ablation runs FedAdam at ``eps`` in {0.1, 0.01, 1e-3} with the paper's ``v_0 = 1e-2``
(and Reddi's reading ``v_0 = eps^2`` at 0.01 and 1e-3), FedAvg beside them, in Figure 2's
stand-in (:mod:`reproduce.fedlada_common`), and records every evaluation the server's
``sqrt(v)`` (5th, 50th, 95th percentile over coordinates) and the spread of the per-coordinate
step ``1 / (sqrt(v) + eps)`` (95th over 5th percentile). A reading is **adaptive** at the
horizon when that step spread is at least :data:`ADAPTIVE_SPREAD` (mean over seeds); the
median ``sqrt(v)`` against the decayed initial value ``sqrt(v_0 b2^T)`` says whether the
gradients moved ``v`` at all. It decides no claim of the paper; E3, Fig. 1's FedAdam half and
E9 rest on the reading it selects (``--fedadam-eps`` on every FedLADA entry).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
import torch

from . import common, plotting
from . import fedlada_common as fc
from . import fedlada_cost as fcost
from .plotting import plt, sns

PAPER, TARGET = "FedLADA", "FedAdam epsilon / initial moment ablation"
TITLE = "FedAdam at eps 0.1 / 0.01 / 1e-3: is the server preconditioner adaptive?"
DEFAULT_COST = ("2-4 min with --threads 1 (FedAvg and 5 FedAdam readings x 2 seeds x 100 "
                "rounds, 784-50-10 MLP on Fashion-MNIST; 2.4 min measured, 120 s of CPU)")

#: The per-coordinate step ``1 / (sqrt(v) + eps)`` varies by at least this factor between the
#: 5th and 95th percentile of the coordinates: the preconditioner is adaptive.
ADAPTIVE_SPREAD = 2.0
#: ``(eps, v0)`` readings; ``v0 = None`` is Reddi et al.'s ``v0 = eps^2``.
READINGS = ((0.1, 1e-2), (0.01, 1e-2), (1e-3, 1e-2), (0.01, None), (1e-3, None))
BETA2 = 0.99

#: An ablation of one setting's readings: it checks no claim of the paper.
CLAIMS: dict = {}
#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlada_fedadam",)


@dataclass
class Config(fc.StandIn):
    rounds: int = 100
    paper_lr: bool = True            # FedAdam's rates are the paper's on the stand-in too

    def scale(self):
        fc.StandIn.scale(self)


def run_name(eps: float, v0: float | None) -> str:
    return f"fedadam eps={eps:g} v0={'eps^2' if v0 is None else f'{v0:g}'}"


class ServerMoment:
    """Engine observer: percentiles over coordinates of the server's ``sqrt(v)`` and the
    spread (95th / 5th percentile) of the step ``1 / (sqrt(v) + eps)``, per replica."""
    at_start = True

    def __init__(self, every: int, eps: float):
        self.every, self.eps = max(1, int(every)), float(eps)

    def __call__(self, view) -> dict:
        root = view.server["opt"]["v"].double().clamp_min(0).sqrt()
        q = torch.quantile(root, torch.tensor([0.05, 0.5, 0.95], dtype=root.dtype), dim=1)
        step = 1.0 / (root + self.eps)
        sq = torch.quantile(step, torch.tensor([0.05, 0.95], dtype=root.dtype), dim=1)
        return {"sqrtv_p05": q[0], "sqrtv_p50": q[1], "sqrtv_p95": q[2],
                "step_spread": sq[1] / sq[0]}


def runs(cfg):
    out = []

    def build_avg():
        return fc.problem(cfg), fc.algorithm("fedavg", cfg), fc.participation(cfg)
    out.append(fc.engine_run("fedavg", {"method": "fedavg", **fc.hyper("fedavg", cfg)},
                             build_avg, cfg.rounds, cfg.eval_every))
    for eps, v0 in READINGS:
        v = eps * eps if v0 is None else v0

        def build(eps=eps, v=v):
            return (fc.problem(cfg), fc.algorithm("fedadam", cfg, tau=eps, v0=v),
                    fc.participation(cfg))
        out.append(fc.engine_run(run_name(eps, v0),
                                 {"method": "fedadam", **fc.hyper("fedadam", cfg, tau=eps, v0=v)},
                                 build, cfg.rounds, cfg.eval_every,
                                 observers=[ServerMoment(cfg.eval_every, eps)]))
    return out


def readings(df) -> list[dict]:
    """Per FedAdam reading at the last evaluation (mean over seeds): ``sqrt(v)`` percentiles,
    the decayed initial value ``sqrt(v0 b2^T)``, the step spread, the label, and the final
    test accuracy and training loss; FedAvg's accuracy and loss as ``fedavg_*``."""
    last = df[df["round"] == df.groupby(["run", "seed"])["round"].transform("max")]
    val = last.groupby(["run", "metric"])["value"].mean()
    T = int(df["round"].max())
    rows = []
    for eps, v0 in READINGS:
        name = run_name(eps, v0)
        if (name, "step_spread") not in val.index:
            continue
        v = eps * eps if v0 is None else v0
        spread = float(val[name, "step_spread"])
        rows.append({"run": name, "eps": eps, "v0": v, "T": T,
                     "sqrtv_p05": float(val[name, "sqrtv_p05"]),
                     "sqrtv_p50": float(val[name, "sqrtv_p50"]),
                     "sqrtv_p95": float(val[name, "sqrtv_p95"]),
                     "decayed_init": math.sqrt(v * BETA2 ** T), "step_spread": spread,
                     "adaptive": bool(spread >= ADAPTIVE_SPREAD),
                     "test_acc": float(val[name, "test_acc"]),
                     "train_loss": float(val[name, "train_loss"])})
    if ("fedavg", "test_acc") in val.index:
        for r in rows:
            r["fedavg_test_acc"] = float(val["fedavg", "test_acc"])
            r["fedavg_train_loss"] = float(val["fedavg", "train_loss"])
    return rows


def plot(df, cfg):
    df = common.healthy(df)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    names = [run_name(e, v) for e, v in READINGS if run_name(e, v) in set(df.run)]
    colors = sns.color_palette("viridis", len(names))
    for name, color in zip(names, colors):
        sub = df[df.run == name]
        for metric, ls in (("sqrtv_p50", "-"), ("sqrtv_p95", ":"), ("sqrtv_p05", "--")):
            g = sub[sub.metric == metric].groupby("round")["value"].mean()
            axes[0].plot(g.index, g.values, ls, color=color,
                         label=name if metric == "sqrtv_p50" else None)
        g = sub[sub.metric == "step_spread"].groupby("round")["value"].mean()
        axes[1].plot(g.index, g.values, color=color, label=name)
    rounds = np.arange(0, int(df["round"].max()) + 1)
    axes[0].plot(rounds, np.sqrt(1e-2 * BETA2 ** rounds), "k-", lw=0.8, alpha=0.6,
                 label="sqrt(1e-2 b2^t) (decayed v0)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("server sqrt(v): median (-), 5th (--), 95th (:) pct")
    axes[1].axhline(ADAPTIVE_SPREAD, color="k", lw=0.8, ls="--", label="adaptive threshold")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("step 1/(sqrt(v)+eps): 95th / 5th pct")
    for name, color in zip(["fedavg"] + names, ["k"] + list(colors)):
        plotting.band_plot(axes[2], df[df.run == name], "test_acc", "run", palette=[color],
                           label=lambda r: r)
    fc.zoom_accuracy(axes[2], df, "test_acc")
    axes[2].set_ylabel("test accuracy")
    for ax in axes:
        ax.set_xlabel("round")
        ax.legend(fontsize=6)
    fig.suptitle(f"FedLADA stand-in, FedAdam readings (paper v0 = 1e-2, eps not given; "
                 f"author's code 0.01): {fc.setting_text(cfg)}", fontsize=9, y=1.02)
    return plotting.save(fig, cfg.figures, "fedlada_fedadam")


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    lines = [f"setting: {fc.setting_text(cfg)}, {cfg.rounds} rounds"] + notes
    rows = readings(df)
    lines.append(f"FedAdam readings at round {rows[0]['T'] if rows else '-'} (mean over "
                 f"seeds; adaptive: step spread >= {ADAPTIVE_SPREAD:g}):")
    lines.append("| eps | v0 | sqrt(v) 5th / 50th / 95th pct | decayed sqrt(v0 b2^T) | step "
                 "spread | adaptive | final test acc % | final train loss |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lines.append(f"| {r['eps']:g} | {r['v0']:g} | {r['sqrtv_p05']:.3g} / "
                     f"{r['sqrtv_p50']:.3g} / {r['sqrtv_p95']:.3g} | {r['decayed_init']:.3g} | "
                     f"{r['step_spread']:.2f} | {'yes' if r['adaptive'] else 'no'} | "
                     f"{100 * r['test_acc']:.1f} | {r['train_loss']:.4f} |")
    if rows and "fedavg_test_acc" in rows[0]:
        lines.append(f"FedAvg: final test accuracy {100 * rows[0]['fedavg_test_acc']:.1f} %, "
                     f"training loss {rows[0]['fedavg_train_loss']:.4f}")
    adaptive = [r["run"] for r in rows if r["adaptive"]]
    lines.append("adaptive readings: " + (", ".join(adaptive) if adaptive else "none"))
    return lines


def full_work(cfg):
    """One ``(participants, local epochs)`` per run (:mod:`reproduce.fedlada_cost`)."""
    return [(fc.participation(cfg).m, fc.epochs(cfg))] * (1 + len(READINGS))

DEFAULT_COST += "; " + fcost.entry_text(sys.modules[__name__])

if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
