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
through :func:`sims.sweep.run_sweep` (every (point, seed) cell saved and resumed under
``OUT/sweeps/NAME``, keyed by the code identity; in-process, or on Ray when the
entry's config has ``executor="ray"`` / ``ray_address``) and returns the whole grid's tidy
table, the grid values as columns and ``run`` the point's label.
"""
from __future__ import annotations

from pathlib import Path

from sims.sweep import Axis, Grid, SweepSpec, run_sweep, select, summarize  # noqa: F401

from .common import Run

#: Fed-LAMB supplement Table 1 ("Search grids of the learning rate"), by registry name;
#: ``adp-fed`` sweeps the local and the global rate (spec fed-lamb 3.4).
FED_LAMB_TABLE1 = {
    "fed-sgd": {"eta_l": (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)},
    "fed-ams": {"eta_l": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)},
    "fed-lamb": {"eta_l": (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5),
                 "lam": (0.0, 0.01, 0.1)},
    "adp-fed": {"eta_l": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1,
                          0.3, 0.5),
                "eta": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)},
    "mime": {"eta_l": (0.0001, 0.0003, 0.0005, 0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1)},
    "mime-lamb": {"eta_l": (0.001, 0.003, 0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 0.5)},
}
FED_LAMB_TABLE1["mimelite"] = FED_LAMB_TABLE1["mime"]
FED_LAMB_TABLE1["mimelite-lamb"] = FED_LAMB_TABLE1["mime-lamb"]

#: Fed-EF App. B.1: every method tunes eta in {1e-4..10} and eta_l in {1e-4..1}.
FED_EF_TABLE1 = {"eta": (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0),
                 "eta_l": (1e-4, 1e-3, 1e-2, 1e-1, 1.0)}


def table_grid(table: dict, algorithms, fixed: dict | None = None,
               lr_only: bool = False) -> Grid:
    """A :class:`sims.sweep.Grid` of ``table``'s per-algorithm axes for ``algorithms``
    (``fixed[name]``: settings held fixed; ``lr_only``: leave out the non-rate axes, e.g.
    Fed-LAMB's lambda)."""
    fixed = fixed or {}
    axes = []
    for name in algorithms:
        for key, values in table[name].items():
            if lr_only and key not in ("eta", "eta_l"):
                continue
            axes.append(Axis(key, tuple(values), name))
    return Grid({name: dict(fixed.get(name, {})) for name in algorithms}, axes)


def fed_lamb_table1_grid(algorithms, fixed: dict | None = None, lr_only: bool = False) -> Grid:
    """Fed-LAMB supplement Table 1's grids (and MAIN Sec. 4's lambda in {0, 0.01, 0.1})."""
    return table_grid(FED_LAMB_TABLE1, algorithms, fixed, lr_only)


def fed_ef_table1_grid(algorithms, fixed: dict | None = None) -> Grid:
    """Fed-EF App. B.1's (eta, eta_l) grid for each of ``algorithms``."""
    return table_grid({a: FED_EF_TABLE1 for a in algorithms}, algorithms, fixed)


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
        for key, val in (params or {}).items():
            table[key] = val
        return table, {"sweep": grid.describe(), "cells_run": result.ran,
                       "cells_reused": result.reused, "failures": result.failures}
    return Run(name, {**(params or {}), "sweep": name, "grid": grid.describe()},
               rounds=rounds, eval_every=eval_every, execute=execute)
