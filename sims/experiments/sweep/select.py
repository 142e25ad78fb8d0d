"""The papers' selection rules: which grid point each method is reported at.

Every comparative claim of the four papers is made between methods each at its best
hyperparameters from a grid. A rule scores each (grid point, seed) from its curve, averages
the scores over seeds, and picks the best point per group (by default per algorithm):

============================ ===================================================================
rule                         score (mean over seeds) and source
============================ ===================================================================
``final-acc``                highest final test accuracy. FedLADA Sec. 4 ("we report the
                             best-performing" setting of each method's grid).
``last10-acc``               highest test accuracy averaged over the last 10 logged points
                             (FedAda2 App. H.1: "optimal test accuracy over a running average of
                             the last 10 logged datapoints"; read as the running average at the
                             end of training, i.e. the mean of the last 10 evaluations).
``final-train-loss``         lowest final training loss.
``fed-ef-table1``            Fed-EF App. B.1 / Table 1: the (eta, eta_l) "to attain highest
                             test accuracy"; the accuracy of Tables 2-5 is the one "at the end
                             of training", so the score is the final test accuracy (as
                             ``final-acc``).
``fed-ef-compression``       Fed-EF Sec. 5 (spec 4.4): per method (algorithm and compressor
                             family), "the curve with highest compression level that achieves
                             the best full-precision test accuracy (within 0.1%); if the method
                             does not match the full-precision performance, the curve with the
                             highest test accuracy". Decisions: "within 0.1%" is 0.1 percentage
                             points (spec 6.12); the compression level is the final cumulative
                             uplink bits (fewer = higher); the full-precision accuracy is the
                             best final test accuracy of the points with ``compressor=full``
                             (or ``reference`` when given).
``fed-lamb``                 Fed-LAMB MAIN Sec. 4 ("we take the model performance with the best
                             alpha and lambda"; the criterion is unstated, spec 3.4b). Decision
                             (spec 6's suggested default): highest final test accuracy averaged
                             over the seeds (as ``final-acc``).
============================ ===================================================================

A point any of whose seeds diverged (non-finite model, ``diverged_at`` set) or whose score is
not finite is ranked last and is never selected while a finite one exists. Ties go to the
point listed first in the grid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .grid import GridError


@dataclass(frozen=True)
class Rule:
    name: str
    metric: str
    statistic: str              # "final" or "last10"
    best: str                   # "max" or "min"
    source: str


RULES = {r.name: r for r in (
    Rule("final-acc", "test_acc", "final", "max", "FedLADA Sec. 4: best-performing setting"),
    Rule("last10-acc", "test_acc", "last10", "max",
         "FedAda2 App. H.1: running average of the last 10 logged points"),
    Rule("final-train-loss", "train_loss", "final", "min", "lowest final training loss"),
    Rule("fed-ef-table1", "test_acc", "final", "max",
         "Fed-EF App. B.1, Table 1: highest test accuracy at the end of training"),
    Rule("fed-ef-compression", "test_acc", "final", "max",
         "Fed-EF Sec. 5: highest compression within 0.1 pp of full precision"),
    Rule("fed-lamb", "test_acc", "final", "max",
         "Fed-LAMB Sec. 4: best alpha and lambda (criterion unstated; final accuracy)"),
)}

SUMMARY_METRICS = (("test_acc", "final"), ("test_acc", "last10"), ("test_loss", "final"),
                   ("train_loss", "final"), ("bits_up", "final"))


def get_rule(name: str) -> Rule:
    if name not in RULES:
        raise GridError(f"unknown selection rule {name!r}; choose one of {', '.join(RULES)}")
    return RULES[name]


def _statistic(values: pd.Series, statistic: str) -> float:
    if statistic == "final":
        return float(values.iloc[-1])
    return float(values.iloc[-10:].mean())


def per_seed(table: pd.DataFrame, metric: str, statistic: str) -> pd.DataFrame:
    """``[point, seed, score]``: each cell's ``statistic`` of ``metric`` over its rounds."""
    sub = table[table["metric"] == metric].sort_values(["point", "seed", "round"])
    if sub.empty:
        return pd.DataFrame(columns=["point", "seed", "score"])
    out = (sub.groupby(["point", "seed"], sort=False)["value"]
           .apply(lambda v: _statistic(v, statistic)).rename("score").reset_index())
    return out


