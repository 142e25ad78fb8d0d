"""Sweeps inside reproduction entries: a grid as one entry run, the papers' grids, selection.

An entry that compares methods each at its best setting (every comparative claim of the four
papers) needs three lines::

    from reproduce.sweeps import fed_lamb_table1_grid, select, sweep_run
    def runs(cfg):
        return [sweep_run("lr-grid", fed_lamb_table1_grid(["fed-sgd", "fed-lamb"]),
                          problem={...}, build_problem=my_builder, participation="m=25")]
    def check(df, cfg):
        summary, curves = select(df, "fed-lamb")        # the selected setting per method

:func:`sweep_run` returns a :class:`reproduce.common.Run` whose ``execute`` runs the grid
through :func:`sims.experiments.sweep.run_sweep` (every (point, seed) cell saved and resumed under
``OUT/sweeps/NAME``, keyed by the code identity; in-process, or on Ray when the
entry's config has ``executor="ray"`` / ``ray_address``) and returns the whole grid's tidy
table, the grid values as columns and ``run`` the point's label.
"""
from __future__ import annotations

from pathlib import Path

from sims.experiments.sweep import Grid, SweepSpec, run_sweep, select, summarize  # noqa: F401
from sims.experiments.sweep.tables import (FED_EF_TABLE1, FED_LAMB_TABLE1, fed_ef_table1_grid,  # noqa: F401
                               fed_lamb_table1_grid, table_grid)

from .common import Run

def sweep_run(name: str, grid: Grid, problem: dict, build_problem, participation: str, *,
              rounds: int | None = None, eval_every: int = 1, params: dict | None = None,
              plan: str = "auto") -> Run:
    """One entry run that is a whole sweep (see the module docstring). ``problem`` is the
    JSON description that ``build_problem(problem)`` builds (module-level function for Ray)."""
    def execute(cfg, seeds, progress):
        spec = SweepSpec(name, grid, problem, build_problem, participation=participation,
                         rounds=rounds or cfg.rounds, seeds=list(seeds), eval_every=eval_every,
                         out=str(Path(cfg.out) / "sweeps"), device=getattr(cfg, "device", "cpu"))
        cells = len(grid.points()) * len(seeds)
        result = run_sweep(spec, executor=getattr(cfg, "executor", "inprocess"), plan=plan,
                           ray_address=getattr(cfg, "ray_address", None),
                           threads=getattr(cfg, "threads", 0) or 1,
                           progress=lambda k: progress(k / cells))
        if result.missing:
            raise ValueError(f"sweep {name}: {len(result.missing)} cell(s) failed twice; see "
                             f"{spec.folder / 'failures.json'}")
        table = result.table.copy()
        for key, val in {"sweep": name, **(params or {})}.items():   # rows name their sweep
            table[key] = val
        return table, {"sweep": grid.describe(), "cells_run": result.ran,
                       "cells_reused": result.reused, "failures": result.failures}
    return Run(name, {**(params or {}), "sweep": name, "grid": grid.describe()},
               rounds=rounds, eval_every=eval_every, execute=execute)
