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


def diverged_replicas(df: pd.DataFrame) -> pd.Series:
    """``{(run, seed): round}`` of the replicas that diverged: from the results'
    ``diverged_at`` column where they carry one, else the first evaluation round at which
    an evaluated metric (train loss, gradient norm, accuracy) is not finite."""
    if not len(df):
        return pd.Series(dtype=float)
    if "diverged_at" in df:
        bad = df[df["diverged_at"].notna()]
        return bad.groupby(["run", "seed"])["diverged_at"].first()
    ev = df[df.metric.isin(EVAL_METRICS)]
    bad = ev[~np.isfinite(ev["value"].astype(float))]
    return bad.groupby(["run", "seed"])["round"].min()


EVAL_METRICS = ("train_loss", "grad_norm2", "test_acc", "test_loss", "qA2")


def usable(entry, cfg, df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``(healthy rows, lines)``: ``df`` without diverged replicas (:func:`diverged_replicas`;
    :func:`reproduce.common.healthy` once results carry ``diverged_at``), and lines naming
    the runs with no results (:func:`reproduce.common.missing_runs`) and the replicas left
    out as diverged. A diverged run is never evidence."""
    lines = []
    missing = common.missing_runs(entry, cfg, df)
    if missing:
        lines.append(f"missing results for {len(missing)} run(s): {', '.join(missing)} "
                     "(no verdict that needs them)")
    bad = diverged_replicas(df)
    ok = common.healthy(df)
    if len(bad):
        keys = pd.MultiIndex.from_frame(ok[["run", "seed"]])
        ok = ok[~keys.isin(bad.index)]
        lines.append(f"DIVERGED: {len(bad)} replica(s) left out (never evidence): " + ", ".join(
            f"{run} seed {seed} at round {int(r)}" for (run, seed), r in bad.items()))
    return ok, lines


def present(df: pd.DataFrame, **params) -> bool:
    """Whether ``df`` has rows matching every ``column == value`` of ``params``."""
    mask = np.ones(len(df), dtype=bool)
    for k, v in params.items():
        if k not in df:
            return False
        mask &= (df[k] == v).to_numpy()
    return bool(mask.any())