def summarize(table: pd.DataFrame, rule: str = "final-acc", by=("algorithm",),
              reference: float | None = None) -> pd.DataFrame:
    """The whole grid's table: one row per point with its grid values, the rule's score
    (mean and std over seeds), the usual final metrics, its rank within its group (1 = best)
    and whether it is selected."""
    r = get_rule(rule)
    if table.empty:
        raise GridError("no results to select from")
    if not (table["metric"] == r.metric).any():
        raise GridError(f"rule {rule} needs the metric {r.metric!r}, which these results "
                        f"do not have (they have: {', '.join(sorted(table.metric.unique()))})")
    meta_cols = [c for c in table.columns if c not in ("seed", "round", "metric", "value",
                                                       "diverged_at")]
    order = list(dict.fromkeys(table["point"]))
    meta = table.drop_duplicates("point").set_index("point")[
        [c for c in meta_cols if c != "point"]]
    scores = per_seed(table, r.metric, r.statistic)
    agg = scores.groupby("point")["score"].agg(["mean", "std", "count"])
    summary = meta.copy()
    summary["score"] = agg["mean"]
    summary["score_std"] = agg["std"]
    summary["seeds"] = agg["count"]
    div = table.groupby("point")["diverged_at"].apply(lambda v: int(v.notna().any())
                                                      if len(v) else 0) \
        if "diverged_at" in table else pd.Series(0, index=summary.index)
    summary["diverged"] = div.reindex(summary.index).fillna(0).astype(bool)
    for metric, stat in SUMMARY_METRICS:
        if (table["metric"] == metric).any():
            s = per_seed(table, metric, stat).groupby("point")["score"].mean()
            summary[f"{stat}_{metric}"] = s
    summary = summary.reindex(order)
    summary.index.name = "point"
    summary = summary.reset_index()
    if "compressor" in summary:
        summary["compressor_family"] = summary["compressor"].astype(str).str.split("-").str[0]
    by = [b for b in by if b in summary]
    valid = np.isfinite(summary["score"].to_numpy(dtype=float)) & ~summary["diverged"]
    key = summary["score"].where(valid)
    summary["_key"] = -key if r.best == "max" else key
    summary["_order"] = np.arange(len(summary))
    summary["rank"] = 0
    summary["selected"] = False
    groups = summary.groupby(by, sort=False) if by else [((), summary)]
    for _, g in groups:
        ranked = g.sort_values(["_key", "_order"], na_position="last")
        summary.loc[ranked.index, "rank"] = np.arange(1, len(g) + 1)
        if rule == "fed-ef-compression":
            chosen = _fed_ef_compression(summary, g, reference)
        else:
            chosen = ranked.index[0] if np.isfinite(ranked["_key"].iloc[0]) else None
        if chosen is not None:
            summary.loc[chosen, "selected"] = True
    summary["rule"] = rule
    return summary.drop(columns=["_key", "_order"])


def _fed_ef_compression(summary, group, reference, tol: float = 0.001):
    """Fed-EF's rule (module docstring) within one method's group."""
    if reference is None:
        if "compressor" not in summary:
            raise GridError("fed-ef-compression needs a compressor axis with 'full' or a "
                            "reference accuracy")
        full = summary[(summary["compressor"].astype(str) == "full") & ~summary["diverged"]]
        if full.empty or not np.isfinite(full["score"]).any():
            raise GridError("fed-ef-compression: no full-precision point (compressor=full) "
                            "to take the reference accuracy from; pass reference=")
        reference = float(full["score"].max())
    g = group[np.isfinite(group["score"].astype(float)) & ~group["diverged"]]
    if g.empty:
        return None
    ok = g[g["score"] >= reference - tol]
    if not ok.empty and "final_bits_up" in ok:
        return ok.sort_values(["final_bits_up", "score"], ascending=[True, False]).index[0]
    return g.sort_values("score", ascending=False).index[0]


def select(table: pd.DataFrame, rule: str = "final-acc", by=("algorithm",),
           reference: float | None = None):
    """``(summary, selected_curves)``: the whole grid's table (:func:`summarize`) and the
    tidy rows of the selected points."""
    summary = summarize(table, rule, by, reference)
    chosen = set(summary.loc[summary["selected"], "point"])
    return summary, table[table["point"].isin(chosen)].reset_index(drop=True)
