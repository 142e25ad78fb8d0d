"""FedAda2 Figure 4 (bottom): full fine-tuning on GLD-23K (a GPU entry).

"Analogous experiments for full fine-tuning, where the entire net is unfrozen after replacing
the classification layer": the six methods of Figure 1 (Adam everywhere except FedAdaGrad) at
Tables 4-5's "GLD-23K (Full)" hyperparameters, the whole pretrained ViT-S/16 and a new linear
head trained together (:func:`sims.problems.finetune.full_finetune_problem`; 21.7M parameters a
client, images resized to 224 inside the model), 233 natural clients, ``q = 0.01``, 5 local
epochs of batch 32. Panels: test accuracy and test loss against rounds, 95 % intervals over
seeds.

Data: GLD-23K's split files and images and timm's ``vit_small_patch16_224`` safetensors in
``--data-dir`` (``--weights`` for another file); images are held in memory at
``--image-size`` (224: about 14 GB of float32 for the training set; a smaller size saves memory
and is resized up inside the model). Every client step differentiates the whole network: the
default refuses to start on a CPU (``--cpu-ok`` overrides; ``--tiny`` runs the stand-in for
seconds).

Stand-in (``--standin yes``, or ``auto`` when the data or weights are absent, as ``--tiny``
does): a small ViT (28x28 images, patch 7, width 32, depth 2, 2 heads; random initialisation,
*not* pretrained) trained whole on Fashion-MNIST over GLD-23K's stand-in clients (233
natural-like clients). It keeps the federated structure and the fact that every parameter is
trained and sent; it loses the pretrained features, so its curves say nothing about
fine-tuning a pretrained net.

Claim (spec 5, claim 16 read at full fine-tuning; no claim of its own in the paper's text):
every adaptive method above FedAvg; FedAda2 about DJA (final test accuracy, paired by seed).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

import matplotlib.pyplot as plt
import numpy as np
import torch

from reproduce import fedada2_tables as tables
from sims.data import DataError

from . import common, plotting
from . import fedada2_common as fc
from . import verdicts as vd

PAPER, TARGET = "FedAda2", "Figure 4 (bottom)"
TITLE = "Full fine-tuning of ViT-S on GLD-23K: test accuracy and loss of six methods"
GPU_ONLY = True          # the report: "not run here: GPU only" until a GPU run is filed
DEFAULT_COST = ("a GPU workload (every client step differentiates the 21.7M-parameter ViT-S; "
                "not measured here: no GPU); --tiny runs the CPU stand-in in seconds")

TABLE = "gld23k-full"
TINY_VIT = {"img_size": 28, "patch_size": 7, "embed_dim": 32, "depth": 2, "num_heads": 2}


@dataclass
class Config(fc.Config):
    settings: str = "gld23k"
    seeds: int = 3
    rounds: int = 300
    image_size: int = 224
    max_batch: int = 4
    cpu_ok: bool = False

    def scale(self):
        fc.Config.scale(self)
        if self.full:
            self.seeds = 20
        if self.tiny:
            self.cpu_ok, self.seeds, self.rounds = True, 2, 2

    def validate(self):
        fc.Config.validate(self)
        if fc.items(self.settings) != ["gld23k"]:
            raise common.EntryError("--settings: Figure 4 (bottom) is GLD-23K only (gld23k)")
        if self.image_size < 16:
            raise common.EntryError(f"--image-size must be >= 16, got {self.image_size}")
        common.refuse_cpu_default(self, "full fine-tuning of ViT-S (hours on a CPU)",
                                  "the small-ViT stand-in")

    @property
    def datasets(self) -> str:
        """The figure footer's data: the full fine-tuning problem's (not the linear head's)."""
        return data_text(self)


@lru_cache(maxsize=2)
def _build(data_dir, standin, weights, device, batch_size, epochs, eval_train, image_size):
    from sims.problems.finetune import full_finetune_problem
    kw = dict(batch_size=batch_size, local_epochs=epochs, eval_train_samples=eval_train or None,
              device=device)
    reason = None
    if standin != "yes":
        try:
            return _real(data_dir, weights, image_size, kw)
        except DataError as exc:
            if standin == "no":
                raise
            reason = str(exc)
    from sims.problems.backbones.vit import VisionTransformer
    from sims.data import load_dataset
    from sims.data.natural import natural_like
    from sims.problems.finetune import STANDIN
    ds = load_dataset("fmnist", data_dir)
    spec = {k: v for k, v in STANDIN["gld23k"].items() if k != "partition"}
    parts = natural_like(ds.y_train.numpy(), seed=0, **spec)
    torch.manual_seed(0)
    backbone = VisionTransformer(**TINY_VIT)
    prob = full_finetune_problem(ds, parts, backbone, **kw)
    return prob, {"standin": True, "reason": reason or "stand-in requested",
                  "source": f"small ViT {TINY_VIT} (random init) on Fashion-MNIST",
                  "n_clients": prob.n_clients, "d": prob.d}


def _real(data_dir, weights, image_size, kw):
    from sims.problems.backbones.weights import load_vit_backbone
    from sims.data.base import Dataset
    from sims.data.gld import load_gld23k
    from sims.problems.finetune import full_finetune_problem
    data = load_gld23k(data_dir)
    backbone, sha = load_vit_backbone(weights, data_dir)
    ds = Dataset("gld23k", data.read(data.train_paths, image_size),
                 torch.from_numpy(np.asarray(data.y_train, dtype=np.int64)),
                 data.read(data.test_paths, image_size),
                 torch.from_numpy(np.asarray(data.y_test, dtype=np.int64)),
                 data.num_classes, data.source)
    prob = full_finetune_problem(ds, data.parts, backbone, **kw)
    return prob, {"standin": False, "reason": None,
                  "source": f"GLD-23K {data.source}, ViT-S weights sha256 {sha[:12]}",
                  "n_clients": prob.n_clients, "d": prob.d}


def problem(cfg):
    standin = "yes" if cfg.tiny else cfg.standin
    return _build(cfg.data_dir, standin, cfg.weights, cfg.device, cfg.batch_size,
                  cfg.image_local_epochs, cfg.eval_train_samples, cfg.image_size)


def data_text(cfg) -> str:
    rec = problem(cfg)[1]
    if rec["standin"]:
        why = "requested" if "requested" in rec["reason"] else "real data absent"
        return f"GLD-23K (full): STAND-IN {rec['source']} ({why})"
    return f"GLD-23K (full): {rec['source']}"


def runs(cfg):
    out = []
    for m in fc.METHODS:
        def build(m=m):
            prob = problem(cfg)[0]
            return prob, tables.build(TABLE, m, **fc.warmup("gld23k", cfg)), fc.Participation(
                "fixed", m=max(int(fc.RATE["gld23k"] * prob.n_clients), 1))
        cell = tables.best(TABLE, m)
        out.append(common.Run(f"gld23k-full_{m}", {"setting": "gld23k-full", "method": m},
                              build=build, eval_every=cfg.eval_every, eval_grad=False,
                              max_batch=cfg.max_batch,
                              extra={"hyper": {"algorithm": cell.algorithm, **cell.hyper,
                                               **fc.warmup("gld23k", cfg)},
                                     "image_size": cfg.image_size}))
    return out


def plot(df, cfg):
    df = common.healthy(df)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, metric, name in ((axes[0], "test_acc", "test accuracy"),
                             (axes[1], "test_loss", "test loss")):
        fc.ci_plot(ax, df, metric, fc.METHODS, logy=metric == "test_loss")
        ax.set_ylabel(name)
    axes[0].legend(fontsize=7)
    stand = " stand-in" if problem(cfg)[1]["standin"] else ""
    fig.suptitle(f"FedAda2 Fig. 4 (bottom): GLD-23K full fine-tuning{stand}, Tables 4-5 (Full) "
                 f"(mean and 95% interval over {cfg.seeds} seeds)", fontsize=10)
    return plotting.save(fig, cfg.figures, "fedada2_fig4_bottom")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedada2_fig4_bottom",)
CLAIMS = vd.claims(
    vd.Claim("16g", "FedAda2", "GLD-23K full fine-tuning: every adaptive method ends above "
             "FedAvg", "every", "Figure 4 bottom, Tables 4-5 (Full)"),
    vd.Claim("16h", "FedAda2", "GLD-23K full fine-tuning: joint adaptivity converges faster than "
             "FedAdam", "faster", "Figure 4 bottom"),
    vd.Claim("16i", "FedAda2", "GLD-23K full fine-tuning: FedAda2 about equal to DJA",
             "about equal", "Figure 4 bottom"),
)


def check(df, cfg):
    df, notes = common.usable(sys.modules[__name__], cfg, df)
    lines = [f"setting: {data_text(cfg)}; {cfg.rounds} rounds, {cfg.seeds} seeds, "
             "Tables 4-5 (GLD-23K Full)"] + notes
    standin = problem(cfg)[1]["standin"]
    if standin:
        lines.append("STAND-IN: a small randomly initialised ViT, not pretrained ViT-S: the "
                     "numbers say nothing about the paper's full fine-tuning")
    final = fc.seed_scores(df, "test_acc", "final")
    name = lambda m: f"gld23k-full_{m}"  # noqa: E731
    lines.append("final test accuracy (%, 95% interval): " + " | ".join(
        f"{fc.label(m, True)} {fc.fmt_pp(fc.score_ci(final, name(m)))}" for m in fc.METHODS))
    if {name(m) for m in fc.METHODS} - set(df["run"].unique()):
        return lines + [vd.missing(c, c.statement) for c in CLAIMS.values()]
    from . import regime as rg
    card = rg.RegimeCard([rg.premise("pretrained ViT-S on GLD-23K", not standin,
                                     "Figure 4 bottom: full fine-tuning of ViT-S"),
                          rg.seeds(cfg.seeds, fc.PAPER_SEEDS, "Sec. 6: 20 seeds")])
    proto = fc.protocol("gld23k", cfg)
    have = set(df["run"].unique())
    acc = {m: fc.seeds_of(df, name(m)) for m in fc.METHODS if name(m) in have}
    C = CLAIMS
    out = [vd.every(C["16g"], [vd.above(C["16g"], acc[m], acc["fedavg"], margin=fc.MARGIN,
                                        unit="pp", scale=100,
                                        what=f"{fc.label(m, True)} - FedAvg final test accuracy")
                               for m in fc.METHODS if m != "fedavg"],
                    what="every adaptive method above FedAvg", card=card, protocol=proto),
           vd.missing(C["16h"], "joint adaptivity faster than FedAdam",
                      "no absolute target declared for full fine-tuning "
                      "(fedada2_common.TARGETS)"),
           vd.about_equal(C["16i"], acc["fedada2"], acc["dja"], fc.EQUAL_MARGIN, unit="pp",
                          scale=100, card=card, protocol=proto,
                          what="FedAda2 - DJA final test accuracy")]
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
