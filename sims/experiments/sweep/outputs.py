"""What a finished sweep leaves behind: the whole grid's tables, the selection, the figures.

Under ``OUT/NAME/``: ``table.csv`` (every cell, tidy: one row per grid point, seed, round and
metric, the grid values as columns), ``grid.csv`` (one row per point: grid values, the rule's
score with its spread over seeds, final metrics, rank, ``selected``), ``selected.csv`` (the
selected rows of ``grid.csv``), ``selected_curves.csv`` (their tidy curves) and
``sweep.json`` (the sweep's provenance: grid, problem, rule, code identity, cells run and
reused, failures). Figures ``FIGURES/NAME_grid`` and ``FIGURES/NAME_ranked`` (PNG and PDF).
"""
from __future__ import annotations

import json
from pathlib import Path

from ...store.identity import code_identity
from ...store.results import atomic_write_bytes, versions
from .plots import grid_figure, ranked_figure
from .select import get_rule, select


def write_outputs(spec, result, rule: str = "final-acc", by=("algorithm",),
                  figures: str | None = "figures/sweep", reference: float | None = None) -> dict:
    """Save the tables and (with ``figures``) draw the figures; returns their paths and the
    summary (``"summary"``)."""
    folder = spec.folder
    table = result.table
    summary, curves = select(table, rule, by, reference)
    paths = {}
    for name, df in (("table", table), ("grid", summary),
                     ("selected", summary[summary["selected"]]), ("selected_curves", curves)):
        paths[name] = folder / f"{name}.csv"
        atomic_write_bytes(paths[name], df.to_csv(index=False).encode())
    r = get_rule(rule)
    record = {"sweep": spec.name, "grid": spec.grid.describe(), "problem": spec.problem,
              "participation": spec.participation, "rounds": spec.rounds,
              "seeds": spec.seeds, "eval_every": spec.eval_every,
              "rule": {"name": r.name, "metric": r.metric, "statistic": r.statistic,
                       "best": r.best, "source": r.source, "by": list(by)},
              "cells_run": result.ran, "cells_reused": result.reused,
              "cells_missing": len(result.missing), "failures": result.failures,
              "wall_s": round(result.wall_s, 3), "code": code_identity(),
              "versions": versions()}
    paths["record"] = folder / "sweep.json"
    atomic_write_bytes(paths["record"], json.dumps(record, indent=1, default=str).encode())
    if figures:
        fig_dir = Path(figures)
        paths["grid_figure"] = grid_figure(summary, spec.grid.columns,
                                           fig_dir / f"{spec.name}_grid",
                                           f"{spec.name}: {r.name} ({r.source})")[0]
        paths["ranked_figure"] = ranked_figure(table, fig_dir / f"{spec.name}_ranked",
                                               f"{spec.name}: every run, lighter = lower "
                                               "final loss")[0]
    paths["summary"] = summary
    return paths
