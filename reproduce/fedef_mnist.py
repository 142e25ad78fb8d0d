"""What the Fed-EF MNIST entries (Figs. 1, 8, 9 and the MNIST half of Fig. 19) share: the
dataset in the paper's regime, and the handling of partial or diverged results in checks.

``--dataset mnist`` (the default) runs full MNIST from ``--data-dir`` when it is there,
else Fashion-MNIST at full size as the stand-in (:func:`sims.data.paper_dataset`: 300
samples a client at ``n = 200``, ``K = 10`` local steps of batch 32, as the paper), with a
one-line notice; every title names the dataset run. ``--dataset mnist-subset`` runs the
embedded 4,000-image subset (20 samples a client at ``n = 200``: one full-batch step, no
minibatch noise; the tests' tiny scale uses it for speed).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sims.data import dataset_label, paper_dataset, resolve_data_dir

from . import common


class PaperDataset:
    """Config mixin: ``dataset`` resolved to the data actually loaded, in the run key (a
    run on the stand-in is never reused for full MNIST, nor the other way round)."""

    def used_dataset(self) -> str:
        return paper_dataset(self.dataset, self.data_dir)

    def dataset_title(self) -> str:
        return dataset_label(self.dataset, self.data_dir)

    def run_key(self):
        resolve_data_dir(self.data_dir)     # a named directory that is not there: an error
        key = super().run_key()
        key["dataset"] = paper_dataset(self.dataset, self.data_dir, notice=False)
        return key


def problem(cfg, **kw):
    """The shared image problem (:func:`reproduce.common.cached_problem`) on the data the
    config resolves to."""
    return common.cached_problem(dataset=cfg.used_dataset(), data_dir=cfg.data_dir,
                                 device=cfg.device, **kw)


def present(df: pd.DataFrame, **params) -> bool:
    """Whether ``df`` has rows matching every ``column == value`` of ``params``."""
    mask = np.ones(len(df), dtype=bool)
    for k, v in params.items():
        if k not in df:
            return False
        mask &= (df[k] == v).to_numpy()
    return bool(mask.any())


# ------------------------------------------------------------------------------ regime
#: Fed-EF's regime (Sec. 5, spec 4.2): 200 clients of two 150-image label shards (300 images,
#: 10 local steps of batch 32 an epoch), 100 rounds; "multiple" runs (Fig. 8: 20 seeds).
PAPER_STEPS, PAPER_ROUNDS, PAPER_SEEDS = 10, 100, 20


def steps_of(prob) -> int:
    sizes = [len(p) for p in prob.parts]
    return int(math.ceil(float(np.mean(sizes)) / prob.batch_size)) if sizes else 0


def card(cfg, prob=None, *, m=None, m_paper=None, rounds_paper: int = PAPER_ROUNDS,
         seeds_paper: int = PAPER_SEEDS, extra=()):
    """A Fed-EF claim's regime card: local steps an epoch (the noise the speedup is about),
    clients a round (``m`` against ``m_paper``), the fraction of the paper's rounds, seeds."""
    from . import regime as rg
    items = []
    if prob is not None and hasattr(prob, "parts"):
        items.append(rg.steps_per_epoch(steps_of(prob), PAPER_STEPS,
                                        source="spec 4.2: 300 images a client, batch 32"))
    if m is not None and m_paper is not None:
        items.append(rg.clients_per_round(m, m_paper, source="Sec. 5"))
    items += [rg.horizon(cfg.rounds, rounds_paper, source=f"{rounds_paper} rounds"),
              rg.seeds(cfg.seeds, seeds_paper, "Sec. 5"), *extra]
    return rg.RegimeCard(items)
