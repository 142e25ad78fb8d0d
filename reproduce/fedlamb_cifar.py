"""Fed-LAMB main Figures 3-4: CIFAR-10, iid: the 3-conv + 2-FC CNN and ResNet-9.

The paper's setting (MAIN Sec. 4, spec 3.1-3.3): the same federated regime as Figures 1-2
(50 clients, 25 active per round, local batch 32, beta = (0.9, 0.999), each method at its
best Table 1 rate and Fed-LAMB at its best lambda, 3 runs) on CIFAR-10 split iid; Figure 3
the CNN "with three convolutional layers followed by two fully-connected layers"
(``cifar-cnn``: the TensorFlow tutorial net, widths not given), Figure 4 "a ResNet-9"
(``resnet9``: Page's DAWNBench net with **GroupNorm (2 groups) in place of BatchNorm**, since
batched clients carry no running statistics; :mod:`sims.problems.models`). No augmentation (the
paper names none; ``--augment crop-flip`` adds Fed-EF's). Readings and selection as in
:mod:`reproduce.fedlamb_fig12` (printed reading dashed at the MNIST CNN pilot's eps, or
``--printed-eps``). Claims: E2 (same ordering as E1: Fed-LAMB above Fed-AMS and Fed-SGD)
and E3 (for each number of local epochs).

CIFAR-10 is read from ``--data-dir`` (``DIR/cifar-10-batches-py``); nothing is downloaded.
The default (E = 1, 2 seeds, 100 rounds, one point per method: ``--grid best``, the
best points of the recorded main-figure CNN pilot on MNIST,
:data:`reproduce.fedlamb_common.PILOT_BEST`; ``--grid near`` / ``--full`` tune on CIFAR) is
a GPU job (``--device cuda``); on this CPU only ``--tiny`` is sensible (one round of 2
clients on a handful of images; the tests run it on fixture files), other CPU runs need
``--cpu-ok``. Not run on a GPU in this project so far (none was lent to the sessions that
built it).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import common
from . import fedlamb_common as fl
from . import verdicts as vd

PAPER, TARGET = "Fed-LAMB", "Figures 3-4"
TITLE = "CIFAR-10 iid, CNN and ResNet-9 (GroupNorm): Fed-LAMB vs Fed-AMS and Fed-SGD"
GPU_ONLY = True          # the report: "not run here: GPU only" until a GPU run is filed
DEFAULT_COST = ("GPU only (--data-dir with CIFAR-10, --device cuda; not run here); on this "
                "CPU only --tiny (~10 s)")

METHODS = ("fed-sgd", "fed-ams", "fed-lamb")
MODEL_LABEL = {"cifar-cnn": "CNN (3 conv + 2 FC)", "resnet9": "ResNet-9 (GroupNorm)"}


@dataclass
class Config(fl.Config):
    rounds: int = 100
    models: str = "cifar-cnn,resnet9"
    epochs: str = "1"
    m: int = 25
    eval_every: int = 5
    augment: str = "none"
    test_samples: int = 0             # 0: the whole test set
    eval_train: int = 5000            # training images for the train loss (0: all)
    cpu_ok: bool = False

    def scale(self):
        if self.full:
            self.seeds, self.epochs, self.grid, self.eval_every = 3, "1,3,5", "table1", 1
        if self.tiny:
            self.seeds, self.rounds, self.n, self.m, self.eval_every = 2, 1, 2, 1, 1
            self.eval_train, self.cpu_ok = 0, True


def settings(cfg) -> list[fl.Setting]:
    return fl.model_epoch_settings(cfg, MODEL_LABEL, "cifar10", "iid", "CIFAR-10 iid")


def methods(cfg) -> list[str]:
    return fl.chosen_methods(cfg, METHODS)


def runs(cfg):
    common.refuse_cpu_default(cfg, "a GPU job (CIFAR-10, 50 clients, 100 rounds)",
                              "a two-round check")
    if cfg.augment not in ("none", "crop-flip"):
        raise common.EntryError(f"--augment must be none or crop-flip, got {cfg.augment!r}")
    if not 1 <= cfg.m <= cfg.n:
        raise common.EntryError(f"--m must be in [1, --n], got m={cfg.m}, n={cfg.n}")
    kw = {"augment": None if cfg.augment == "none" else cfg.augment,
          "test_samples": cfg.test_samples or None}
    if cfg.eval_train:
        kw["eval_train_samples"] = cfg.eval_train
    return fl.make_runs(cfg, settings(cfg), methods(cfg), lambda s, m: fl.PILOT_BEST[m], kw)


def plot(df, cfg):
    title = (f"Fed-LAMB Figs. 3-4: CIFAR-10 iid, n={cfg.n}, {cfg.m} per round, batch "
             f"{cfg.batch}; grid '{cfg.grid}', {cfg.seeds} seed(s), mean and seed range\n"
             + fl.READINGS_NOTE)
    return fl.plot_panels(df, cfg, settings(cfg), methods(cfg), title, "fedlamb_cifar")


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedlamb_cifar",)
CLAIMS = vd.claims(
    vd.Claim("E2", "Fed-LAMB", "CIFAR-10 iid, 3-conv CNN and ResNet-9: Fed-LAMB above Fed-AMS and "
             "Fed-SGD (the E1 ordering)", "every", "MAIN Figs. 3-4; spec 4 E2"),
)


def check(df, cfg):
    lines = fl.header_lines(sys.modules[__name__], cfg, df, "cifar10", cfg.n, cfg.batch)
    chosen = fl.select_best(df, cfg.rounds)
    proto = fl.protocol(cfg, 12)
    out = []
    for s in settings(cfg):
        card = fl.card(cfg, s, proto, steps_paper=31, clients_paper=25)
        out.append(fl.compare(chosen, df, s.key, ["fed-lamb"], ["fed-ams", "fed-sgd"],
                              CLAIMS["E2"], card=card, protocol=proto, scope=s.title))
    lines += fl.selection_lines(chosen)
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))
