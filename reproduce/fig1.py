"""Fed-EF Figure 1: Sign compression without error feedback collapses.

MLP on MNIST, ``n = 200`` label-shard clients, Fed-SGD with ``eta = 1``, ``eta_l = 0.01``,
one local epoch of batch 32; full precision against direct Sign compression (Alg. 1, no
error feedback). Participation and the number of rounds are not stated (spec 4.7): full
participation; the CPU default runs 60 rounds (the gap is plain by then), ``--full`` 100. Fed-EF-SGD with the same Sign compressor is drawn as a
third curve (the paper's point that error feedback repairs it comes from its Figs. 2-5).

Claim (spec E1): direct Sign ends far below full precision.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

from sims.algorithms.fed_ef import FedEF
from sims.compress import Identity, Sign
from sims.participation import Participation

from . import common, plotting

PAPER, TARGET = "Fed-EF", "Figure 1"
TITLE = "Sign compression without error feedback against full precision, MLP on MNIST"
DEFAULT_COST = "about 5-7 min (embedded 4,000-image MNIST, 2 seeds, 60 rounds)"

VARIANTS = {
    "full precision": dict(compressor=Identity(), error_feedback=False),
    "Sign, no EF (Alg. 1)": dict(compressor=Sign(), error_feedback=False),
    "Sign, Fed-EF": dict(compressor=Sign(), error_feedback=True),
}


@dataclass
class Config(common.EntryConfig):
    seeds: int = 2
    rounds: int = 60
    dataset: str = "mnist"
    n: int = 200
    eta: float = 1.0
    eta_l: float = 0.01
    participation: str = "full"

    def scale(self):
        if self.full:
            self.seeds, self.rounds = 5, 100
        if self.tiny:
            self.seeds, self.rounds, self.n = 1, 5, 40


def runs(cfg):
    part = Participation.parse(cfg.participation)
    out = []
    for i, (label, kw) in enumerate(VARIANTS.items()):
        def build(kw=kw):
            problem = common.cached_problem(dataset=cfg.dataset, model="mlp", n_clients=cfg.n,
                                            data_dir=cfg.data_dir, device=cfg.device)
            return problem, FedEF(eta=cfg.eta, eta_l=cfg.eta_l, **kw), part
        out.append(common.Run(f"variant{i}", {"method": label}, build))
    return out


def plot(df, cfg):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    palette = ["tab:blue", "tab:red", "tab:green"]
    order = {label: i for i, label in enumerate(VARIANTS)}
    df = df.assign(order=df["method"].map(order))
    for ax, metric, ylabel in [(axes[0], "test_acc", "test accuracy"),
                               (axes[1], "train_loss", "train loss")]:
        plotting.band_plot(ax, df, metric, "order", palette=palette,
                           label=lambda i: list(VARIANTS)[int(i)])
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    fig.suptitle(f"Fed-SGD on {cfg.dataset.upper()}, MLP, n={cfg.n}, eta={cfg.eta:g}, "
                 f"eta_l={cfg.eta_l:g} ({cfg.seeds} seeds)")
    return plotting.save(fig, cfg.figures, "fedef_fig1")


def check(df, cfg):
    acc = plotting.final_values(df, "test_acc", "method")
    loss = plotting.final_values(df, "train_loss", "method")
    fp, sign = "full precision", "Sign, no EF (Alg. 1)"
    lines = ["final test accuracy: " + ", ".join(f"{k} {v:.3f}" for k, v in acc.items()),
             "final train loss: " + ", ".join(f"{k} {v:.3f}" for k, v in loss.items())]
    gap = acc[fp] - acc[sign]
    lines.append(f"direct Sign ends {gap * 100:.1f} accuracy points below full precision -> "
                 f"{'shows' if gap > 0.05 else 'does NOT show'} the collapse")
    return lines


if __name__ == "__main__":
    raise SystemExit(common.main(__import__(__name__)))
